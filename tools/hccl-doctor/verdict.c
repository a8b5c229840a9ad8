/*
 * Verdicts. A link is compared only with comparable links: the same transport (shared memory with
 * shared memory, TCP with TCP: they are orders of magnitude apart), and the same CPU situation (two
 * ranks that may only run on one CPU between them hand it back and forth on every message; their
 * latency is a scheduler's, and the environment check reports that separately; ranks on different
 * machines never share a CPU). Within a class the reference is the median of the measured links,
 * or the best one when fewer than three are comparable; a link below `fraction` of the reference
 * bandwidth, or above 1/fraction of its latency (not judged for ranks that share a CPU), is
 * DEGRADED, and so is one that misses an expectation stated for its transport. A link whose
 * probe got no answer, or whose communicator could not be made, is DOWN.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

#define NCLASS (2 * KIND_COUNT)

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

/* GB/s with two decimals, or two significant digits below 0.1 (a shaped link's 0.0062 is not 0.01). */
const char *doc_gbps(double v, char *buf, size_t len)
{
    snprintf(buf, len, v >= 0.095 || v == 0.0 ? "%.2f" : "%.2g", v);
    return buf;
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

/* The same kernel (boot id): ranks in network namespaces of one machine are different hosts for
 * the library but share its CPUs. host_id is "BOOTID/nNETNS/pPIDNS". */
int doc_same_machine(const doc_info_t *a, const doc_info_t *b)
{
    size_t n = strcspn(a->host_id, "/");

    return n == strcspn(b->host_id, "/") && strncmp(a->host_id, b->host_id, n) == 0;
}

static int shares_cpu(const doctor_t *doc, uint32_t a, uint32_t b)
{
    return doc_same_machine(&doc->infos[a], &doc->infos[b]) && doc_info_share_cpus(&doc->infos[a], &doc->infos[b]);
}

static int pair_class(const doctor_t *doc, const doc_transport_t *t, uint32_t a, uint32_t b)
{
    return 2 * (int)t->kind_id + shares_cpu(doc, a, b);
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

static void judge(const doctor_t *doc, const doc_pair_t *p, double rbw, double rlat, uint32_t k, int cls,
                  doc_link_t *l)
{
    const char *basis = k >= 3 ? "the median" : "the best";
    double bw = pair_bw(p), expect_bw = doc->expect_bw[cls / 2], expect_lat = doc->expect_lat[cls / 2];
    int shares_cpu = cls % 2;
    char text[160];

    char g1[16], g2[16];

    if (expect_bw > 0 && bw < expect_bw) {
        snprintf(text, sizeof(text), "bandwidth %s GB/s < expected %s", doc_gbps(bw, g1, sizeof(g1)),
                 doc_gbps(expect_bw, g2, sizeof(g2)));
        add_reason(l, text);
    }
    if (expect_lat > 0 && p->lat_us > expect_lat) {
        snprintf(text, sizeof(text), "latency %.1f us > expected %.1f", p->lat_us, expect_lat);
        add_reason(l, text);
    }
    if (k >= 2 && bw < doc->fraction * rbw) {
        snprintf(text, sizeof(text), "bandwidth %s GB/s < %.2f x %s %s of %u comparable pairs",
                 doc_gbps(bw, g1, sizeof(g1)), doc->fraction, basis, doc_gbps(rbw, g2, sizeof(g2)), k);
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
                snprintf(l->reason, sizeof(l->reason), "%s",
                         doc->stopped[0] != '\0' ? "not known: the run stopped before the results were gathered"
                                                 : "not measured");
            } else if (p->down) {
                l->status = LINK_DOWN;
                snprintf(l->reason, sizeof(l->reason), "%s", p->why);
            } else {
                judge(doc, p, ref_bw[l->cls], ref_lat[l->cls], count[l->cls], l->cls, l);
            }
        }
}
