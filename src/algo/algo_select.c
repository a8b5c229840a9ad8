/*
 * Which schedule runs (DESIGN.md 5): HCCL_ALGO when it names one this engine has, else an
 * alpha-beta cost model of the TCP transport.
 *
 * HCCL_ALGO is CANN's syntax: "level0:NA;level1:<algo>" for every op, or per op
 * "<op>=level0:NA;level1:<algo>/<op>=...". level1 is the algorithm between servers (here: between
 * hosts): ring, H-D_R (recursive halving-doubling), pairwise (AlltoAll only), pipeline (hostccl's
 * hierarchical composition, which already uses the links inside and between hosts at once). NHR,
 * NHR_V1, NB and AHC are CANN algorithms hostccl does not have: a warning names the value and the
 * automatic choice stays. Every value it cannot honour gets such a warning, once per process.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algo_select.h"
#include "hc_check.h"
#include "hc_config.h"

static const struct {
    const char *name;
    hc_coll_t colls[4];
    int ncolls;
} op_names[] = {
    {"allreduce", {HC_COLL_ALLREDUCE}, 1},
    {"allgather", {HC_COLL_ALLGATHER, HC_COLL_ALLGATHERV}, 2},
    {"reducescatter", {HC_COLL_REDUCE_SCATTER, HC_COLL_REDUCE_SCATTERV}, 2},
    {"broadcast", {HC_COLL_BROADCAST}, 1},
    {"reduce", {HC_COLL_REDUCE}, 1},
    {"scatter", {HC_COLL_SCATTER}, 1},
    {"alltoall", {HC_COLL_ALLTOALL, HC_COLL_ALLTOALLV, HC_COLL_ALLTOALLVC}, 3},
};

static const struct {
    const char *name;
    hc_sched_kind_t kind;
} algo_names[] = {
    {"ring", HC_SCHED_RING},        {"H-D_R", HC_SCHED_RHD},         {"pairwise", HC_SCHED_PAIRWISE},
    {"pipeline", HC_SCHED_HIER},    {"NHR", HC_SCHED_UNSUPPORTED},   {"NHR_V1", HC_SCHED_UNSUPPORTED},
    {"NB", HC_SCHED_UNSUPPORTED},   {"AHC", HC_SCHED_UNSUPPORTED},
};

static atomic_int warned_once;

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    char text[256];
    va_list ap;

    if (atomic_exchange(&warned_once, 1))
        return; /* one warning per process: every communicator would repeat it */
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    HC_WARN("HCCL_ALGO: %s", text);
}

/* "level0:NA;level1:ring" -> the level1 algorithm; warns about what it cannot honour. */
static hc_sched_kind_t parse_levels(const char *spec, size_t len)
{
    char copy[128], *save = NULL;
    hc_sched_kind_t kind = HC_SCHED_AUTO;

    snprintf(copy, sizeof(copy), "%.*s", (int)len, spec);
    for (char *tok = strtok_r(copy, ";", &save); tok != NULL; tok = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(tok, ':');
        if (colon == NULL) {
            warn("\"%s\" is not level<N>:<algorithm>; ignored", tok);
            continue;
        }
        *colon = '\0';
        if (strcmp(tok, "level0") == 0) {
            if (strcmp(colon + 1, "NA") != 0)
                warn("level0:%s is not supported (CANN accepts only NA for the algorithm inside a server); "
                     "ignored", colon + 1);
        } else if (strcmp(tok, "level1") == 0 || strcmp(tok, "level2") == 0) {
            size_t i;
            for (i = 0; i < sizeof(algo_names) / sizeof(algo_names[0]); i++)
                if (strcmp(colon + 1, algo_names[i].name) == 0)
                    break;
            if (i == sizeof(algo_names) / sizeof(algo_names[0]))
                warn("unknown algorithm \"%s\"; choosing automatically", colon + 1);
            else if (algo_names[i].kind == HC_SCHED_UNSUPPORTED)
                warn("algorithm \"%s\" is not implemented in hostccl; choosing automatically", colon + 1);
            else if (strcmp(tok, "level1") == 0)
                kind = algo_names[i].kind;
        } else {
            warn("unknown level \"%s\"; ignored", tok);
        }
    }
    return kind;
}

static void set_for(hc_sched_kind_t requested[HC_COLL_COUNT], const char *op, size_t op_len, hc_sched_kind_t kind)
{
    for (size_t i = 0; i < sizeof(op_names) / sizeof(op_names[0]); i++) {
        if (strlen(op_names[i].name) == op_len && strncasecmp(op, op_names[i].name, op_len) == 0) {
            for (int k = 0; k < op_names[i].ncolls; k++)
                requested[op_names[i].colls[k]] = kind;
            return;
        }
    }
    warn("unknown operation \"%.*s\" (allreduce, allgather, reducescatter, broadcast, reduce, scatter, alltoall); "
         "ignored", (int)op_len, op);
}

void hc_algo_parse(const char *text, hc_sched_kind_t requested[HC_COLL_COUNT])
{
    for (int c = 0; c < HC_COLL_COUNT; c++)
        requested[c] = HC_SCHED_AUTO;
    if (text == NULL || text[0] == '\0')
        return;
    if (strchr(text, '=') == NULL) {
        hc_sched_kind_t kind = parse_levels(text, strlen(text));
        for (int c = 0; c < HC_COLL_COUNT; c++)
            requested[c] = kind;
    } else {
        const char *p = text;
        while (*p != '\0') {
            const char *end = strchr(p, '/'), *eq = strchr(p, '=');
            size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
            if (eq == NULL || eq >= p + len)
                warn("\"%.*s\" is not <op>=level0:NA;level1:<algorithm>; ignored", (int)len, p);
            else
                set_for(requested, p, (size_t)(eq - p), parse_levels(eq + 1, len - (size_t)(eq - p) - 1));
            p += len + (end != NULL);
        }
    }
    for (int c = 0; c < HC_COLL_COUNT; c++) {
        if (requested[c] == HC_SCHED_PAIRWISE && c != HC_COLL_ALLTOALL && c != HC_COLL_ALLTOALLV &&
            c != HC_COLL_ALLTOALLVC) {
            warn("pairwise applies to AlltoAll only; %s chooses automatically", hc_coll_name((hc_coll_t)c));
            requested[c] = HC_SCHED_AUTO;
        }
    }
}

int hc_algo_debug(void)
{
    const char *debug = hc_config_str(HC_CFG_DEBUG);

    return debug != NULL && strstr(debug, "algo") != NULL;
}

const char *hc_sched_kind_name(hc_sched_kind_t kind)
{
    static const char *const names[] = {
        [HC_SCHED_AUTO] = "auto", [HC_SCHED_RING] = "ring", [HC_SCHED_RHD] = "H-D_R",
        [HC_SCHED_DIRECT] = "direct", [HC_SCHED_ONESHOT] = "one-shot", [HC_SCHED_PAIRWISE] = "pairwise", [HC_SCHED_TREE] = "tree",
        [HC_SCHED_HIER] = "hierarchical", [HC_SCHED_UNSUPPORTED] = "unsupported",
    };
    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/*
 * The cost model: a message of b bytes between two ranks over TCP costs ALPHA + b / BW; a step in
 * which a rank sends several messages at once costs their bytes and one alpha per message on the
 * sending side. The defaults are what this transport measured on a veth pair between network
 * namespaces of the reference VM (docs/performance.md): the choice only needs the ratio.
 */
#define ALPHA_US 30.0
#define BYTES_PER_US 1000.0 /* 1 GB/s */
#define PER_MESSAGE_US 2.0
#define DIRECT_MAX_RANKS 16
#define REDUCE_BYTES_PER_US 4000.0 /* combining two inputs, 4 GB/s */
/* One-shot sends the whole vector to every peer and keeps all of them: for small vectors only. */
#define ONESHOT_MAX_BYTES (256u << 10)

static double log2_ceil(uint32_t p)
{
    double steps = 0;

    for (uint32_t v = 1; v < p; v <<= 1)
        steps++;
    return steps;
}

double hc_algo_cost_allreduce(hc_sched_kind_t kind, uint32_t p, uint64_t bytes)
{
    double b = (double)bytes, share = p > 0 ? 2.0 * (p - 1) / p * b / BYTES_PER_US : 0;
    uint32_t pow2 = 1;

    while (pow2 * 2 <= p)
        pow2 *= 2;
    switch (kind) {
    case HC_SCHED_RING:
        return 2.0 * (p - 1) * ALPHA_US + share;
    case HC_SCHED_RHD:
        return 2.0 * log2_ceil(pow2) * ALPHA_US + share + (pow2 != p ? 2.0 * (ALPHA_US + b / BYTES_PER_US) : 0);
    case HC_SCHED_DIRECT:
        return 2.0 * (ALPHA_US + (p - 1) * PER_MESSAGE_US) + share;
    case HC_SCHED_ONESHOT:
        if (p > DIRECT_MAX_RANKS || (p - 1) * b > ONESHOT_MAX_BYTES)
            return 1e30;
        return ALPHA_US + (p - 1) * (PER_MESSAGE_US + b / BYTES_PER_US + b / REDUCE_BYTES_PER_US);
    default:
        return 1e30;
    }
}

hc_sched_kind_t hc_algo_pick_allreduce(hc_sched_kind_t requested, uint32_t p, uint64_t bytes, int deterministic)
{
    static const hc_sched_kind_t candidates[] = {HC_SCHED_RHD, HC_SCHED_RING, HC_SCHED_DIRECT, HC_SCHED_ONESHOT};
    hc_sched_kind_t best = HC_SCHED_RHD;

    /* Rank order whatever was asked: the only schedules whose bits do not depend on the group's
     * shape (the intra-host engine combines in rank order too); one-shot and direct give the same. */
    if (deterministic)
        return hc_algo_cost_allreduce(HC_SCHED_ONESHOT, p, bytes) < 1e30 ? HC_SCHED_ONESHOT : HC_SCHED_DIRECT;
    if (requested == HC_SCHED_RING || requested == HC_SCHED_RHD)
        return requested;
    for (size_t i = 1; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        /* Direct keeps every peer's block of the data at once: up to DIRECT_MAX_RANKS. */
        if (candidates[i] == HC_SCHED_DIRECT && p > DIRECT_MAX_RANKS)
            continue;
        if (hc_algo_cost_allreduce(candidates[i], p, bytes) < hc_algo_cost_allreduce(best, p, bytes))
            best = candidates[i];
    }
    return best;
}
