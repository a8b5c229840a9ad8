/*
 * Verdicts. A link is compared only with comparable links: the same transport, and the same CPU
 * situation (two ranks that may only run on one CPU between them hand it back and forth on every
 * message; their latency is a scheduler's, and the environment check reports that separately).
 * Within a class the reference is the median of the measured links, or the best one when fewer
 * than three are comparable; a link below `fraction` of the reference bandwidth, or above
 * 1/fraction of its latency (not judged for ranks that share a CPU), is DEGRADED, and so is one
 * that misses a stated expectation. A link whose probe got no answer is DOWN.
 *
 * The environment checks explain slow or failing jobs; each is OK, INFO, WARN or FAIL.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define NCLASS 4

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

double doc_median(double *v, uint32_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint32_t doc_hosts(const doc_info_t *infos, uint32_t n, uint32_t *host_of)
{
    uint32_t hosts = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < i && strcmp(infos[j].host_id, infos[i].host_id) != 0)
            j++;
        host_of[i] = j < i ? host_of[j] : hosts++;
    }
    return hosts;
}

static int pair_class(const doctor_t *doc, const doc_transport_t *t, uint32_t a, uint32_t b)
{
    return (t->same_host ? 0 : 2) + doc_info_share_cpus(&doc->infos[a], &doc->infos[b]);
}

static double pair_bw(const doc_pair_t *p)
{
    return p->bw_ab < p->bw_ba ? p->bw_ab : p->bw_ba;
}

/* The reference bandwidth and latency of each class. */
static void references(const doctor_t *doc, const doc_link_t *links, double *ref_bw, double *ref_lat, uint32_t *count)
{
    uint32_t n = doc->size, np = n * (n - 1) / 2 + 1;
    double *bw = calloc(np, sizeof(double)), *lat = calloc(np, sizeof(double));

    for (int c = 0; c < NCLASS; c++) {
        uint32_t k = 0;
        double best_bw = 0.0, best_lat = INFINITY;
        for (uint32_t a = 0; a < n && bw != NULL && lat != NULL; a++)
            for (uint32_t b = a + 1; b < n; b++) {
                const doc_pair_t *p = doc_pair(doc, a, b);
                if (links[(uint64_t)a * n + b].cls != c || !p->measured || p->down)
                    continue;
                bw[k] = pair_bw(p);
                lat[k++] = p->lat_us;
                best_bw = fmax(best_bw, pair_bw(p));
                best_lat = fmin(best_lat, p->lat_us);
            }
        count[c] = k;
        ref_bw[c] = k >= 3 ? doc_median(bw, k) : best_bw;
        ref_lat[c] = k >= 3 ? doc_median(lat, k) : best_lat;
    }
    free(bw);
    free(lat);
}

static void add_reason(doc_link_t *l, const char *text)
{
    size_t used = strlen(l->reason);

    snprintf(l->reason + used, sizeof(l->reason) - used, "%s%s", used ? "; " : "", text);
    l->status = LINK_DEGRADED;
}

static void judge(const doctor_t *doc, const doc_pair_t *p, double rbw, double rlat, uint32_t k, int shares_cpu,
                  doc_link_t *l)
{
    const char *basis = k >= 3 ? "the median" : "the best";
    char text[160];
    double bw = pair_bw(p);

    if (doc->expect_bw > 0 && bw < doc->expect_bw) {
        snprintf(text, sizeof(text), "bandwidth %.2f GB/s < expected %.2f", bw, doc->expect_bw);
        add_reason(l, text);
    }
    if (doc->expect_lat > 0 && p->lat_us > doc->expect_lat) {
        snprintf(text, sizeof(text), "latency %.1f us > expected %.1f", p->lat_us, doc->expect_lat);
        add_reason(l, text);
    }
    if (k >= 2 && bw < doc->fraction * rbw) {
        snprintf(text, sizeof(text), "bandwidth %.2f GB/s < %.2f x %s %.2f of %u comparable pairs", bw, doc->fraction,
                 basis, rbw, k);
        add_reason(l, text);
    }
    /* Two ranks on one CPU exchange every message through the scheduler: their latency says how
     * busy that CPU is, not how good the link is (the CPU-binding check reports the sharing). */
    if (k >= 2 && p->lat_us * doc->fraction > rlat && !shares_cpu) {
        snprintf(text, sizeof(text), "latency %.1f us > %s %.1f / %.2f of %u comparable pairs", p->lat_us, basis,
                 rlat, doc->fraction, k);
        add_reason(l, text);
    }
}

void doc_classify(const doctor_t *doc, const doc_transport_t *tr, doc_link_t *links)
{
    uint32_t n = doc->size, count[NCLASS];
    double ref_bw[NCLASS], ref_lat[NCLASS];

    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = a + 1; b < n; b++) {
            doc_link_t *l = &links[(uint64_t)a * n + b];
            memset(l, 0, sizeof(*l));
            l->cls = pair_class(doc, &tr[(uint64_t)a * n + b], a, b);
        }
    references(doc, links, ref_bw, ref_lat, count);
    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = a + 1; b < n; b++) {
            const doc_pair_t *p = doc_pair(doc, a, b);
            doc_link_t *l = &links[(uint64_t)a * n + b];
            if (!p->measured) {
                l->status = LINK_UNTESTED;
                snprintf(l->reason, sizeof(l->reason), "not measured");
            } else if (p->down) {
                l->status = LINK_DOWN;
                snprintf(l->reason, sizeof(l->reason), "%s", p->why);
            } else {
                judge(doc, p, ref_bw[l->cls], ref_lat[l->cls], count[l->cls], l->cls % 2, l);
            }
        }
}

/* ---- environment ------------------------------------------------------------------------------- */

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
        if (i == 0 || host_of[i] != host_of[i - 1])
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
        append(it, "allowed between every two ranks of a host (%s): plain (malloc) buffers move in one copy", scope);
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
        if (i > 0 && host_of[i] == host_of[i - 1])
            continue;
        append(hp, "%s: transparent huge pages %s, %llu of %llu reserved %llu kB pages free; ", r->hostname, r->thp,
               (unsigned long long)r->hugepages_free, (unsigned long long)r->hugepages_total,
               (unsigned long long)r->hugepage_kb);
        append(load, "%s: load average %.2f on %u CPUs; ", r->hostname, r->loadavg1, r->cpus_online);
        if (r->loadavg1 > r->cpus_online) {
            load->level = CHECK_WARN;
            append(load, "(busy before the job started: measurements and the job itself run slower) ");
        }
    }
    append(hp, "(hostccl does not ask for huge pages)");
    (void)hosts;
}

/* Checks that compare hosts: with one host there is nothing to compare. */
static void check_between_hosts(const doctor_t *doc, const uint32_t *host_of, uint32_t hosts, doc_check_t *c,
                                uint32_t *nc)
{
    doc_check_t *mtu = check(c, nc, "MTU", CHECK_OK), *fw = check(c, nc, "firewall", CHECK_INFO);
    doc_check_t *clk = check(c, nc, "clock", CHECK_OK);
    double worst = 0.0;
    uint32_t worst_rank = 0, measured = 0;

    for (uint32_t i = 0; i < doc->size; i++)
        if ((i == 0 || host_of[i] != host_of[i - 1]) && doc->infos[i].mtu != doc->infos[0].mtu) {
            mtu->level = CHECK_WARN;
            append(mtu, "host %s uses %s with MTU %u, host %s %s with MTU %u; ", doc->infos[i].hostname,
                   doc->infos[i].ifname, doc->infos[i].mtu, doc->infos[0].hostname, doc->infos[0].ifname,
                   doc->infos[0].mtu);
        }
    append(mtu, hosts == 1 ? "one host, nothing to compare (%s, MTU %u)" : "interface of rank 0: %s, MTU %u",
           doc->infos[0].ifname, doc->infos[0].mtu);
    append(fw, hosts == 1 ? "one host: no ports to check" : "not checked: needs the inter-host engine (the ports it "
                                                             "listens on are not defined yet)");
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
    check_host_facts(doc, host_of, hosts, c, &n);
    check_between_hosts(doc, host_of, hosts, c, &n);
    free(host_of);
    for (uint32_t i = 0; i < n; i++) { /* the lists above leave a separator at the end */
        size_t len = strlen(c[i].text);
        while (len > 0 && (c[i].text[len - 1] == ' ' || c[i].text[len - 1] == ';'))
            c[i].text[--len] = '\0';
    }
    return n;
}
