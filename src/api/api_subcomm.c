/*
 * HcclCreateSubCommConfig: a sub-communicator (a TP or PP group cut from the world) made without a
 * new root info from the user. The leader (rankIds[0]) makes a root info and posts it in the
 * parent engine's mailbox (the shared segment inside a host, a message over TCP to members on other
 * hosts); the other members fetch it there; then every member joins as usual. Only members call this, as in HCCL, so nothing here is collective over the parent.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_time.h"

static HcclResult check_members(const hc_comm_t *parent, uint32_t rankNum, const uint32_t *rankIds,
                                uint32_t subCommRankId)
{
    if (rankNum == 0 || rankNum > parent->nranks || subCommRankId >= rankNum) {
        HC_ERROR("HcclCreateSubCommConfig: rankNum %u / subCommRankId %u out of range for a parent of %u ranks",
                 rankNum, subCommRankId, parent->nranks);
        return HCCL_E_PARA;
    }
    if (rankIds[subCommRankId] != parent->rank) {
        HC_ERROR("HcclCreateSubCommConfig: rankIds[%u] is %u, but this is rank %u of the parent", subCommRankId,
                 rankIds[subCommRankId], parent->rank);
        return HCCL_E_PARA;
    }
    for (uint32_t i = 0; i < rankNum; i++) {
        if (rankIds[i] >= parent->nranks) {
            HC_ERROR("HcclCreateSubCommConfig: rankIds[%u] = %u is not a rank of the parent (%u ranks)", i,
                     rankIds[i], parent->nranks);
            return HCCL_E_PARA;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (rankIds[i] == rankIds[j]) {
                HC_ERROR("HcclCreateSubCommConfig: rank %u appears twice in rankIds", rankIds[i]);
                return HCCL_E_PARA;
            }
        }
    }
    return HCCL_SUCCESS;
}

/* The tag every member computes alike: subCommId, how many times this id was used on the parent,
 * and the member list. Never 0. */
static HcclResult make_tag(hc_comm_t *parent, uint64_t id, uint32_t rankNum, const uint32_t *rankIds, uint64_t *tag_p)
{
    uint64_t generation = 0, words[3];
    uint32_t i;

    pthread_mutex_lock(&parent->subcomm_lock);
    for (i = 0; i < parent->nsubcomm_ids && parent->subcomm_ids[i] != id; i++)
        ;
    if (i == parent->nsubcomm_ids && i < 64) {
        parent->subcomm_ids[i] = id;
        parent->subcomm_counts[i] = 0;
        parent->nsubcomm_ids++;
    }
    if (i < 64)
        generation = ++parent->subcomm_counts[i];
    pthread_mutex_unlock(&parent->subcomm_lock);
    if (generation == 0) {
        HC_ERROR("HcclCreateSubCommConfig: more than 64 distinct subCommIds on one parent");
        return HCCL_E_UNAVAIL;
    }
    words[0] = id;
    words[1] = generation;
    words[2] = 0;
    for (uint32_t k = 0; k < rankNum; k++)
        words[2] = words[2] * 1000003u + rankIds[k];
    *tag_p = hc_op_digest(words, 3) | 1;
    return HCCL_SUCCESS;
}

static HcclResult exchange_root_info(hc_comm_t *parent, uint64_t tag, const uint32_t *members, uint32_t nmembers,
                                     HcclRootInfo *info)
{
    hc_engine_t *engine = parent->engine;

    if (parent->rank == members[0]) {
        HC_CHECK(HcclGetRootInfo(info));
        return engine->ops->mailbox_post(engine, tag, info, members, nmembers);
    }
    return engine->ops->mailbox_fetch(engine, members[0], tag,
                                      hc_deadline_after_s(hc_config_int(HC_CFG_CONNECT_TIMEOUT)), info);
}

HC_API_EXPORT HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                                 uint64_t subCommId, uint32_t subCommRankId,
                                                 HcclCommConfig *config, HcclComm *subComm)
{
    char name[COMM_NAME_MAX_LENGTH];
    HcclRootInfo info;
    hc_comm_t *parent;
    uint64_t tag = 0;
    HcclResult res;

    if (comm == NULL || rankIds == NULL || subComm == NULL) {
        HC_ERROR("HcclCreateSubCommConfig: %s is NULL", comm == NULL ? "comm" : rankIds == NULL ? "rankIds" : "subComm");
        return HCCL_E_PTR;
    }
    HC_CHECK(hc_comm_acquire(*comm, "HcclCreateSubCommConfig", &parent));
    const hc_log_ctx_t *previous = hc_log_ctx_push(&parent->log_ctx);
    HC_CHECK_GOTO(check_members(parent, rankNum, rankIds, subCommRankId), res, out);
    if (parent->engine == NULL || parent->engine->ops->mailbox_post == NULL) {
        HC_ERROR("HcclCreateSubCommConfig: the parent's engine (%s) cannot make sub-communicators",
                 parent->engine != NULL ? parent->engine->ops->name : "none");
        res = HCCL_E_NOT_SUPPORT;
        goto out;
    }
    HC_CHECK_GOTO(make_tag(parent, subCommId, rankNum, rankIds, &tag), res, out);
    HC_CHECK_GOTO(exchange_root_info(parent, tag, rankIds, rankNum, &info), res, out);
    snprintf(name, sizeof(name), "%.100s_sub%llu", parent->name, (unsigned long long)subCommId);
    res = hc_api_comm_init(rankNum, &info, subCommRankId, config, name, subComm);
out:
    hc_log_ctx_pop(previous);
    hc_comm_release(parent);
    return res;
}
