/*
 * The host-only extensions of include/hccl/hccl_host.h: where this process sits in the job
 * (from the launcher's environment), rank 0's root info to every rank through the rendezvous store,
 * the library version, the calling thread's last error line, and how a communicator reaches a peer.
 *
 * The launcher protocols are not tunables: they are other programs' interfaces, so their variables
 * are read here with getenv, all from the one table below.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hccl/hccl_host.h>

#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_launch.h"
#include "hc_log.h"

/* The variables one launcher sets. A launcher is recognised by its rank variable (and `requires`,
 * when set); the first row that matches wins, so the most specific launchers come first. hccl-run's
 * row is skipped when an inner launcher started the process (hccl_run_is_outer). */
typedef struct {
    const char *name;
    const char *rank;
    const char *size[2];            /* the first that is set */
    const char *local_rank;
    const char *local_size;
    const char *local_size_list[2]; /* Slurm's "2(x3),1" form, indexed by node_id: the first that is set */
    const char *node_id;
    const char *requires;           /* NULL, or a variable without which the row does not apply */
} launcher_vars_t;

/*
 * Slurm: a process is a task only inside a step (SLURM_STEP_ID; a batch script has SLURM_PROCID=0
 * and SLURM_NTASKS of the allocation but is not rank 0 of it). The step's own counts come first:
 * inside `salloc --ntasks-per-node=8`, `srun -n 4` tasks inherit SLURM_NTASKS_PER_NODE=8 but have
 * SLURM_STEP_TASKS_PER_NODE=4.
 */
static const launcher_vars_t launchers[] = {
    {.name = "hccl-run", .rank = "RANK", .size = {"WORLD_SIZE"}, .local_rank = "LOCAL_RANK",
     .local_size = "LOCAL_WORLD_SIZE"},
    {.name = "openmpi", .rank = "OMPI_COMM_WORLD_RANK", .size = {"OMPI_COMM_WORLD_SIZE"},
     .local_rank = "OMPI_COMM_WORLD_LOCAL_RANK", .local_size = "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {.name = "pmi", .rank = "PMI_RANK", .size = {"PMI_SIZE"}, .local_rank = "MPI_LOCALRANKID",
     .local_size = "MPI_LOCALNRANKS"},
    {.name = "slurm", .rank = "SLURM_PROCID", .size = {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"},
     .local_rank = "SLURM_LOCALID", .local_size_list = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"},
     .node_id = "SLURM_NODEID", .requires = "SLURM_STEP_ID"},
};

/* RANK & co. are an outer hccl-run's when the launcher variables it saw (HOSTCCL_RUN_OUTER) are not
 * the ones this process sees: a launcher that hccl-run started has started this process. */
static int hccl_run_is_outer(void)
{
    const char *seen = getenv("HOSTCCL_RUN_OUTER");
    char now[HC_LAUNCH_OUTER_BYTES];

    if (seen == NULL)
        return 0;
    hc_launch_outer_digest(now);
    return strcmp(seen, now) != 0;
}

/* The first of the (up to two) names that is set; NULL when none. */
static const char *first_set(const char *const names[2])
{
    for (int i = 0; i < 2; i++)
        if (names[i] != NULL && getenv(names[i]) != NULL)
            return names[i];
    return NULL;
}

/* Decimal digits only, no sign, no spaces, at most UINT32_MAX: 0 on success. */
static int parse_u32(const char *text, uint32_t *value_p)
{
    unsigned long long v;
    char *end;

    if (text == NULL || text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v > UINT32_MAX)
        return -1;
    *value_p = (uint32_t)v;
    return 0;
}

/* Read variable `name` as a number: 1 read, 0 unset, -1 malformed (logged). */
static int read_var(const char *name, uint32_t *value_p)
{
    const char *text = name != NULL ? getenv(name) : NULL;

    if (text == NULL)
        return 0;
    if (parse_u32(text, value_p) != 0) {
        HC_ERROR("launch info: %s=\"%.32s\" is not a non-negative decimal number", name, text);
        return -1;
    }
    return 1;
}

/*
 * Tasks on node `node` from Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": three nodes with 2 tasks,
 * then one with 1). 0 on success, -1 when malformed or too short.
 */
static int slurm_tasks_on_node(const char *list, uint32_t node, uint32_t *count_p)
{
    uint64_t index = 0;
    const char *p = list;

    while (*p != '\0') {
        char *end;
        unsigned long count, repeat = 1;
        errno = 0;
        count = strtoul(p, &end, 10);
        if (end == p || errno != 0 || count > UINT32_MAX)
            return -1;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            repeat = strtoul(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || repeat == 0 || repeat > UINT32_MAX)
                return -1;
            p = end + 1;
        }
        if (node < index + repeat) {
            *count_p = (uint32_t)count;
            return 0;
        }
        index += repeat;
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return -1;
    }
    return -1;
}

/* The local size of a launcher that has no single variable for it (Slurm). 1 read, 0 unavailable,
 * -1 malformed (logged). */
static int read_local_size_list(const launcher_vars_t *l, uint32_t *value_p)
{
    const char *name = first_set(l->local_size_list);
    const char *list = name != NULL ? getenv(name) : NULL;
    uint32_t node = 0;
    int rc;

    if (list == NULL)
        return 0;
    rc = read_var(l->node_id, &node);
    if (rc < 0)
        return -1;
    if (slurm_tasks_on_node(list, node, value_p) != 0) {
        HC_ERROR("launch info: %s=\"%.64s\" is malformed or has no entry for node %u", name, list, node);
        return -1;
    }
    return 1;
}

static HcclResult check_consistent(const launcher_vars_t *l, const char *size_var, const HcclHostLaunchInfo *info)
{
    const char *local_size_var = l->local_size != NULL ? l->local_size : first_set(l->local_size_list);

    if (info->size == 0 || info->rank >= info->size) {
        HC_ERROR("launch info: %s=%u and %s=%u do not describe a rank of a job", l->rank, info->rank, size_var,
                 info->size);
        return HCCL_E_PARA;
    }
    if (info->localSize == 0 || info->localRank >= info->localSize || info->localSize > info->size) {
        HC_ERROR("launch info: local rank %u of %u (%s, %s) does not fit a job of %u ranks", info->localRank,
                 info->localSize, l->local_rank, local_size_var != NULL ? local_size_var : "-", info->size);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Fill info from launcher l, whose rank variable is set. */
static HcclResult read_launcher(const launcher_vars_t *l, HcclHostLaunchInfo *info)
{
    const char *size_var = first_set(l->size) != NULL ? first_set(l->size) : l->size[0];
    int rc_size, rc_local_rank, rc_local_size;

    if (read_var(l->rank, &info->rank) < 0)
        return HCCL_E_PARA;
    rc_size = read_var(size_var, &info->size);
    if (rc_size == 0)
        HC_ERROR("launch info: %s is set but %s is not", l->rank, size_var);
    if (rc_size <= 0)
        return HCCL_E_PARA;
    rc_local_rank = read_var(l->local_rank, &info->localRank);
    rc_local_size = read_var(l->local_size, &info->localSize);
    if (rc_local_size == 0)
        rc_local_size = read_local_size_list(l, &info->localSize);
    if (rc_local_rank < 0 || rc_local_size < 0)
        return HCCL_E_PARA;
    /* A launcher that does not say which ranks share a host: assume one host, the only guess that
     * is right for a single-machine run, and say so. */
    if (rc_local_rank == 0 || rc_local_size == 0) {
        HC_INFO("launch info: %s gives no local rank or size; assuming all %u ranks share this host", l->name,
                info->size);
        info->localRank = info->rank;
        info->localSize = info->size;
    }
    snprintf(info->launcher, sizeof(info->launcher), "%s", l->name);
    return check_consistent(l, size_var, info);
}

/* The first launcher whose variables apply, else rank 0 of 1. *store_is_ours_p: HOSTCCL_STORE (if
 * any) belongs to this job, i.e. no outer hccl-run's variables were passed over. */
static HcclResult read_launch_info(HcclHostLaunchInfo *info_p, int *store_is_ours_p)
{
    HcclHostLaunchInfo found;
    int outer = hccl_run_is_outer();

    memset(&found, 0, sizeof(found));
    *store_is_ours_p = !outer;
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        const launcher_vars_t *l = &launchers[i];
        if (getenv(l->rank) == NULL || (l->requires != NULL && getenv(l->requires) == NULL) || (i == 0 && outer))
            continue;
        HC_CHECK(read_launcher(l, &found));
        *info_p = found;
        return HCCL_SUCCESS;
    }
    found.size = found.localSize = 1;
    snprintf(found.launcher, sizeof(found.launcher), "none");
    *info_p = found;
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclHostGetLaunchInfo(HcclHostLaunchInfo *info)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclHostGetLaunchInfo(info=%p)", (void *)info);
    if (info == NULL) {
        HC_ERROR("HcclHostGetLaunchInfo: info is NULL");
        return HCCL_E_PTR;
    }
    return read_launch_info(info, &(int){0});
}

HC_API_EXPORT HcclResult HcclHostBroadcastRootInfo(HcclRootInfo *rootInfo)
{
    /* The n-th call of every rank exchanges the n-th root info (hccl_host.h). */
    static atomic_uint calls;
    const hc_log_ctx_t *saved_ctx;
    hc_log_ctx_t ctx = {.rank = -1, .comm_name = NULL};
    HcclHostLaunchInfo info;
    const hc_launch_bcast_ops_t *way;
    hc_launch_t job;
    char key[32];
    unsigned call;
    HcclResult res;

    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclHostBroadcastRootInfo(rootInfo=%p)", (void *)rootInfo);
    if (rootInfo == NULL) {
        HC_ERROR("HcclHostBroadcastRootInfo: rootInfo is NULL");
        return HCCL_E_PTR;
    }
    HC_CHECK(read_launch_info(&info, &job.store_is_ours));
    call = atomic_fetch_add(&calls, 1u);
    if (info.size == 1)
        return HCCL_SUCCESS;
    ctx.rank = (int)info.rank;
    saved_ctx = hc_log_ctx_push(&ctx);
    job.rank = info.rank;
    job.size = info.size;
    job.local_rank = info.localRank;
    job.local_size = info.localSize;
    job.launcher = info.launcher;
    way = hc_launch_bcast_pick(&job);
    if (way == NULL) {
        HC_ERROR("HcclHostBroadcastRootInfo has no way to reach the other %u ranks (launcher %s): run the program "
                 "under hccl-run, under srun --mpi=pmix (or srun on one node), set HOSTCCL_STORE and "
                 "HOSTCCL_STORE_TOKEN, or broadcast the root info with MPI_Bcast", info.size - 1, info.launcher);
        res = HCCL_E_NOT_SUPPORT;
    } else {
        snprintf(key, sizeof(key), "rootinfo/%u", call);
        HC_DEBUG("HcclHostBroadcastRootInfo #%u through %s", call, way->name);
        res = way->bcast(&job, key, rootInfo, sizeof(*rootInfo));
    }
    hc_log_ctx_pop(saved_ctx);
    return res;
}

HC_API_EXPORT HcclResult HcclHostGetVersion(uint32_t *version)
{
    if (version == NULL) {
        HC_ERROR("HcclHostGetVersion: version is NULL");
        return HCCL_E_PTR;
    }
    *version = HOSTCCL_VERSION_MAJOR * 10000u + HOSTCCL_VERSION_MINOR * 100u + HOSTCCL_VERSION_PATCH;
    return HCCL_SUCCESS;
}

HC_API_EXPORT const char *HcclHostGetRecentErrMsg(void)
{
    return hc_log_last_error();
}

/* Whether the launcher says every rank of the job runs on this host (HcclGetRootInfo then binds
 * its listener to loopback). Unknown launchers and a lone process say nothing: they may pass the
 * root info to other hosts by means of their own. */
int hc_api_launch_one_host(void)
{
    HcclHostLaunchInfo info;

    if (read_launch_info(&info, &(int){0}) != HCCL_SUCCESS)
        return 0;
    return strcmp(info.launcher, "none") != 0 && info.localSize == info.size;
}

/* The engine's own one-line description of the link to `peer` (hc_engine_ops_t.describe_link). The
 * communicator reference keeps the engine alive; what the engines read for it is fixed once the
 * communicator is created, so no lock is needed. */
static HcclResult describe_link(const hc_comm_t *c, uint32_t peer, char *text, size_t len)
{
    if (peer == c->rank) {
        snprintf(text, len, "self");
        return HCCL_SUCCESS;
    }
    if (c->engine == NULL) {
        HC_ERROR("HcclHostGetLinkInfo: %s",
                 c->no_engine_reason != NULL ? c->no_engine_reason : "no engine serves this communicator");
        return HCCL_E_NOT_SUPPORT;
    }
    if (c->engine->ops->describe_link == NULL) {
        HC_ERROR("HcclHostGetLinkInfo: engine %s cannot describe its links", c->engine->ops->name);
        return HCCL_E_NOT_SUPPORT;
    }
    c->engine->ops->describe_link(c->engine, peer, text, len);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclHostGetLinkInfo(HcclComm comm, uint32_t peer, char *buf, size_t len)
{
    char text[HCCL_HOST_LINK_INFO_MAX];
    hc_comm_t *c;
    HcclResult res;

    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclHostGetLinkInfo(comm=%p, peer=%u, buf=%p, len=%zu)", comm, peer, (void *)buf, len);
    HC_CHECK(hc_comm_acquire(comm, "HcclHostGetLinkInfo", &c));
    if (buf == NULL) {
        HC_ERROR("HcclHostGetLinkInfo: buf is NULL");
        res = HCCL_E_PTR;
    } else if (peer >= c->nranks) {
        HC_ERROR("HcclHostGetLinkInfo: peer %u is not a rank of a communicator of %u ranks", peer, c->nranks);
        res = HCCL_E_PARA;
    } else {
        text[0] = '\0';
        res = describe_link(c, peer, text, sizeof(text));
    }
    if (res == HCCL_SUCCESS && strlen(text) >= len) {
        HC_ERROR("HcclHostGetLinkInfo: \"%s\" needs %zu bytes, buf has %zu (HCCL_HOST_LINK_INFO_MAX is always "
                 "enough)", text, strlen(text) + 1, len);
        res = HCCL_E_PARA;
    }
    if (res == HCCL_SUCCESS)
        memcpy(buf, text, strlen(text) + 1);
    hc_comm_release(c);
    return res;
}
