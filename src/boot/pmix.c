/*
 * The PMIx way of hc_launch.h: rank 0 puts its bytes, every rank commits and fences with data
 * collection, the others get rank 0's value. For jobs whose launcher runs a PMIx server (srun
 * --mpi=pmix; PMIx-based mpirun), which it announces with PMIX_NAMESPACE and PMIX_RANK.
 *
 * libpmix is loaded at run time (Debian's libpmix2: "libpmix.so.2"), so hostccl neither needs PMIx
 * to build nor links it into programs that never use it. The few types used are declared here
 * with the layout the PMIx Standard fixes (pmix_common.h of PMIx 2 to 5 agree on it); the values
 * of the constants are the Standard's too.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_launch.h"

#define PMIX_SUCCESS 0
#define PMIX_BOOL 1
#define PMIX_INT 6
#define PMIX_BYTE_OBJECT 27
#define PMIX_GLOBAL 3
#define PMIX_RANK_WILDCARD (UINT32_MAX - 1)
#define PMIX_COLLECT_DATA "pmix.collect"
#define PMIX_TIMEOUT "pmix.timeout"

typedef struct {
    char nspace[256];
    uint32_t rank;
} pmix_proc_t;

typedef struct {
    uint16_t type;
    union {
        bool flag;
        int integer;
        struct {
            char *bytes;
            size_t size;
        } bo;
        uint8_t size_of_the_union[24];
    } data;
} pmix_value_t;

typedef struct {
    char key[512];
    uint32_t flags;
    pmix_value_t value;
} pmix_info_t;

_Static_assert(sizeof(pmix_proc_t) == 260, "pmix_proc_t layout");
_Static_assert(sizeof(pmix_value_t) == 32 && offsetof(pmix_value_t, data) == 8, "pmix_value_t layout");
_Static_assert(sizeof(pmix_info_t) == 552 && offsetof(pmix_info_t, value) == 520, "pmix_info_t layout");

typedef struct {
    void *lib;
    int (*init)(pmix_proc_t *proc, pmix_info_t *info, size_t ninfo);
    int (*put)(uint8_t scope, const char *key, pmix_value_t *val);
    int (*commit)(void);
    int (*fence)(const pmix_proc_t *procs, size_t nprocs, const pmix_info_t *info, size_t ninfo);
    int (*get)(const pmix_proc_t *proc, const char *key, const pmix_info_t *info, size_t ninfo, pmix_value_t **val);
    int (*finalize)(const pmix_info_t *info, size_t ninfo);
    void (*value_destruct)(pmix_value_t *val); /* optional */
    const char *(*error_string)(int status);   /* optional */
    pmix_proc_t me;
    HcclResult state;                          /* of loading and PMIx_Init */
    int initialized;                           /* PMIx_Init succeeded: finalize at exit */
} pmix_t;

static pmix_t pmix;
static pthread_once_t pmix_once = PTHREAD_ONCE_INIT;

static const char *status_text(int status)
{
    return pmix.error_string != NULL ? pmix.error_string(status) : "PMIx error";
}

static int load_symbols(void)
{
    static const char *const names[] = {"libpmix.so.2", "libpmix.so"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && pmix.lib == NULL; i++)
        pmix.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (pmix.lib == NULL) {
        HC_ERROR("the launcher offers PMIx (PMIX_NAMESPACE is set) but libpmix cannot be loaded: %s (Debian: "
                 "apt-get install -y libpmix2)", dlerror());
        return -1;
    }
    *(void **)&pmix.init = dlsym(pmix.lib, "PMIx_Init");
    *(void **)&pmix.put = dlsym(pmix.lib, "PMIx_Put");
    *(void **)&pmix.commit = dlsym(pmix.lib, "PMIx_Commit");
    *(void **)&pmix.fence = dlsym(pmix.lib, "PMIx_Fence");
    *(void **)&pmix.get = dlsym(pmix.lib, "PMIx_Get");
    *(void **)&pmix.finalize = dlsym(pmix.lib, "PMIx_Finalize");
    *(void **)&pmix.value_destruct = dlsym(pmix.lib, "PMIx_Value_destruct");
    *(void **)&pmix.error_string = dlsym(pmix.lib, "PMIx_Error_string");
    if (pmix.init == NULL || pmix.put == NULL || pmix.commit == NULL || pmix.fence == NULL || pmix.get == NULL ||
        pmix.finalize == NULL) {
        HC_ERROR("libpmix lacks PMIx_Init/Put/Commit/Fence/Get/Finalize: not a PMIx library hostccl can use");
        return -1;
    }
    return 0;
}

/* Once per process: load the library and connect to the launcher's PMIx server. */
static void pmix_start(void)
{
    int status;

    pmix.state = HCCL_E_NOT_SUPPORT;
    if (load_symbols() != 0)
        return;
    status = pmix.init(&pmix.me, NULL, 0);
    if (status != PMIX_SUCCESS) {
        HC_ERROR("PMIx_Init failed: %s (%d): is the PMIx server of the launcher still there?", status_text(status),
                 status);
        return;
    }
    pmix.me.nspace[sizeof(pmix.me.nspace) - 1] = '\0';
    HC_INFO("PMIx: connected as rank %u of namespace %s", pmix.me.rank, pmix.me.nspace);
    pmix.initialized = 1;
    pmix.state = HCCL_SUCCESS;
}

/* Leave the PMIx server cleanly at exit, as launchers expect of their clients. */
__attribute__((destructor)) static void pmix_stop(void)
{
    if (pmix.initialized)
        pmix.finalize(NULL, 0);
}

static int pmix_fits(const hc_launch_t *job)
{
    const char *rank = getenv("PMIX_RANK");
    char text[16];

    /* Only when PMIx numbers the ranks as the launcher that hostccl follows does. */
    snprintf(text, sizeof(text), "%u", job->rank);
    return getenv("PMIX_NAMESPACE") != NULL && rank != NULL && strcmp(rank, text) == 0;
}

/* Rank 0: the bytes into the job's key-value space. */
static HcclResult put_value(const char *key, void *buf, size_t len)
{
    pmix_value_t value = {.type = PMIX_BYTE_OBJECT, .data.bo = {.bytes = buf, .size = len}};
    int status = pmix.put(PMIX_GLOBAL, key, &value);

    if (status == PMIX_SUCCESS)
        status = pmix.commit();
    if (status != PMIX_SUCCESS) {
        HC_ERROR("PMIx_Put/Commit of \"%s\" failed: %s (%d)", key, status_text(status), status);
        return HCCL_E_INTERNAL;
    }
    return HCCL_SUCCESS;
}

/* Everyone: a fence that collects what was put, bounded by HCCL_CONNECT_TIMEOUT. */
static HcclResult fence_all(const char *key)
{
    pmix_proc_t all = pmix.me;
    pmix_info_t info[2];
    int status;

    memset(info, 0, sizeof(info));
    snprintf(info[0].key, sizeof(info[0].key), "%s", PMIX_COLLECT_DATA);
    info[0].value = (pmix_value_t){.type = PMIX_BOOL, .data.flag = true};
    snprintf(info[1].key, sizeof(info[1].key), "%s", PMIX_TIMEOUT);
    info[1].value = (pmix_value_t){.type = PMIX_INT, .data.integer = (int)hc_config_int(HC_CFG_CONNECT_TIMEOUT)};
    all.rank = PMIX_RANK_WILDCARD;
    status = pmix.fence(&all, 1, info, 2);
    if (status != PMIX_SUCCESS) {
        HC_ERROR("PMIx_Fence for \"%s\" failed: %s (%d): every rank must call HcclHostBroadcastRootInfo the same "
                 "number of times, within HCCL_CONNECT_TIMEOUT=%lld s", key, status_text(status), status,
                 (long long)hc_config_int(HC_CFG_CONNECT_TIMEOUT));
        return status == -24 ? HCCL_E_TIMEOUT : HCCL_E_INTERNAL; /* -24: PMIX_ERR_TIMEOUT */
    }
    return HCCL_SUCCESS;
}

/* Ranks but 0: rank 0's value, copied out only when it has the right length. */
static HcclResult get_value(const char *key, void *buf, size_t len)
{
    pmix_proc_t root = pmix.me;
    pmix_value_t *value = NULL;
    HcclResult res = HCCL_SUCCESS;
    int status;

    root.rank = 0;
    status = pmix.get(&root, key, NULL, 0, &value);
    if (status != PMIX_SUCCESS || value == NULL) {
        HC_ERROR("PMIx_Get of rank 0's \"%s\" failed: %s (%d)", key, status_text(status), status);
        return HCCL_E_INTERNAL;
    }
    if (value->type != PMIX_BYTE_OBJECT || value->data.bo.size != len || value->data.bo.bytes == NULL) {
        HC_ERROR("rank 0's \"%s\" from PMIx is not %zu bytes (type %u, %zu bytes)", key, len, value->type,
                 value->type == PMIX_BYTE_OBJECT ? value->data.bo.size : 0);
        res = HCCL_E_INTERNAL;
    } else {
        memcpy(buf, value->data.bo.bytes, len);
    }
    if (pmix.value_destruct != NULL)
        pmix.value_destruct(value);
    else if (value->type == PMIX_BYTE_OBJECT)
        free(value->data.bo.bytes);
    free(value);
    return res;
}

static HcclResult pmix_bcast(const hc_launch_t *job, const char *key, void *buf, size_t len)
{
    char pmix_key[128];

    pthread_once(&pmix_once, pmix_start);
    HC_CHECK(pmix.state);
    snprintf(pmix_key, sizeof(pmix_key), "hostccl.%s", key);
    if (job->rank == 0)
        HC_CHECK(put_value(pmix_key, buf, len));
    HC_CHECK(fence_all(pmix_key));
    return job->rank == 0 ? HCCL_SUCCESS : get_value(pmix_key, buf, len);
}

const hc_launch_bcast_ops_t hc_launch_bcast_pmix = {
    .name = "pmix",
    .fits = pmix_fits,
    .bcast = pmix_bcast,
};
