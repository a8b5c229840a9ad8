/*
 * The report: a table for people (default) or JSON for scripts (--json; --json-out FILE writes it
 * beside the table), and the exit status: 0 when every link is OK, no check FAILed and the run
 * finished; 1 otherwise (the pairs at fault are named).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

static const char *const link_names[] = {[LINK_OK] = "OK", [LINK_DEGRADED] = "DEGRADED", [LINK_DOWN] = "DOWN",
                                         [LINK_UNTESTED] = "UNTESTED"};
static const char *const check_names[] = {[CHECK_OK] = "OK", [CHECK_INFO] = "INFO", [CHECK_WARN] = "WARN",
                                          [CHECK_FAIL] = "FAIL"};

/* "rank 2 (pid 4242 on host-a)" over shared memory, "rank 2 (host-b 10.0.0.2:41234)" over TCP:
 * the address the library listens on for r, as its peer in the pair named it. */
static void who(const doctor_t *doc, uint32_t r, const doc_transport_t *t, int is_a, char *buf, size_t len)
{
    const doc_info_t *i = &doc->infos[r];
    const char *addr = is_a ? t->addr_a : t->addr_b;

    if (t->kind_id == KIND_SHM)
        snprintf(buf, len, "rank %u (pid %d on %s)", r, i->pid, i->hostname);
    else
        snprintf(buf, len, "rank %u (%s %s)", r, i->hostname, addr[0] != '\0' ? addr : i->ifaddr);
}

/* Worst link status, and 1 if a check failed. */
static int verdict(const doctor_t *doc, const doc_link_t *links, const doc_check_t *checks, uint32_t nchecks,
                   doc_link_status_t *worst_p)
{
    doc_link_status_t worst = LINK_OK;
    int failed = 0;

    for (uint32_t a = 0; a < doc->size; a++)
        for (uint32_t b = a + 1; b < doc->size; b++) {
            doc_link_status_t s = links[(uint64_t)a * doc->size + b].status;
            if (s == LINK_DOWN || (s == LINK_DEGRADED && worst != LINK_DOWN) || (s == LINK_UNTESTED && worst == LINK_OK))
                worst = s;
        }
    for (uint32_t i = 0; i < nchecks; i++)
        failed |= checks[i].level == CHECK_FAIL;
    *worst_p = worst;
    return worst != LINK_OK || failed || doc->stopped[0] != '\0';
}

static void matrix(const doctor_t *doc, FILE *out, const char *title, int bandwidth)
{
    uint32_t n = doc->size;
    char g[16];

    fprintf(out, "\n%s\n      ", title);
    for (uint32_t b = 0; b < n; b++)
        fprintf(out, "%8u", b);
    fprintf(out, "\n");
    for (uint32_t a = 0; a < n; a++) {
        fprintf(out, "  %4u", a);
        for (uint32_t b = 0; b < n; b++) {
            const doc_pair_t *p = doc_pair(doc, a, b);
            if (a == b || !p->measured)
                fprintf(out, "%8s", "-");
            else if (p->down)
                fprintf(out, "%8s", "DOWN");
            else if (bandwidth)
                fprintf(out, "%8s", doc_gbps(a < b ? p->bw_ab : p->bw_ba, g, sizeof(g)));
            else
                fprintf(out, "%8.1f", p->lat_us);
        }
        fprintf(out, "\n");
    }
}

static void table(const doctor_t *doc, const doc_transport_t *tr, const doc_link_t *links, const doc_check_t *checks,
                  uint32_t nchecks, FILE *out)
{
    uint32_t n = doc->size, *host_of = calloc(n, sizeof(uint32_t)), hosts = doc_hosts(doc->infos, n, host_of);

    fprintf(out, "hccl-doctor: %u ranks on %u host%s, libhccl %u.%u.%u, checked in %.1f s\n", n, hosts,
            hosts == 1 ? "" : "s", doc->infos[0].version / 10000, doc->infos[0].version / 100 % 100,
            doc->infos[0].version % 100, doc->elapsed_s);
    fprintf(out, "links: one-way latency of 8 B (median of up to %u round trips / 2); bandwidth of %llu-byte messages "
                 "on %s buffers, best of up to 3 trials; transports as %s\n\n", doc->lat_iters,
            (unsigned long long)doc->bw_bytes, doc->plain ? "malloc" : "aclrtMalloc",
            n > 1 && tr[1].source != NULL && strcmp(tr[1].source, "library") == 0 ? "the library reports them (HcclHostGetLinkInfo)"
                                                          : "the doctor's probe found them");
    fprintf(out, "  %-6s %-4s %-52s %9s %9s %9s  %s\n", "pair", "via", "transport", "lat us", "a->b GB/s",
            "b->a GB/s", "status");
    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = a + 1; b < n; b++) {
            const doc_pair_t *p = doc_pair(doc, a, b);
            const doc_link_t *l = &links[(uint64_t)a * n + b];
            const doc_transport_t *t = &tr[(uint64_t)a * n + b];
            char pair[32], g1[16], g2[16];
            snprintf(pair, sizeof(pair), "%u-%u", a, b);
            if (p->down || !p->measured)
                fprintf(out, "  %-6s %-4s %-52s %9s %9s %9s  %s", pair, t->kind, t->detail, "-", "-", "-",
                        link_names[l->status]);
            else
                fprintf(out, "  %-6s %-4s %-52s %9.1f %9s %9s  %s", pair, t->kind, t->detail, p->lat_us,
                        doc_gbps(p->bw_ab, g1, sizeof(g1)), doc_gbps(p->bw_ba, g2, sizeof(g2)), link_names[l->status]);
            fprintf(out, "%s%s%s\n", l->reason[0] ? ": " : "", l->reason, p->retested && l->status == LINK_OK ?
                    " (measured twice)" : "");
        }
    matrix(doc, out, "latency (us, one way)", 0);
    matrix(doc, out, "bandwidth (GB/s, row sends to column)", 1);
    fprintf(out, "\nenvironment\n");
    for (uint32_t i = 0; i < nchecks; i++)
        fprintf(out, "  %-5s %-20s %s\n", check_names[checks[i].level], checks[i].name, checks[i].text);
    free(host_of);
}

static void result_lines(const doctor_t *doc, const doc_transport_t *tr, const doc_link_t *links,
                         const doc_check_t *checks, uint32_t nchecks, FILE *out)
{
    for (uint32_t a = 0; a < doc->size; a++)
        for (uint32_t b = a + 1; b < doc->size; b++) {
            const doc_link_t *l = &links[(uint64_t)a * doc->size + b];
            char wa[160], wb[160];
            if (l->status == LINK_OK)
                continue;
            who(doc, a, &tr[(uint64_t)a * doc->size + b], 1, wa, sizeof(wa));
            who(doc, b, &tr[(uint64_t)a * doc->size + b], 0, wb, sizeof(wb));
            fprintf(out, "%s: %s - %s: %s\n", link_names[l->status], wa, wb, l->reason);
        }
    for (uint32_t i = 0; i < nchecks; i++)
        if (checks[i].level == CHECK_FAIL)
            fprintf(out, "FAIL: %s: %s\n", checks[i].name, checks[i].text);
    if (doc->stopped[0] != '\0')
        fprintf(out, "STOPPED: %s; pairs after it were not measured\n", doc->stopped);
}

static cJSON *json_link(const doctor_t *doc, const doc_transport_t *t, const doc_link_t *l, uint32_t a, uint32_t b)
{
    const doc_pair_t *p = doc_pair(doc, a, b);
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "a", a);
    cJSON_AddNumberToObject(o, "b", b);
    cJSON_AddStringToObject(o, "host_a", doc->infos[a].hostname);
    cJSON_AddStringToObject(o, "host_b", doc->infos[b].hostname);
    cJSON_AddNumberToObject(o, "pid_a", doc->infos[a].pid);
    cJSON_AddNumberToObject(o, "pid_b", doc->infos[b].pid);
    cJSON_AddStringToObject(o, "transport", t->kind);
    cJSON_AddStringToObject(o, "source", t->source);
    cJSON_AddStringToObject(o, "link_ab", doc_link_text(doc, a, b));
    cJSON_AddStringToObject(o, "link_ba", doc_link_text(doc, b, a));
    if (t->kind_id == KIND_SHM)
        cJSON_AddBoolToObject(o, "cma", t->cma);
    if (t->kind_id == KIND_TCP) {
        cJSON_AddStringToObject(o, "address_a", t->addr_a[0] != '\0' ? t->addr_a : doc->infos[a].ifaddr);
        cJSON_AddStringToObject(o, "address_b", t->addr_b[0] != '\0' ? t->addr_b : doc->infos[b].ifaddr);
        cJSON_AddNumberToObject(o, "sockets", t->nsocks);
    }
    cJSON_AddStringToObject(o, "detail", t->detail);
    if (p->measured && !p->down) {
        cJSON_AddNumberToObject(o, "latency_us", p->lat_us);
        cJSON_AddNumberToObject(o, "bw_ab_gbps", p->bw_ab);
        cJSON_AddNumberToObject(o, "bw_ba_gbps", p->bw_ba);
    }
    if (p->clock_measured)
        cJSON_AddNumberToObject(o, "clock_offset_us", p->clock_offset_us);
    cJSON_AddStringToObject(o, "status", link_names[l->status]);
    cJSON_AddStringToObject(o, "reason", l->reason);
    return o;
}

/* The port check's failures: one object per rank and listener it could not reach. */
static void json_ports(const doctor_t *doc, cJSON *root)
{
    cJSON *arr = cJSON_AddArrayToObject(root, "closed_ports");

    for (uint32_t r = 0; doc->reach != NULL && r < doc->size; r++)
        for (uint32_t k = 0; k < doc->reach[r].nfail; k++) {
            cJSON *o = cJSON_CreateObject(), *ports = cJSON_CreateArray();
            uint32_t to = doc->reach[r].fail[k].to;
            cJSON_AddNumberToObject(o, "from", r);
            cJSON_AddStringToObject(o, "from_host", doc->infos[r].hostname);
            cJSON_AddNumberToObject(o, "to", to);
            cJSON_AddStringToObject(o, "to_host", doc->infos[to].hostname);
            cJSON_AddStringToObject(o, "address", doc->listen[to].addr);
            for (uint32_t i = 0; i < DOC_PORT_RANGE; i++)
                if (doc->reach[r].fail[k].mask & (1u << i))
                    cJSON_AddItemToArray(ports, cJSON_CreateNumber(doc->listen[to].base + i));
            cJSON_AddItemToObject(o, "ports", ports);
            cJSON_AddStringToObject(o, "error", strerror(doc->reach[r].fail[k].err));
            cJSON_AddItemToArray(arr, o);
        }
}

static void json(const doctor_t *doc, const doc_transport_t *tr, const doc_link_t *links, const doc_check_t *checks,
                 uint32_t nchecks, doc_link_status_t worst, int code, FILE *out)
{
    cJSON *root = cJSON_CreateObject(), *ranks = cJSON_AddArrayToObject(root, "ranks");
    cJSON *arr = cJSON_AddArrayToObject(root, "links"), *env = cJSON_AddArrayToObject(root, "checks");
    char *text;

    cJSON_AddNumberToObject(root, "size", doc->size);
    cJSON_AddNumberToObject(root, "elapsed_s", doc->elapsed_s);
    cJSON_AddNumberToObject(root, "bw_bytes", (double)doc->bw_bytes);
    cJSON_AddStringToObject(root, "buffers", doc->plain ? "malloc" : "aclrtMalloc");
    for (uint32_t r = 0; r < doc->size; r++) {
        cJSON *o = cJSON_CreateObject();
        char list[256];
        doc_info_cpu_list(&doc->infos[r], list, sizeof(list));
        cJSON_AddNumberToObject(o, "rank", r);
        cJSON_AddStringToObject(o, "host", doc->infos[r].hostname);
        cJSON_AddNumberToObject(o, "pid", doc->infos[r].pid);
        cJSON_AddStringToObject(o, "cpus", list);
        cJSON_AddStringToObject(o, "library", doc->infos[r].lib_path);
        cJSON_AddStringToObject(o, "build", doc->infos[r].lib_build);
        cJSON_AddStringToObject(o, "interface", doc->infos[r].ifname);
        cJSON_AddStringToObject(o, "address", doc->infos[r].ifaddr);
        cJSON_AddNumberToObject(o, "mtu", doc->infos[r].mtu);
        if (doc->infos[r].if_speed_mbps > 0)
            cJSON_AddNumberToObject(o, "speed_mbps", doc->infos[r].if_speed_mbps);
        cJSON_AddItemToArray(ranks, o);
    }
    for (uint32_t a = 0; a < doc->size; a++)
        for (uint32_t b = a + 1; b < doc->size; b++)
            cJSON_AddItemToArray(arr, json_link(doc, &tr[(uint64_t)a * doc->size + b],
                                                &links[(uint64_t)a * doc->size + b], a, b));
    for (uint32_t i = 0; i < nchecks; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", checks[i].name);
        cJSON_AddStringToObject(o, "level", check_names[checks[i].level]);
        cJSON_AddStringToObject(o, "text", checks[i].text);
        cJSON_AddItemToArray(env, o);
    }
    json_ports(doc, root);
    cJSON_AddStringToObject(root, "links_status", link_names[worst]);
    if (doc->stopped[0] != '\0')
        cJSON_AddStringToObject(root, "stopped", doc->stopped);
    cJSON_AddNumberToObject(root, "exit", code);
    text = cJSON_Print(root);
    if (text != NULL)
        fprintf(out, "%s\n", text);
    free(text);
    cJSON_Delete(root);
}

int doc_report(const doctor_t *doc, const doc_transport_t *tr, const doc_link_t *links, const doc_check_t *checks,
               uint32_t nchecks, FILE *out)
{
    doc_link_status_t worst;
    int code = verdict(doc, links, checks, nchecks, &worst);

    if (out == NULL)
        return code;
    if (doc->json_out != NULL) {
        FILE *f = fopen(doc->json_out, "w");
        if (f == NULL)
            fprintf(stderr, "hccl-doctor: cannot write %s: %s\n", doc->json_out, strerror(errno));
        else {
            json(doc, tr, links, checks, nchecks, worst, code, f);
            fclose(f);
        }
    }
    if (doc->json) {
        json(doc, tr, links, checks, nchecks, worst, code, out);
        return code;
    }
    table(doc, tr, links, checks, nchecks, out);
    fprintf(out, "\n");
    result_lines(doc, tr, links, checks, nchecks, out);
    fprintf(out, "hccl-doctor: %s\n", code == 0 ? "every link OK" : doc->stopped[0] != '\0' ? "stopped early (exit 1)"
                                                                                 : "problems found (exit 1)");
    return code;
}
