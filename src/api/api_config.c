/* Process-wide configuration, result texts and the configuration queries (hccl_comm.h). */
#include <stdio.h>
#include <string.h>

#include "hc_api.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_result.h"

/* CANN's texts and its two fallbacks: "unknown error" outside [HCCL_SUCCESS, HCCL_E_RESERVED),
 * "unknown err" for a value inside that has no text. */
HC_API_EXPORT const char *HcclGetErrorString(HcclResult code)
{
    if ((int)code < (int)HCCL_SUCCESS || (int)code >= (int)HCCL_E_RESERVED)
        return "unknown error";
    switch (code) {
#define STRING_CASE(c, text) \
    case c:                  \
        return text;
        HC_RESULT_MAP(STRING_CASE)
#undef STRING_CASE
    default:
        return "unknown err";
    }
}

/*
 * As in CANN, HCCL_DETERMINISTIC set in the environment wins: the call then succeeds and changes
 * nothing. Level 2 (strict, order-preserving) is accepted: a host always reduces in rank order.
 */
HC_API_EXPORT HcclResult HcclSetConfig(HcclConfig config, HcclConfigValue configValue)
{
    if (hc_api_entry_log_enabled())
        hc_api_entry_log("HcclSetConfig(config=%d, value=%d)", (int)config, configValue.value);
    if (config != HCCL_DETERMINISTIC) {
        HC_ERROR("HcclSetConfig: unknown configuration %d", (int)config);
        return HCCL_E_PARA;
    }
    if (hc_comm_env_deterministic() >= 0) {
        HC_WARN("HcclSetConfig: HCCL_DETERMINISTIC is set in the environment, which wins; %d is not applied",
                configValue.value);
        return HCCL_SUCCESS;
    }
    if (configValue.value < 0 || configValue.value > 2) {
        HC_ERROR("HcclSetConfig: HCCL_DETERMINISTIC must be 0, 1 or 2 (strict), not %d", configValue.value);
        return HCCL_E_PARA;
    }
    atomic_store(&hc_global_deterministic, configValue.value);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclGetConfig(HcclConfig config, HcclConfigValue *configValue)
{
    if (configValue == NULL) {
        HC_ERROR("HcclGetConfig: configValue is NULL");
        return HCCL_E_PTR;
    }
    if (config != HCCL_DETERMINISTIC) {
        HC_ERROR("HcclGetConfig: unknown configuration %d", (int)config);
        return HCCL_E_PARA;
    }
    configValue->value = (int32_t)hc_comm_global_deterministic();
    return HCCL_SUCCESS;
}

/* Every HcclCommConfig field is accepted (docs/api.md says which a host acts on), so, as CANN, the
 * answer is the number of capabilities: all those below HCCL_COMM_CONFIG_RESERVED. */
HC_API_EXPORT uint32_t HcclGetCommConfigCapability(void)
{
    return (uint32_t)HCCL_COMM_CONFIG_RESERVED;
}

static HcclResult get_expansion_mode(const hc_comm_t *comm, uint32_t len, void *info)
{
    HcclConfigTypeOpExpansionMode mode = HCCL_OP_EXPANSION_MODE_HOST;

    (void)comm; /* whatever the config asked for, a host expands and runs every op itself */
    if (len != sizeof(mode)) {
        HC_ERROR("HcclConfigGetInfo: infoLen %u for the expansion mode must be %zu", len, sizeof(mode));
        return HCCL_E_PARA;
    }
    memcpy(info, &mode, sizeof(mode));
    return HCCL_SUCCESS;
}

static HcclResult get_algo(const hc_comm_t *comm, uint32_t len, void *info)
{
    if (len < HCCL_COMM_ALGO_MAX_LENGTH) {
        HC_ERROR("HcclConfigGetInfo: infoLen %u for the algorithm must be at least %u", len,
                 HCCL_COMM_ALGO_MAX_LENGTH);
        return HCCL_E_PARA;
    }
    memset(info, 0, len);
    snprintf(info, len, "%s", comm->settings.algo);
    return HCCL_SUCCESS;
}

HC_API_EXPORT HcclResult HcclConfigGetInfo(HcclComm comm, HcclConfigType cfgType, uint32_t infoLen, void *info)
{
    hc_comm_t *c;
    HcclResult res;

    HC_CHECK(hc_comm_acquire(comm, "HcclConfigGetInfo", &c));
    if (info == NULL) {
        HC_ERROR("HcclConfigGetInfo: info is NULL");
        res = HCCL_E_PTR;
    } else if (cfgType == HCCL_CONFIG_TYPE_OP_EXPANSION_MODE) {
        res = get_expansion_mode(c, infoLen, info);
    } else if (cfgType == HCCL_CONFIG_TYPE_HCCL_ALGO) {
        res = get_algo(c, infoLen, info);
    } else {
        HC_ERROR("HcclConfigGetInfo: cfgType %d is not a configuration type", (int)cfgType);
        res = HCCL_E_PARA;
    }
    hc_comm_release(c);
    return res;
}
