/*
 * hccl-doctor: run it as the job, `hccl-run -n N hccl-doctor` or `mpirun -np N hccl-doctor`, on
 * the ranks the real job will use. Rank 0 prints the report and exits with the verdict; the other
 * ranks exit 0 (2 when the job could not start).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef HC_DOCTOR_WITH_MPI
#include <mpi.h>
#endif

#include "doctor.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hccl-run -n N hccl-doctor [options]     (or mpirun -np N, srun with HOSTCCL_STORE)\n"
            "  --json               JSON instead of the table\n"
            "  --json-out FILE      also write the JSON to FILE (rank 0)\n"
            "  --fraction F         DEGRADED below F of the comparable pairs' bandwidth, above 1/F of their\n"
            "                       latency (default 0.5)\n"
            "  --expect-bw [T=]GBPS DEGRADED below this bandwidth, whatever the other pairs do; T (shm or tcp)\n"
            "                       limits it to one transport; repeatable\n"
            "  --expect-lat [T=]US  DEGRADED above this one-way latency; the same\n"
            "  --size BYTES         bandwidth message size (default 4194304)\n"
            "  --iters N            latency round trips per pair, at most (default 200)\n"
            "  --timeout S          DOWN when a pair does not answer a probe within S seconds, or gets no\n"
            "                       communicator within max(2, 2 S) (default 2)\n"
            "  --plain              bandwidth on malloc memory (CMA path) instead of aclrtMalloc memory\n"
            "  --clock-all          measure every rank's clock offset to rank 0, not only other hosts'\n"
            "exit status (rank 0's; the other ranks exit 0): 0 every link OK and no check failed; 1 a link\n"
            "DEGRADED or DOWN, a check FAILed, or the run stopped early;\n"
            "2 bad usage or the job could not start\n");
}

static int parse_double(const char *s, double *v)
{
    char *end;

    *v = strtod(s, &end);
    return *s != '\0' && *end == '\0' && *v > 0 ? 0 : -1;
}

/* An option with a numeric value: its bounds and where it goes; per_kind: dst is an array of
 * KIND_COUNT set by "[shm=|tcp=]VALUE". */
typedef struct {
    const char *name;
    double min, max;
    double *dst;
    int per_kind;
} num_opt_t;

/* "VALUE" sets every transport's entry, "shm=VALUE" or "tcp=VALUE" one. */
static int parse_per_kind(const char *text, const num_opt_t *o)
{
    static const char *const kinds[] = {[KIND_SHM] = "shm=", [KIND_TCP] = "tcp="};
    double v;

    for (int k = 0; k < KIND_OTHER; k++)
        if (strncmp(text, kinds[k], 4) == 0) {
            if (parse_double(text + 4, &v) != 0 || v < o->min || v > o->max)
                return -1;
            o->dst[k] = v;
            return 0;
        }
    if (parse_double(text, &v) != 0 || v < o->min || v > o->max)
        return -1;
    for (int k = 0; k < KIND_COUNT; k++)
        o->dst[k] = v;
    return 0;
}

static int parse_value(const char *text, const num_opt_t *o)
{
    if (o->per_kind)
        return parse_per_kind(text, o);
    return parse_double(text, o->dst) != 0 || *o->dst < o->min || *o->dst > o->max ? -1 : 0;
}

static int parse(int argc, char **argv, doctor_t *doc)
{
    double size = 4 << 20, iters = 200;
    const num_opt_t opts[] = {
        {.name = "--fraction", .min = 0.01, .max = 0.99, .dst = &doc->fraction},
        {.name = "--expect-bw", .min = 1e-6, .max = 1e6, .dst = doc->expect_bw, .per_kind = 1},
        {.name = "--expect-lat", .min = 1e-3, .max = 1e9, .dst = doc->expect_lat, .per_kind = 1},
        {.name = "--size", .min = 8, .max = (double)(1ull << 34), .dst = &size},
        {.name = "--iters", .min = 1, .max = 1e6, .dst = &iters},
        {.name = "--timeout", .min = 0.01, .max = 3600, .dst = &doc->timeout_s},
    };

    doc->fraction = 0.5;
    doc->bw_iters = 4;
    doc->timeout_s = 2.0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        size_t k = 0;
        if (strcmp(o, "--json") == 0 || strcmp(o, "--plain") == 0 || strcmp(o, "--clock-all") == 0) {
            *(o[2] == 'j' ? &doc->json : o[2] == 'p' ? &doc->plain : &doc->clock_all) = 1;
            continue;
        }
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0)
            return 1;
        if (strcmp(o, "--json-out") == 0 && i + 1 < argc && argv[i + 1][0] != '\0') {
            doc->json_out = argv[++i];
            continue;
        }
        while (k < sizeof(opts) / sizeof(opts[0]) && strcmp(o, opts[k].name) != 0)
            k++;
        if (k == sizeof(opts) / sizeof(opts[0]) || i + 1 >= argc || parse_value(argv[i + 1], &opts[k]) != 0) {
            fprintf(stderr, "hccl-doctor: bad option or value: %s%s%s\n", o, i + 1 < argc ? " " : "",
                    i + 1 < argc ? argv[i + 1] : "");
            return -1;
        }
        i++;
    }
    doc->bw_bytes = (uint64_t)size;
    doc->lat_iters = (uint32_t)iters;
    /* The bounds that follow from --timeout (docs/hccl-doctor.md, "Time bounds"). */
    doc->create_s = fmax(2.0, ceil(2.0 * doc->timeout_s));
    doc->op_s = fmax(5.0, 10.0 * doc->timeout_s);
    doc->world_s = doc->create_s + doc->timeout_s + 4.0 * doc->op_s + 10.0;
    doc->port_wait_s = doc->timeout_s;
    return 0;
}

static int store_available(void)
{
    const char *store = getenv("HOSTCCL_STORE");

    return store != NULL && store[0] != '\0';
}

/* The seed's bootstrap: rank 0's root info to every rank, through hccl-run's store or MPI_Bcast. */
static int share_root_info(const HcclHostLaunchInfo *launch, HcclRootInfo *root)
{
    if (launch->size == 1)
        return 0;
    if (store_available() || strcmp(launch->launcher, "hccl-run") == 0)
        return HcclHostBroadcastRootInfo(root) == HCCL_SUCCESS ? 0 : -1;
#ifdef HC_DOCTOR_WITH_MPI
    {
        int ready = 0;
        MPI_Initialized(&ready);
        if (!ready && MPI_Init(NULL, NULL) != MPI_SUCCESS)
            return -1;
        return MPI_Bcast(root, (int)sizeof(*root), MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
    }
#else
    fprintf(stderr, "hccl-doctor: started by %s without HOSTCCL_STORE, and built without MPI: run it under "
                    "hccl-run, or set HOSTCCL_STORE\n", launch->launcher);
    return -1;
#endif
}

/* Before any thread exists: an operation that never completes fails after world_s (and some)
 * instead of HCCL's half hour, unless the user said otherwise; HCCL_CONNECT_TIMEOUT is made to exist
 * (with the user's value, or the default) so that it can be changed later without reallocating the
 * environment. */
static int bounds_env(const doctor_t *doc)
{
    char text[32];

    snprintf(text, sizeof(text), "%.0f", ceil(doc->world_s) + 10.0);
    if (setenv("HCCL_EXEC_TIMEOUT", text, 0) != 0)
        return -1;
    return setenv("HCCL_CONNECT_TIMEOUT", getenv("HCCL_CONNECT_TIMEOUT") != NULL ? getenv("HCCL_CONNECT_TIMEOUT")
                                                                                : "120", 1);
}

static int start(doctor_t *doc)
{
    HcclHostLaunchInfo launch;
    HcclRootInfo root;

    memset(&root, 0, sizeof(root));
    if (aclInit(NULL) != ACL_SUCCESS || HcclHostGetLaunchInfo(&launch) != HCCL_SUCCESS ||
        aclrtSetDevice((int32_t)launch.localRank) != ACL_SUCCESS || aclrtCreateStream(&doc->stream) != ACL_SUCCESS)
        return -1;
    doc->rank = launch.rank;
    doc->size = launch.size;
    if (doc->rank == 0 && HcclGetRootInfo(&root) != HCCL_SUCCESS)
        return -1;
    if (share_root_info(&launch, &root) != 0)
        return -1;
    return HcclCommInitRootInfo(doc->size, &root, doc->rank, &doc->world) == HCCL_SUCCESS ? 0 : -1;
}

/* Every rank's view of every peer (HcclHostGetLinkInfo on the world communicator) to every rank;
 * rows stay "" where the library cannot say. */
static int gather_links(doctor_t *doc)
{
    char *row = calloc(doc->size, DOC_LINK_LEN);
    int rc;

    if (row == NULL)
        return -1;
    for (uint32_t p = 0; p < doc->size; p++) {
        HcclResult res = HcclHostGetLinkInfo(doc->world, p, row + (uint64_t)p * DOC_LINK_LEN, DOC_LINK_LEN);
        if (res == HCCL_E_NOT_SUPPORT)
            break; /* the same for every peer: said once */
        if (res != HCCL_SUCCESS)
            row[(uint64_t)p * DOC_LINK_LEN] = '\0';
    }
    rc = doc_gather(doc, row, doc->link_text, (uint64_t)doc->size * DOC_LINK_LEN);
    free(row);
    return rc;
}

/* Who can read whose memory: row a, column b = 1 when a read b's canary with process_vm_readv. */
static int cma_matrix(doctor_t *doc)
{
    int8_t *row = calloc(doc->size, 1);
    int rc;

    if (row == NULL)
        return -1;
    for (uint32_t b = 0; b < doc->size; b++)
        row[b] = strcmp(doc->infos[b].host_id, doc->infos[doc->rank].host_id) != 0 ? -1
                                                                                 : (int8_t)doc_cma_probe(&doc->infos[b]);
    rc = doc_gather(doc, row, doc->cma, doc->size);
    free(row);
    return rc;
}

/* Every rank's row of pair results (pairs (rank, b > rank)) to every rank. */
static int share_pairs(doctor_t *doc)
{
    uint64_t row = (uint64_t)doc->size * sizeof(doc_pair_t);
    doc_pair_t *all = malloc(row * doc->size);
    int rc;

    if (all == NULL)
        return -1;
    rc = doc_gather(doc, &doc->pairs[(uint64_t)doc->rank * doc->size], all, row);
    if (rc == 0)
        memcpy(doc->pairs, all, row * doc->size);
    free(all);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Measure every pair; re-measure the ones that look degraded, once. */
static int run(doctor_t *doc, doc_transport_t *tr, doc_link_t *links)
{
    uint64_t nn = (uint64_t)doc->size * doc->size;
    uint8_t *which = calloc(nn, 1);
    int again = 0, rc = 0;

    if (which == NULL)
        return -1;
    memset(which, 1, nn);
    rc = doc_measure_pairs(doc, which, 0) != 0 || share_pairs(doc) != 0;
    if (rc == 0) {
        doc_classify(doc, tr, links);
        for (uint64_t i = 0; i < nn; i++) {
            which[i] = links[i].status == LINK_DEGRADED;
            again |= which[i];
        }
        if (again)
            rc = doc_measure_pairs(doc, which, 1) != 0 || share_pairs(doc) != 0;
    }
    if (rc == 0)
        rc = doc_measure_clocks(doc) != 0 || share_pairs(doc) != 0;
    doc_classify(doc, tr, links); /* after a stop too: what was not measured is UNTESTED */
    free(which);
    return rc;
}

/* What every rank knows about itself, the transports, and the port check between hosts. */
static int survey(doctor_t *doc, doc_transport_t *tr)
{
    const doc_transport_source_ops_t *source = &doc_transport_library_ops;
    uint32_t *host_of = calloc(doc->size, sizeof(uint32_t));
    char addr[DOC_ADDR_LEN];
    doc_info_t me;
    int rc;

    if (host_of == NULL || gather_links(doc) != 0) {
        free(host_of);
        return -1;
    }
    doc_info_collect(doc, &me, doc_my_lib_addr(doc, addr, sizeof(addr)));
    rc = doc_gather(doc, &me, doc->infos, sizeof(me)) != 0 || cma_matrix(doc) != 0;
    if (rc == 0 && doc_hosts(doc->infos, doc->size, host_of) > 1)
        rc = doc_ports_check(doc, host_of);
    for (uint32_t a = 0; a < doc->size && rc == 0; a++)
        for (uint32_t b = a + 1; b < doc->size; b++)
            source->describe(doc, a, b, &tr[(uint64_t)a * doc->size + b]);
    free(host_of);
    return rc;
}

int main(int argc, char **argv)
{
    doctor_t doc = {0};
    doc_transport_t *tr;
    doc_link_t *links;
    doc_check_t checks[DOC_MAX_CHECKS];
    uint32_t nchecks;
    int rc, code;
    double t0;
    char text[32];

    rc = parse(argc, argv, &doc);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    if (bounds_env(&doc) != 0 || start(&doc) != 0) {
        fprintf(stderr, "hccl-doctor: the job could not start (see the lines above)\n");
        return 2;
    }
    /* The pairs' communicators: DOWN when not made within create_s, or when a step of theirs takes
     * longer than op_s (a communicator takes HCCL_EXEC_TIMEOUT when it is created). Both variables
     * exist already (bounds_env), so this replaces their values in place while the library's
     * threads may read the environment. */
    snprintf(text, sizeof(text), "%.0f", doc.create_s);
    setenv("HCCL_CONNECT_TIMEOUT", text, 1);
    snprintf(text, sizeof(text), "%.0f", ceil(doc.op_s));
    setenv("HCCL_EXEC_TIMEOUT", text, 1);
    /* One pair communicator per peer, each with its own id: the library keeps 64 ids per parent. */
    if (doc.size > DOC_MAX_RANKS) {
        if (doc.rank == 0)
            fprintf(stderr, "hccl-doctor: %u ranks: this doctor measures at most %u (it makes a sub-communicator "
                            "per peer, and libhccl keeps 64 sub-communicator ids per communicator)\n",
                    doc.size, DOC_MAX_RANKS);
        return 2;
    }
    t0 = now_s();
    doc.infos = calloc(doc.size, sizeof(doc_info_t));
    doc.cma = calloc((uint64_t)doc.size * doc.size, 1);
    doc.pairs = calloc((uint64_t)doc.size * doc.size, sizeof(doc_pair_t));
    doc.link_text = calloc((uint64_t)doc.size * doc.size, DOC_LINK_LEN);
    tr = calloc((uint64_t)doc.size * doc.size, sizeof(*tr));
    links = calloc((uint64_t)doc.size * doc.size, sizeof(*links));
    if (doc.infos == NULL || doc.cma == NULL || doc.pairs == NULL || doc.link_text == NULL || tr == NULL ||
        links == NULL)
        return 2;
    if (survey(&doc, tr) != 0)
        return 2;
    rc = run(&doc, tr, links);
    doc.elapsed_s = now_s() - t0;
    nchecks = doc_env_checks(&doc, checks);
    code = doc_report(&doc, tr, links, checks, nchecks, doc.rank == 0 ? stdout : NULL);
    if (rc != 0)
        code = 1;
    /* The verdict is rank 0's, and so is the job's status: a launcher stops the job when any rank
     * fails, and another rank failing first could end rank 0 before it printed the report. */
    if (doc.rank != 0)
        code = 0;
    fflush(stdout);
    fflush(stderr);
    if (doc.abandoned)
        _exit(code); /* an operation is still queued on an abandoned pair: no teardown would finish */
    doc_measure_fini(&doc);
    (void)HcclCommDestroy(doc.world);
    (void)aclrtDestroyStream(doc.stream);
    (void)aclFinalize();
#ifdef HC_DOCTOR_WITH_MPI
    {
        int ready = 0, done = 0;
        MPI_Initialized(&ready);
        MPI_Finalized(&done);
        if (ready && !done)
            MPI_Finalize();
    }
#endif
    free(doc.infos);
    free(doc.cma);
    free(doc.pairs);
    free(doc.link_text);
    free(doc.listen);
    free(doc.reach);
    free(tr);
    free(links);
    return code;
}
