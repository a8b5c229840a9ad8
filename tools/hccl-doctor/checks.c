/*
 * The environment checks: facts that explain slow or failing jobs, each OK, INFO, WARN or FAIL
 * (FAIL changes the exit status, the others never do). Inside a host: the library each rank runs,
 * memfd segments, cross-memory attach, CPU binding, huge pages, load. Between hosts: the network
 * interface and address the library uses on each host and the variables that chose them, MTU,
 * ports closed by a firewall (ports.c), clock offsets.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

static int first_of_host(const uint32_t *host_of, uint32_t r)
{
    for (uint32_t i = 0; i < r; i++)
        if (host_of[i] == host_of[r])
            return 0;
    return 1;
}

static doc_check_t *check(doc_check_t *c, uint32_t *n, const char *name, doc_check_level_t level)
{
    doc_check_t *it = &c[(*n)++];

    it->name = name;
    it->level = level;
    it->text[0] = '\0';
    return it;
}

static void append(doc_check_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(doc_check_t *c, const char *fmt, ...)
{
    size_t used = strlen(c->text);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->text + used, sizeof(c->text) - used, fmt, ap);
    va_end(ap);
}

static void check_library(const doctor_t *doc, doc_check_t *c, uint32_t *nc)
{
    const doc_info_t *r0 = &doc->infos[0];
    doc_check_t *it = check(c, nc, "library", CHECK_OK);

    for (uint32_t i = 1; i < doc->size; i++) {
        const doc_info_t *ri = &doc->infos[i];
        if (ri->version != r0->version) {
            it->level = CHECK_FAIL;
            append(it, "rank %u (host %s) runs libhccl %u.%u.%u, rank 0 runs %u.%u.%u; ", i, ri->hostname,
                   ri->version / 10000, ri->version / 100 % 100, ri->version % 100, r0->version / 10000,
                   r0->version / 100 % 100, r0->version % 100);
        } else if (strcmp(ri->lib_build, r0->lib_build) != 0) {
            it->level = it->level == CHECK_FAIL ? CHECK_FAIL : CHECK_WARN;
            append(it, "rank %u (host %s) runs another build of libhccl (%s, build %.16s) than rank 0 (%s, build "
                       "%.16s); ", i, ri->hostname, ri->lib_path, ri->lib_build, r0->lib_path, r0->lib_build);
        }
    }
    if (it->level == CHECK_OK)
        append(it, "libhccl %u.%u.%u, build %.16s, on every rank (%s)", r0->version / 10000, r0->version / 100 % 100,
               r0->version % 100, r0->lib_build, r0->lib_path);
}

static void check_shm(const doctor_t *doc, const uint32_t *host_of, doc_check_t *c, uint32_t *nc)
{
    doc_check_t *it = check(c, nc, "shared memory", CHECK_OK);

    for (uint32_t i = 0; i < doc->size; i++)
        if (!doc->infos[i].memfd_ok) {
            it->level = CHECK_FAIL;
            append(it, "rank %u (host %s) cannot create, size and map a memfd: hostccl's segments and arena need "
                       "it; ", i, doc->infos[i].hostname);
        }
    if (it->level == CHECK_OK)
        append(it, "memfd segments work on every rank; ");
    for (uint32_t i = 0; i < doc->size; i++)
        if (first_of_host(host_of, i))
            append(it, "/dev/shm on %s: %.1f GiB, %.1f GiB free; ", doc->infos[i].hostname,
                   (double)doc->infos[i].shm_size / (1 << 30), (double)doc->infos[i].shm_free / (1 << 30));
    append(it, "(hostccl does not use /dev/shm; other libraries of the job may)");
}

static void check_cma(const doctor_t *doc, doc_check_t *c, uint32_t *nc)
{
    doc_check_t *it = check(c, nc, "cross-memory attach", CHECK_OK);
    uint32_t n = doc->size, denied = 0, local = 0;
    char scope[80];

    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = 0; b < n; b++)
            if (a != b && doc->cma[(uint64_t)a * n + b] >= 0) {
                local++;
                denied += doc->cma[(uint64_t)a * n + b] == 0;
            }
    if (local == 0) {
        append(it, "no two ranks share a host");
        return;
    }
    if (doc->infos[0].ptrace_scope < 0)
        snprintf(scope, sizeof(scope), "no Yama ptrace scope");
    else
        snprintf(scope, sizeof(scope), "Yama ptrace_scope %d%s", doc->infos[0].ptrace_scope,
                 doc->infos[0].ptrace_scope == 1 ? ": only ancestors may attach" : "");
    if (denied == 0) {
        append(it, "allowed between every two ranks of a host (%s): plain (malloc) buffers can move in one copy "
                   "where that pays (docs/performance.md)",
               scope);
        return;
    }
    it->level = CHECK_WARN;
    append(it, "denied for %u of %u rank pairs (%s): collectives and Send/Recv on plain (malloc) buffers copy "
               "twice; aclrtMalloc buffers are not affected. To allow it: sysctl -w kernel.yama.ptrace_scope=0 (or "
               "run the ranks in one container without a seccomp profile that forbids process_vm_readv)",
           denied, local, scope);
}

static void check_cpus(const doctor_t *doc, const uint32_t *host_of, uint32_t hosts, doc_check_t *c, uint32_t *nc)
{
    doc_check_t *it = check(c, nc, "CPU binding", CHECK_OK);

    for (uint32_t h = 0; h < hosts; h++) {
        uint32_t ranks = 0, shared = 0, unbound = 0, cpus = 0;
        const char *name = "";
        for (uint32_t i = 0; i < doc->size; i++) {
            if (host_of[i] != h)
                continue;
            ranks++;
            cpus = doc->infos[i].cpus_online;
            name = doc->infos[i].hostname;
            unbound += doc->infos[i].cpus_allowed >= doc->infos[i].cpus_online;
            for (uint32_t j = i + 1; j < doc->size; j++)
                shared += host_of[j] == h && doc_info_share_cpus(&doc->infos[i], &doc->infos[j]);
        }
        append(it, "%s: %u ranks on %u CPUs", name, ranks, cpus);
        if (ranks > cpus) {
            it->level = CHECK_WARN;
            append(it, ", oversubscribed: a waiting rank gives its CPU to another, and %u pairs share one CPU "
                       "(their latency is a context switch)", shared);
        } else if (shared > 0) {
            it->level = CHECK_WARN;
            append(it, ", but %u pairs of ranks are bound to one CPU between them: bind each rank to its own CPUs "
                       "(hccl-run does by default; mpirun --bind-to core)", shared);
        }
        if (unbound > 0)
            append(it, "; %u ranks unbound (every CPU allowed)", unbound);
        append(it, "; ");
    }
    for (uint32_t i = 0; i < doc->size && i < 16; i++) {
        char list[64];
        doc_info_cpu_list(&doc->infos[i], list, sizeof(list));
        append(it, "%srank %u: CPUs %s", i ? ", " : "", i, list);
    }
}

static void check_host_facts(const doctor_t *doc, const uint32_t *host_of, uint32_t hosts, doc_check_t *c,
                             uint32_t *nc)
{
    doc_check_t *hp = check(c, nc, "huge pages", CHECK_INFO), *load = check(c, nc, "load", CHECK_OK);

    for (uint32_t i = 0; i < doc->size; i++) {
        const doc_info_t *r = &doc->infos[i];
        if (!first_of_host(host_of, i))
            continue;
        append(hp, "%s: transparent huge pages %s, %llu of %llu reserved %llu kB pages free; ", r->hostname, r->thp,
               (unsigned long long)r->hugepages_free, (unsigned long long)r->hugepages_total,
               (unsigned long long)r->hugepage_kb);
        append(load, "%s: load average %.2f on %u CPUs; ", r->hostname, r->loadavg1, r->cpus_online);
        if (r->loadavg1 > r->cpus_online)
            load->level = CHECK_WARN;
    }
    if (load->level == CHECK_WARN)
        append(load, "busier than its CPUs before the job started: measurements and the job itself run slower");
    append(hp, "(hostccl does not ask for huge pages)");
    (void)hosts;
}


/* Several hosts that are network namespaces of one machine (the same boot id) share its CPUs. */
static void check_machines(const doctor_t *doc, const uint32_t *host_of, doc_check_t *it)
{
    for (uint32_t i = 0; i < doc->size; i++) {
        uint32_t hosts = 0, ranks = 0, seen = 0;
        for (uint32_t j = 0; j < i; j++)
            seen |= doc_same_machine(&doc->infos[i], &doc->infos[j]);
        if (seen)
            continue;
        for (uint32_t j = i; j < doc->size; j++)
            if (doc_same_machine(&doc->infos[i], &doc->infos[j])) {
                ranks++;
                hosts += first_of_host(host_of, j);
            }
        if (hosts < 2)
            continue;
        append(it, "; %u hosts from %s on are network namespaces of one machine: %u ranks on its %u CPUs", hosts,
               doc->infos[i].hostname, ranks, doc->infos[i].cpus_online);
        if (ranks > doc->infos[i].cpus_online && it->level == CHECK_OK)
            it->level = CHECK_WARN;
    }
}

/* The interface and address the library uses on each host, and the variables that chose them. */
static void check_interfaces(const doctor_t *doc, const uint32_t *host_of, uint32_t hosts, doc_check_t *c,
                             uint32_t *nc)
{
    doc_check_t *it = check(c, nc, "interfaces", CHECK_OK);
    const doc_info_t *r0 = &doc->infos[0];

    for (uint32_t i = 0; i < doc->size; i++) {
        const doc_info_t *r = &doc->infos[i];
        if (first_of_host(host_of, i)) {
            append(it, "%s: %s %s, MTU %u", r->hostname, r->ifname, r->ifaddr, r->mtu);
            if (r->if_speed_mbps > 0)
                append(it, ", %d Mb/s", r->if_speed_mbps);
            append(it, "%s; ", hosts > 1 && !r->if_from_library ? " (the doctor's guess: no peer named it)" : "");
        } else {
            uint32_t f = 0;
            while (host_of[f] != host_of[i])
                f++;
            if (strcmp(r->ifaddr, doc->infos[f].ifaddr) != 0) {
                it->level = CHECK_WARN;
                append(it, "rank %u on %s listens on %s %s, rank %u on %s %s; ", i, r->hostname, r->ifname, r->ifaddr,
                       f, doc->infos[f].ifname, doc->infos[f].ifaddr);
            }
        }
        if (strcmp(r->env_ifname, r0->env_ifname) != 0 || strcmp(r->env_base_port, r0->env_base_port) != 0) {
            it->level = CHECK_WARN;
            append(it, "rank %u on %s has HCCL_SOCKET_IFNAME=\"%s\" HCCL_IF_BASE_PORT=\"%s\", rank 0 \"%s\" \"%s\"; ",
                   i, r->hostname, r->env_ifname, r->env_base_port, r0->env_ifname, r0->env_base_port);
        }
    }
    append(it, "chosen by HCCL_IF_IP (%s), HCCL_SOCKET_IFNAME (%s), HCCL_IF_BASE_PORT (%s)",
           r0->env_if_ip[0] ? "set" : "unset", r0->env_ifname[0] ? r0->env_ifname : "unset",
           r0->env_base_port[0] ? r0->env_base_port : "unset: ephemeral ports");
}

/* MTU of the interface each host's library uses: hosts that differ are named. */
static void check_mtu(const doctor_t *doc, const uint32_t *host_of, uint32_t hosts, doc_check_t *c, uint32_t *nc)
{
    doc_check_t *it = check(c, nc, "MTU", CHECK_OK);
    uint32_t lowest = UINT32_MAX, highest = 0;

    for (uint32_t i = 0; i < doc->size; i++)
        if (first_of_host(host_of, i)) {
            lowest = doc->infos[i].mtu < lowest ? doc->infos[i].mtu : lowest;
            highest = doc->infos[i].mtu > highest ? doc->infos[i].mtu : highest;
        }
    if (hosts == 1) {
        append(it, "one host, nothing to compare (%s, MTU %u)", doc->infos[0].ifname, doc->infos[0].mtu);
        return;
    }
    if (lowest == highest) {
        append(it, "%u on every host's interface", lowest);
        return;
    }
    it->level = CHECK_WARN;
    append(it, "differs between hosts: ");
    for (uint32_t i = 0; i < doc->size; i++)
        if (first_of_host(host_of, i))
            append(it, "%s %s %u%s, ", doc->infos[i].hostname, doc->infos[i].ifname, doc->infos[i].mtu,
                   doc->infos[i].mtu != highest ? " (lower)" : "");
    append(it, "TCP adapts, but a switch path with the lower MTU drops larger frames of other traffic; set one MTU "
               "on every host");
}

static const char *port_error(int err)
{
    switch (err) {
    case ETIMEDOUT:
        return "no answer (dropped)";
    case ECONNREFUSED:
        return "refused (rejected: the doctor was listening)";
    case EHOSTUNREACH:
    case ENETUNREACH:
        return "no route";
    default:
        return strerror(err);
    }
}

/* "41004-41031" or "41004, 41007-41009" from a listener's base and a mask of its ports. */
static void port_list(uint32_t base, uint32_t mask, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < DOC_PORT_RANGE && used + 1 < len; i++) {
        uint32_t end = i;
        int w;
        if (!(mask & (1u << i)))
            continue;
        while (end + 1 < DOC_PORT_RANGE && (mask & (1u << (end + 1))))
            end++;
        w = end > i ? snprintf(buf + used, len - used, "%s%u-%u", used ? ", " : "", base + i, base + end)
                    : snprintf(buf + used, len - used, "%s%u", used ? ", " : "", base + i);
        used += w > 0 ? (size_t)w : 0;
        i = end;
    }
}

/* "2-3 (hcn1h2)": the ranks that failed alike, and their hosts. */
static void rank_list(const doctor_t *doc, const uint32_t *ranks, uint32_t n, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < n && used + 1 < len; i++) {
        uint32_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        used += (size_t)snprintf(buf + used, len - used, j > i ? "%s%u-%u" : "%s%u", used ? ", " : "", ranks[i],
                                 ranks[j]);
        i = j;
    }
    for (uint32_t i = 0; i < n && used + 1 < len; i++) {
        uint32_t k = 0;
        while (k < i && strcmp(doc->infos[ranks[k]].hostname, doc->infos[ranks[i]].hostname) != 0)
            k++;
        if (k == i)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i == 0 ? " (" : ", ", doc->infos[ranks[i]].hostname);
    }
    if (used + 1 < len)
        snprintf(buf + used, len - used, ")");
}

/* One line per (listener, ports, error) with the ranks that met it. */
static void ports_failed(const doctor_t *doc, doc_check_t *it)
{
    uint32_t *ranks = calloc(doc->size, sizeof(uint32_t)), more = 0;

    for (uint32_t r = 0; ranks != NULL && r < doc->size; r++) {
        more += doc->reach[r].failed > 0 && doc->reach[r].nfail == DOC_PORT_FAILS;
        for (uint32_t k = 0; k < doc->reach[r].nfail; k++) {
            const doc_reach_fail_t *f = &doc->reach[r].fail[k];
            uint32_t n = 0, seen = 0;
            char who[160], ports[160];
            for (uint32_t q = 0; q < doc->size; q++)
                for (uint32_t m = 0; m < doc->reach[q].nfail; m++) {
                    const doc_reach_fail_t *g = &doc->reach[q].fail[m];
                    if (g->to != f->to || g->mask != f->mask || g->err != f->err)
                        continue;
                    seen |= q < r || (q == r && m < k); /* this group was written already */
                    ranks[n++] = q;
                }
            if (seen)
                continue;
            rank_list(doc, ranks, n, who, sizeof(who));
            port_list(doc->listen[f->to].base, f->mask, ports, sizeof(ports));
            append(it, "rank%s %s -> %s %s port%s %s: %s", n > 1 ? "s" : "", who, doc->infos[f->to].hostname,
                   doc->listen[f->to].addr, strchr(ports, '-') != NULL || strchr(ports, ',') != NULL ? "s" : "",
                   ports, port_error(f->err));
            append(it, f->err == ETIMEDOUT ? " within %.1f s; " : "; ", doc->port_wait_s);
        }
    }
    if (more > 0)
        append(it, "(%u ranks failed on more hosts than listed); ", more);
    free(ranks);
}

/* Ports closed between hosts (ports.c). */
static void check_firewall(const doctor_t *doc, const uint32_t *host_of, uint32_t hosts, doc_check_t *c,
                           uint32_t *nc)
{
    doc_check_t *it = check(c, nc, "firewall", CHECK_OK);
    uint32_t tried = 0, failed = 0, base = 0;

    if (hosts == 1 || doc->listen == NULL) {
        it->level = CHECK_INFO;
        append(it, hosts == 1 ? "one host: no ports to check" : "not checked: the run stopped before");
        return;
    }
    for (uint32_t r = 0; r < doc->size; r++) {
        tried += doc->reach[r].tried;
        failed += doc->reach[r].failed;
        base = atoi(doc->infos[r].env_base_port) > 0 ? (uint32_t)atoi(doc->infos[r].env_base_port) : base;
    }
    if (failed > 0) {
        it->level = CHECK_FAIL;
        ports_failed(doc, it);
        append(it, base > 0 ? "communicators need ports %u-%u (TCP) open between the hosts" :
                              "communicators listen on ephemeral ports: open them between the hosts, or set "
                              "HCCL_IF_BASE_PORT and open its 32 ports", base, base + DOC_PORT_RANGE - 1);
        return;
    }
    append(it, "%u connections from every rank to every other host, %s: all opened", tried,
           base > 0 ? "on each free port of HCCL_IF_BASE_PORT's range" : "on an ephemeral port of each host");
    for (uint32_t r = 0; r < doc->size; r++)
        if (first_of_host(host_of, r) && doc->listen[r].busy_mask != 0)
            append(it, "; %s: %d of ports %u-%u in use by other programs (the library takes the first free)",
                   doc->infos[r].hostname, __builtin_popcount(doc->listen[r].busy_mask), doc->listen[r].base,
                   doc->listen[r].base + DOC_PORT_RANGE - 1);
}

static void check_clock(const doctor_t *doc, doc_check_t *c, uint32_t *nc)
{
    doc_check_t *clk = check(c, nc, "clock", CHECK_OK);
    double worst = 0.0;
    uint32_t worst_rank = 0, measured = 0;

    for (uint32_t k = 1; k < doc->size; k++) {
        const doc_pair_t *p = doc_pair(doc, 0, k);
        if (!p->clock_measured)
            continue;
        measured++;
        if (fabs(p->clock_offset_us) >= fabs(worst)) {
            worst = p->clock_offset_us;
            worst_rank = k;
        }
    }
    if (measured == 0) {
        append(clk, "one host, one clock");
        return;
    }
    if (fabs(worst) > 100000.0)
        clk->level = CHECK_WARN;
    append(clk, "largest offset from rank 0's clock: rank %u (%s) %+.0f us, of %u ranks measured%s", worst_rank,
           doc->infos[worst_rank].hostname, worst, measured,
           clk->level == CHECK_WARN ? ": logs and timeouts compare badly across hosts; run NTP/chrony" : "");
}

uint32_t doc_env_checks(const doctor_t *doc, doc_check_t *c)
{
    uint32_t n = 0, *host_of = calloc(doc->size, sizeof(uint32_t)), hosts;

    if (host_of == NULL)
        return 0;
    hosts = doc_hosts(doc->infos, doc->size, host_of);
    check_library(doc, c, &n);
    check_shm(doc, host_of, c, &n);
    check_cma(doc, c, &n);
    check_cpus(doc, host_of, hosts, c, &n);
    check_machines(doc, host_of, &c[n - 1]);
    check_host_facts(doc, host_of, hosts, c, &n);
    check_interfaces(doc, host_of, hosts, c, &n);
    check_mtu(doc, host_of, hosts, c, &n);
    check_firewall(doc, host_of, hosts, c, &n);
    check_clock(doc, c, &n);
    free(host_of);
    for (uint32_t i = 0; i < n; i++) { /* the lists above leave a separator at the end */
        size_t len = strlen(c[i].text);
        while (len > 0 && (c[i].text[len - 1] == ' ' || c[i].text[len - 1] == ';' || c[i].text[len - 1] == ','))
            c[i].text[--len] = '\0';
    }
    return n;
}
