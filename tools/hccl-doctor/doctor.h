/*
 * hccl-doctor: the link and environment check of a job, the `npu-smi info -t hccs` of hosts
 * (docs/hccl-doctor.md). It runs as the job itself, one process per rank under hccl-run, mpirun or
 * srun, and uses libhccl's public API the way any program does:
 *
 *   info.c       what each rank knows about itself (host identity, CPUs, shared memory, ptrace
 *                scope, huge pages, library file and build, the network interface the library
 *                uses and the variables that choose it), exchanged with an AllGather;
 *   transport.c  per pair, how the two ranks reach each other, behind an ops table: the library's
 *                own answer (HcclHostGetLinkInfo on the job's communicator), or the doctor's probe
 *                where the library cannot say;
 *   ports.c      whether every rank can open TCP connections to the other hosts' ports
 *                (HCCL_IF_BASE_PORT's range, or an ephemeral port): closed ports in a firewall;
 *   measure.c    per pair, one at a time, on a two-rank sub-communicator: a bounded probe (DOWN if
 *                no answer), latency by ping-pong, bandwidth both ways; clock offsets between hosts;
 *   verdict.c    OK / DEGRADED / DOWN per pair against comparable pairs and stated expectations;
 *   checks.c     the environment checks (OK / INFO / WARN / FAIL);
 *   report.c     the table (default) or JSON (--json, --json-out).
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
#define DOC_ADDR_LEN 64   /* "10.0.0.2:41234", "[fe80::1]:41234" */
#define DOC_LINK_LEN 96   /* one HcclHostGetLinkInfo text, as gathered */
#define DOC_PORT_RANGE 32 /* the TCP transport's ports from HCCL_IF_BASE_PORT (src/net/net_conn.c) */
#define DOC_MAX_RANKS 65  /* a pair communicator per peer; libhccl keeps 64 subCommIds per parent */

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
    char ifname[32];                  /* the interface of the address the library listens on */
    char ifaddr[DOC_ADDR_LEN];        /* that address, without the port */
    int32_t if_from_library;          /* 1: the peers' links name it; 0: the doctor's own pick */
    uint32_t mtu;
    int32_t if_speed_mbps;            /* /sys/class/net/IF/speed; <= 0: unknown (virtual links) */
    char env_if_ip[48];               /* HCCL_IF_IP, HCCL_SOCKET_IFNAME, HCCL_IF_BASE_PORT as set */
    char env_ifname[64];
    char env_base_port[8];
} doc_info_t;

/* Transports whose links are compared with each other and may carry their own expectations. */
typedef enum { KIND_SHM = 0, KIND_TCP = 1, KIND_OTHER = 2, KIND_COUNT = 3 } doc_kind_t;

/* How a pair of ranks reaches each other. */
typedef struct {
    char kind[16];       /* "shm", "tcp", or the library's word for another transport */
    doc_kind_t kind_id;
    int same_host;       /* the same host identity (shared memory is possible) */
    int cma;             /* shm: 1 if cross-memory attach (single-copy reads of plain memory) works both ways */
    uint32_t nsocks;     /* tcp: data connections */
    char addr_a[DOC_ADDR_LEN], addr_b[DOC_ADDR_LEN]; /* tcp: where each side listened, as the other saw it */
    const char *source;  /* "library" or "probe" */
    char detail[224];    /* a sentence for the table */
} doc_transport_t;

struct doctor;

/* Where per-pair transports come from: the library's answer, or the doctor's own probe. */
typedef struct {
    const char *name;
    void (*describe)(const struct doctor *doc, uint32_t a, uint32_t b, doc_transport_t *out);
} doc_transport_source_ops_t;

extern const doc_transport_source_ops_t doc_transport_library_ops;
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
    char why[224];             /* DOWN: what failed */
} doc_pair_t;

typedef struct {
    doc_link_status_t status;
    char reason[256];
    int cls;                   /* comparison class */
} doc_link_t;

typedef enum { CHECK_OK, CHECK_INFO, CHECK_WARN, CHECK_FAIL } doc_check_level_t;

typedef struct {
    const char *name;
    doc_check_level_t level;
    char text[640];
} doc_check_t;

#define DOC_MAX_CHECKS 16

/* One rank's listeners for the port check (ports.c), gathered. */
typedef struct {
    char addr[DOC_ADDR_LEN];   /* host part only; "" when this rank opened none */
    uint32_t base;             /* first port; 0 when none */
    uint32_t open_mask;        /* bit i: base + i is listening */
    uint32_t busy_mask;        /* bit i: base + i is in use by another program */
} doc_listen_t;

#define DOC_PORT_FAILS 8

/* What one rank found connecting to the other hosts' listeners, gathered: per listening rank with a
 * failure (the first DOC_PORT_FAILS of them), which of its ports failed and the first error. */
typedef struct {
    uint32_t to;               /* the rank that listened */
    uint32_t mask;             /* bit i: port base + i of its listener failed */
    int32_t err;               /* errno; ETIMEDOUT: no answer within the bound */
} doc_reach_fail_t;

typedef struct {
    uint32_t tried, failed;    /* connections */
    uint32_t nfail;            /* entries of fail[] used */
    doc_reach_fail_t fail[DOC_PORT_FAILS];
} doc_reach_t;

typedef struct doctor {
    /* options */
    int json;
    const char *json_out;      /* rank 0 also writes the JSON here */
    double fraction;           /* DEGRADED below this fraction of the comparable median */
    double expect_bw[KIND_COUNT], expect_lat[KIND_COUNT]; /* GB/s and us per transport; 0: none stated */
    uint64_t bw_bytes;
    uint32_t lat_iters, bw_iters;
    double timeout_s;          /* DOWN: no answer to the probe within this */
    double create_s;           /* DOWN: the pair's communicator not created within this (derived) */
    double op_s;               /* DOWN: one step of a pair's measurement not done within this (derived) */
    double world_s;            /* the run stops when a step of all ranks takes longer (derived) */
    int clock_all;             /* measure clock offsets for every rank against rank 0 */
    int plain;                 /* bandwidth on malloc memory instead of aclrtMalloc */
    /* the job */
    uint32_t rank, size;
    aclrtStream stream;
    HcclComm world;
    doc_info_t *infos;         /* [size] */
    int8_t *cma;               /* [size x size]: can row read column's memory (-1: other host) */
    doc_pair_t *pairs;         /* [size x size], entry [a * size + b] for a < b */
    char *link_text;           /* [size x size x DOC_LINK_LEN]: row a, column b = a's HcclHostGetLinkInfo of b;
                                  "" where the library could not say */
    doc_listen_t *listen;      /* [size] the port check, NULL when not run */
    doc_reach_t *reach;        /* [size] */
    double port_wait_s;        /* how long a connection attempt of the port check may take */
    int abandoned;             /* a pair's operation never finished: skip the teardown */
    char stopped[200];         /* the run ended early: why ("" when it finished) */
    double elapsed_s;
} doctor_t;

/* info.c; lib_addr is this rank's listening address as its peers' links name it, or NULL */
void doc_info_collect(doctor_t *doc, doc_info_t *me, const char *lib_addr);
uint32_t doc_info_cpu_count(const doc_info_t *info);
int doc_info_share_cpus(const doc_info_t *a, const doc_info_t *b);
void doc_info_cpu_list(const doc_info_t *info, char *buf, size_t len);
int doc_cma_probe(const doc_info_t *peer);

/* transport.c */
const char *doc_link_text(const doctor_t *doc, uint32_t a, uint32_t b);
const char *doc_my_lib_addr(const doctor_t *doc, char *buf, size_t len);
void doc_addr_host(const char *addr, char *host, size_t len);

/* ports.c */
int doc_ports_check(doctor_t *doc, uint32_t *host_of);
void doc_ports_fini(void);

/* measure.c */
int doc_measure_pairs(doctor_t *doc, const uint8_t *which, int retest);
int doc_measure_clocks(doctor_t *doc);
int doc_gather(doctor_t *doc, void *mine, void *all, uint64_t bytes);
void doc_measure_fini(doctor_t *doc);

/* verdict.c */
void doc_classify(const doctor_t *doc, const doc_transport_t *tr, doc_link_t *links);
uint32_t doc_hosts(const doc_info_t *infos, uint32_t n, uint32_t *host_of);
double doc_median(double *v, uint32_t n);
const char *doc_gbps(double v, char *buf, size_t len);
int doc_same_machine(const doc_info_t *a, const doc_info_t *b);

/* checks.c */
uint32_t doc_env_checks(const doctor_t *doc, doc_check_t *checks);

/* report.c: the exit status; prints only when out is not NULL */
int doc_report(const doctor_t *doc, const doc_transport_t *tr, const doc_link_t *links, const doc_check_t *checks,
               uint32_t nchecks, FILE *out);

static inline doc_pair_t *doc_pair(const doctor_t *doc, uint32_t a, uint32_t b)
{
    return &doc->pairs[(uint64_t)(a < b ? a : b) * doc->size + (a < b ? b : a)];
}

#endif /* HCCL_DOCTOR_H */
