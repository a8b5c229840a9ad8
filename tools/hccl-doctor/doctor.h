/*
 * hccl-doctor: the link and environment check of a job, the `npu-smi info -t hccs` of hosts
 * (docs/hccl-doctor.md). It runs as the job itself, one process per rank under hccl-run, mpirun or
 * srun, and uses libhccl's public API the way any program does:
 *
 *   info.c       what each rank knows about itself (host identity, CPUs, shared memory, ptrace
 *                scope, huge pages, library file and build, network interface), exchanged with an
 *                AllGather;
 *   transport.c  per pair, how the two ranks reach each other, behind an ops table so that a later
 *                library call can answer instead of the doctor's own probe (same host: shm, with a
 *                cross-memory-attach probe; different hosts: the inter-host engine);
 *   measure.c    per pair, one at a time, on a two-rank sub-communicator: a bounded probe (DOWN if
 *                no answer), latency by ping-pong, bandwidth both ways; clock offsets between hosts;
 *   verdict.c    OK / DEGRADED / DOWN per pair against comparable pairs and stated expectations,
 *                and the environment checks (OK / WARN / FAIL);
 *   report.c     the table (default) or JSON (--json).
 */
#ifndef HCCL_DOCTOR_H
#define HCCL_DOCTOR_H

#include <stdint.h>
#include <stdio.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define DOC_HOST_LEN 64
#define DOC_PATH_LEN 160
#define DOC_MAX_CPUS 1024

/* One rank's self-description: plain bytes, gathered from every rank. */
typedef struct {
    uint32_t rank;
    int32_t pid;
    uint32_t uid;
    uint32_t version;                 /* HcclHostGetVersion */
    char hostname[DOC_HOST_LEN];
    char host_id[DOC_HOST_LEN];       /* boot id + network and pid namespaces: ranks that share memory */
    uint64_t canary;                  /* a random value at canary_addr, for the peers' CMA probe */
    uint64_t canary_addr;
    uint32_t cpus_online;
    uint32_t cpus_allowed;            /* CPUs in this rank's affinity mask */
    uint8_t cpu_mask[DOC_MAX_CPUS / 8];
    double loadavg1;
    int32_t ptrace_scope;             /* -1: no Yama */
    uint64_t shm_size, shm_free;      /* /dev/shm, bytes; 0: not mounted */
    int32_t memfd_ok;                 /* a memfd could be created, sized and mapped */
    char thp[16];                     /* transparent huge pages: always, madvise, never, ? */
    uint64_t hugepages_total, hugepages_free, hugepage_kb;
    char lib_path[DOC_PATH_LEN];      /* the libhccl this rank loaded */
    char lib_build[48];               /* its GNU build id (hex), or size+mtime when it has none */
    char ifname[32];                  /* the interface the inter-host engine would use */
    char ifaddr[48];
    uint32_t mtu;
} doc_info_t;

/* How a pair of ranks reaches each other. */
typedef struct {
    char kind[16];       /* "shm" or "tcp" */
    int same_host;
    int cma;             /* shm: 1 if cross-memory attach (single-copy reads of plain memory) works both ways */
    char detail[224];    /* a sentence for the table */
} doc_transport_t;

/* Where per-pair transports come from: today the doctor's own probe; later the library's answer. */
typedef struct {
    const char *name;
    void (*describe)(const doc_info_t *infos, const int8_t *cma_matrix, uint32_t n, uint32_t a, uint32_t b,
                     doc_transport_t *out);
} doc_transport_source_ops_t;

extern const doc_transport_source_ops_t doc_transport_probe_ops;

typedef enum { LINK_OK = 0, LINK_DEGRADED = 1, LINK_DOWN = 2, LINK_UNTESTED = 3 } doc_link_status_t;

/* One pair's measurement, as its lower rank recorded it (plain bytes, gathered). */
typedef struct {
    int32_t measured;          /* 1 once the pair was tried */
    int32_t down;              /* the probe got no answer */
    double lat_us;             /* one-way latency: median round trip / 2, 8 bytes */
    double bw_ab, bw_ba;       /* GB/s, a -> b and b -> a, best of the trials */
    double clock_offset_us;    /* b's clock minus a's, when measured */
    int32_t clock_measured;
    int32_t retested;
    char why[96];              /* DOWN: what failed */
} doc_pair_t;

typedef struct {
    doc_link_status_t status;
    char reason[160];
    int cls;                   /* comparison class */
} doc_link_t;

typedef enum { CHECK_OK, CHECK_INFO, CHECK_WARN, CHECK_FAIL } doc_check_level_t;

typedef struct {
    const char *name;
    doc_check_level_t level;
    char text[320];
} doc_check_t;

#define DOC_MAX_CHECKS 16

typedef struct {
    /* options */
    int json;
    double fraction;           /* DEGRADED below this fraction of the comparable median */
    double expect_bw, expect_lat; /* GB/s and us; 0: none stated */
    uint64_t bw_bytes;
    uint32_t lat_iters, bw_iters;
    double timeout_s;          /* DOWN: no answer within this */
    int clock_all;             /* measure clock offsets for every rank against rank 0 */
    int plain;                 /* bandwidth on malloc memory instead of aclrtMalloc */
    /* the job */
    uint32_t rank, size;
    aclrtStream stream;
    HcclComm world;
    doc_info_t *infos;         /* [size] */
    int8_t *cma;               /* [size x size]: can row read column's memory (-1: other host) */
    doc_pair_t *pairs;         /* [size x size], entry [a * size + b] for a < b */
    int abandoned;             /* a pair's operation never finished: skip the teardown */
    double elapsed_s;
} doctor_t;

/* info.c */
void doc_info_collect(doctor_t *doc, doc_info_t *me);
uint32_t doc_info_cpu_count(const doc_info_t *info);
int doc_info_share_cpus(const doc_info_t *a, const doc_info_t *b);
void doc_info_cpu_list(const doc_info_t *info, char *buf, size_t len);
int doc_cma_probe(const doc_info_t *peer);

/* measure.c */
int doc_measure_pairs(doctor_t *doc, const uint8_t *which, int retest);
int doc_measure_clocks(doctor_t *doc);
int doc_gather(doctor_t *doc, void *mine, void *all, uint64_t bytes);
void doc_measure_fini(doctor_t *doc);

/* verdict.c */
void doc_classify(const doctor_t *doc, const doc_transport_t *tr, doc_link_t *links);
uint32_t doc_env_checks(const doctor_t *doc, doc_check_t *checks);
uint32_t doc_hosts(const doc_info_t *infos, uint32_t n, uint32_t *host_of);
double doc_median(double *v, uint32_t n);

/* report.c: the exit status; prints only when out is not NULL */
int doc_report(const doctor_t *doc, const doc_transport_t *tr, const doc_link_t *links, const doc_check_t *checks,
               uint32_t nchecks, FILE *out);

static inline doc_pair_t *doc_pair(const doctor_t *doc, uint32_t a, uint32_t b)
{
    return &doc->pairs[(uint64_t)(a < b ? a : b) * doc->size + (a < b ? b : a)];
}

#endif /* HCCL_DOCTOR_H */
