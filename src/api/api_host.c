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
#include "hc_log.h"
#include "hc_store.h"
#include "hc_time.h"

/* The variables one launcher sets. A launcher is recognised by its rank variable; the first row
 * that matches wins, so the most specific launchers come first (hccl-run may itself run inside a
 * Slurm allocation, whose variables are then inherited but describe the allocation, not us). */
typedef struct {
    const char *name;
    const char *rank;
    const char *size;
    const char *local_rank;
    const char *local_size;
    const char *local_size_list; /* Slurm's "2(x3),1" form, indexed by node_id; NULL: none */
    const char *node_id;
} launcher_vars_t;

static const launcher_vars_t launchers[] = {
    {.name = "hccl-run", .rank = "RANK", .size = "WORLD_SIZE", .local_rank = "LOCAL_RANK",
     .local_size = "LOCAL_WORLD_SIZE"},
    {.name = "openmpi", .rank = "OMPI_COMM_WORLD_RANK", .size = "OMPI_COMM_WORLD_SIZE",
     .local_rank = "OMPI_COMM_WORLD_LOCAL_RANK", .local_size = "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {.name = "pmi", .rank = "PMI_RANK", .size = "PMI_SIZE", .local_rank = "MPI_LOCALRANKID",
     .local_size = "MPI_LOCALNRANKS"},
    {.name = "slurm", .rank = "SLURM_PROCID", .size = "SLURM_NTASKS", .local_rank = "SLURM_LOCALID",
     .local_size = "SLURM_NTASKS_PER_NODE", .local_size_list = "SLURM_TASKS_PER_NODE",
     .node_id = "SLURM_NODEID"},
};

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

/* The local size of a launcher that has no single variable for it (Slurm without
 * --ntasks-per-node). 1 read, 0 unavailable, -1 malformed (logged). */
static int read_local_size_list(const launcher_vars_t *l, uint32_t *value_p)
{
    const char *list = l->local_size_list != NULL ? getenv(l->local_size_list) : NULL;
    uint32_t node = 0;
    int rc;

    if (list == NULL)
        return 0;
    rc = read_var(l->node_id, &node);
    if (rc < 0)
        return -1;
    if (slurm_tasks_on_node(list, node, value_p) != 0) {
        HC_ERROR("launch info: %s=\"%.64s\" is malformed or has no entry for node %u", l->local_size_list, list,
                 node);
        return -1;
    }
    return 1;
}

static HcclResult check_consistent(const launcher_vars_t *l, const HcclHostLaunchInfo *info)
{
    if (info->size == 0 || info->rank >= info->size) {
        HC_ERROR("launch info: %s=%u and %s=%u do not describe a rank of a job", l->rank, info->rank, l->size,
                 info->size);
        return HCCL_E_PARA;
    }
    if (info->localSize == 0 || info->localRank >= info->localSize || info->localSize > info->size) {
        HC_ERROR("launch info: local rank %u of %u (%s, %s) does not fit a job of %u ranks", info->localRank,
                 info->localSize, l->local_rank, l->local_size, info->size);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Fill info from launcher l, whose rank variable is set. */
static HcclResult read_launcher(const launcher_vars_t *l, HcclHostLaunchInfo *info)
{
    int rc_size, rc_local_rank, rc_local_size;

    if (read_var(l->rank, &info->rank) < 0)
        return HCCL_E_PARA;
    rc_size = read_var(l->size, &info->size);
    if (rc_size == 0)
        HC_ERROR("launch info: %s is set but %s is not", l->rank, l->size);
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
    return check_consistent(l, info);
}

/* The first launcher whose rank variable is set, else rank 0 of 1. */
static HcclResult read_launch_info(HcclHostLaunchInfo *info_p)
{
    HcclHostLaunchInfo found;

    memset(&found, 0, sizeof(found));
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        if (getenv(launchers[i].rank) != NULL) {
            HC_CHECK(read_launcher(&launchers[i], &found));
            *info_p = found;
            return HCCL_SUCCESS;
        }
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
    return read_launch_info(info);
}

/* Rank 0's half: publish the root info. */
static HcclResult publish_root_info(const HcclRootInfo *root_info, const char *key)
{
    return hc_store_set(key, root_info, sizeof(*root_info));
}

/* Every other rank's half: wait for rank 0's root info and copy it out only when complete. */
static HcclResult fetch_root_info(HcclRootInfo *root_info, const char *key, unsigned call)
{
    int64_t timeout_s = hc_config_int(HC_CFG_CONNECT_TIMEOUT);
    HcclRootInfo received;
    size_t len = 0;
    HcclResult res;

    res = hc_store_get(key, &received, sizeof(received), &len, hc_deadline_after_s(timeout_s));
    if (res == HCCL_E_TIMEOUT) {
        HC_ERROR("root info #%u did not arrive from rank 0 within HCCL_CONNECT_TIMEOUT=%lld s; every rank must "
                 "call HcclHostBroadcastRootInfo the same number of times", call, (long long)timeout_s);
        return res;
    }
    HC_CHECK(res);
    if (len != sizeof(received)) {
        HC_ERROR("root info #%u from the store is %zu bytes, not %zu: is another job using the same store?", call,
                 len, sizeof(received));
        return HCCL_E_INTERNAL;
    }
    memcpy(root_info, &received, sizeof(received));
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclHostBroadcastRootInfo(HcclRootInfo *rootInfo)
{
    /* The n-th call of every rank exchanges the n-th root info (hccl_host.h). */
    static atomic_uint calls;
    const hc_log_ctx_t *saved_ctx;
    hc_log_ctx_t ctx = {.rank = -1, .comm_name = NULL};
    HcclHostLaunchInfo info;
    char key[32];
    unsigned call;
    HcclResult res;

    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclHostBroadcastRootInfo(rootInfo=%p)", (void *)rootInfo);
    if (rootInfo == NULL) {
        HC_ERROR("HcclHostBroadcastRootInfo: rootInfo is NULL");
        return HCCL_E_PTR;
    }
    HC_CHECK(read_launch_info(&info));
    call = atomic_fetch_add(&calls, 1u);
    if (info.size == 1)
        return HCCL_SUCCESS;
    ctx.rank = (int)info.rank;
    saved_ctx = hc_log_ctx_push(&ctx);
    if (!hc_store_client_configured()) {
        HC_ERROR("HcclHostBroadcastRootInfo needs a rendezvous store for a job of %u ranks (launcher %s): run the "
                 "program under hccl-run, set HOSTCCL_STORE and HOSTCCL_STORE_TOKEN, or broadcast the root "
                 "info with MPI_Bcast", info.size, info.launcher);
        res = HCCL_E_NOT_SUPPORT;
    } else {
        snprintf(key, sizeof(key), "rootinfo/%u", call);
        res = info.rank == 0 ? publish_root_info(rootInfo, key) : fetch_root_info(rootInfo, key, call);
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
