/*
 * A communicator's settings: HcclCommConfig field > environment > default (DESIGN.md 8).
 *
 * The caller's HcclCommConfig may come from any version of CANN's header (hostccl's own older
 * headers had the 300-byte version-5 layout). Its first bytes say how big it is and which version
 * wrote it, so, as CANN does, we copy min(size, sizeof(HcclCommConfig)) bytes into a local config
 * that starts out "not set" everywhere, and apply only the fields of versions up to the recorded
 * one. A config from an older header is never read past its end; one from a newer header has its
 * later fields ignored.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"

atomic_int hc_global_deterministic = -1;

/* The first bytes of every HcclCommConfig (what HcclCommConfigInit writes). */
typedef struct {
    size_t size;
    uint32_t magic;
    uint32_t version;
} config_header_t;

/* Nothing below version 1's last field (hcclDeterministic) is a config a header ever produced. */
#define CONFIG_MIN_BYTES (offsetof(HcclCommConfig, hcclDeterministic) + sizeof(uint32_t))

static int parse_deterministic(const char *text)
{
    static const struct {
        const char *name;
        int level;
    } words[] = {{"false", 0}, {"0", 0}, {"true", 1}, {"1", 1}, {"strict", 2}, {"2", 2}};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcasecmp(text, words[i].name) == 0)
            return words[i].level;
    return -1;
}

int hc_comm_env_deterministic(void)
{
    static atomic_int warned;
    const char *text = hc_config_str(HC_CFG_DETERMINISTIC);
    int level;

    if (text == NULL)
        return -1;
    level = parse_deterministic(text);
    if (level < 0 && atomic_exchange(&warned, 1) == 0)
        HC_WARN("ignoring HCCL_DETERMINISTIC=\"%s\": expected false, true or strict", text);
    return level;
}

int hc_comm_global_deterministic(void)
{
    int env = hc_comm_env_deterministic();
    int set = atomic_load(&hc_global_deterministic);

    if (env >= 0)
        return env;
    return set >= 0 ? set : 0;
}

/* A string field must end within its array: the rest of the config must not be read as text. */
static HcclResult check_string(const char *field, size_t cap, const char *what)
{
    if (memchr(field, '\0', cap) == NULL) {
        HC_ERROR("HcclCommConfig.%s is not NUL-terminated within its %zu bytes", what, cap);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Copy the caller's config into *local by its recorded size; *version_p gets its version. */
static HcclResult load_config(const HcclCommConfig *user, HcclCommConfig *local, uint32_t *version_p)
{
    config_header_t header;
    size_t bytes;

    memcpy(&header, user, sizeof(header));
    if (header.magic != HCCL_COMM_CONFIG_MAGIC_WORD) {
        HC_ERROR("HcclCommConfig was not initialised with HcclCommConfigInit (magic word 0x%08x, expected "
                 "0x%08x)", header.magic, HCCL_COMM_CONFIG_MAGIC_WORD);
        return HCCL_E_PARA;
    }
    if (header.size < CONFIG_MIN_BYTES) {
        HC_ERROR("HcclCommConfig says it is %zu bytes, smaller than any HcclCommConfig (%zu)", header.size,
                 (size_t)CONFIG_MIN_BYTES);
        return HCCL_E_PARA;
    }
    bytes = header.size < sizeof(*local) ? header.size : sizeof(*local);
    if (header.version > HCCL_COMM_CONFIG_VERSION || header.size > sizeof(*local))
        HC_INFO("HcclCommConfig version %u (%zu bytes) is newer than this library's (%u, %zu bytes): its "
                "later fields are ignored", header.version, header.size, HCCL_COMM_CONFIG_VERSION,
                sizeof(*local));
    HcclCommConfigInit(local);
    memcpy(local, user, bytes);
    *version_p = header.version;
    return HCCL_SUCCESS;
}

/* Version 1: staging buffer and determinism. */
static HcclResult apply_v1(const HcclCommConfig *c, hc_comm_settings_t *s)
{
    if (c->hcclBufferSize != HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET) {
        if (c->hcclBufferSize == 0) {
            HC_ERROR("HcclCommConfig.hcclBufferSize must be at least 1 (MB)");
            return HCCL_E_PARA;
        }
        s->buffer_bytes = (uint64_t)c->hcclBufferSize << 20;
    }
    if (c->hcclDeterministic != HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET) {
        if (c->hcclDeterministic > 2) {
            HC_ERROR("HcclCommConfig.hcclDeterministic must be 0 (disable), 1 (enable) or 2 (strict), not %u",
                     c->hcclDeterministic);
            return HCCL_E_PARA;
        }
        s->deterministic = (int)c->hcclDeterministic;
    }
    return HCCL_SUCCESS;
}

/* Versions 2-7: name, UDI, expansion mode, RDMA classes, world rank and job, graph zero copy. The
 * fields a host has no use for are accepted as CANN accepts them. */
static HcclResult apply_v2_to_v7(const HcclCommConfig *c, uint32_t version, hc_comm_settings_t *s, char *name,
                                 size_t name_len)
{
    if (version >= 2 && c->hcclCommName[0] != '\0') {
        HC_CHECK(check_string(c->hcclCommName, COMM_NAME_MAX_LENGTH, "hcclCommName"));
        snprintf(name, name_len, "%s", c->hcclCommName);
    }
    if (version >= 4)
        s->op_expansion_mode = c->hcclOpExpansionMode;
    if (version >= 6) {
        s->world_rank_id = c->hcclWorldRankID;
        s->job_id = c->hcclJobID;
    }
    if (version >= 7 && c->aclGraphZeroCopyEnable > 1) {
        HC_ERROR("HcclCommConfig.aclGraphZeroCopyEnable must be 0 or 1, not %u", c->aclGraphZeroCopyEnable);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Versions 8-11: execution timeout, algorithm, retry, buffer name, QoS, windows, queue depth. */
static HcclResult apply_v8_to_v11(const HcclCommConfig *c, uint32_t version, hc_comm_settings_t *s)
{
    if (version >= 8) {
        if (c->hcclExecTimeOut < 0 && c->hcclExecTimeOut != HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET)
            HC_WARN("ignoring HcclCommConfig.hcclExecTimeOut %d: seconds must be 0 (never) or more",
                    c->hcclExecTimeOut);
        else if (c->hcclExecTimeOut >= 0)
            s->exec_timeout_s = c->hcclExecTimeOut;
        HC_CHECK(check_string(c->hcclAlgo, HCCL_COMM_ALGO_MAX_LENGTH, "hcclAlgo"));
        HC_CHECK(check_string(c->hcclRetryEnable, HCCL_COMM_RETRY_ENABLE_MAX_LENGTH, "hcclRetryEnable"));
        HC_CHECK(check_string(c->hcclRetryParams, HCCL_COMM_RETRY_PARAMS_MAX_LENGTH, "hcclRetryParams"));
        if (c->hcclAlgo[0] != '\0')
            snprintf(s->algo, sizeof(s->algo), "%s", c->hcclAlgo);
    }
    if (version >= 9)
        HC_CHECK(check_string(c->hcclBufferName, BUFFER_NAME_MAX_LENGTH, "hcclBufferName"));
    if (version >= 10) {
        if (c->hcclSymWinMaxMemSizePerRank == 0) {
            HC_ERROR("HcclCommConfig.hcclSymWinMaxMemSizePerRank must be at least 1 (GB)");
            return HCCL_E_PARA;
        }
        s->sym_win_max_gb = c->hcclSymWinMaxMemSizePerRank;
    }
    return HCCL_SUCCESS;
}

static void env_defaults(hc_comm_settings_t *s)
{
    const char *algo = hc_config_str(HC_CFG_ALGO);

    memset(s, 0, sizeof(*s));
    s->buffer_bytes = (uint64_t)hc_config_int(HC_CFG_BUFFSIZE) << 20;
    s->deterministic = hc_comm_global_deterministic();
    s->exec_timeout_s = hc_config_int(HC_CFG_EXEC_TIMEOUT);
    s->peer_check_ms = hc_config_int(HC_CFG_PEER_CHECK_MS);
    s->still_waiting_s = hc_config_int(HC_CFG_STILL_WAITING_S);
    s->still_waiting_backoff = hc_config_int(HC_CFG_STILL_WAITING_BACKOFF);
    s->op_expansion_mode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    s->sym_win_max_gb = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
    if (algo != NULL)
        snprintf(s->algo, sizeof(s->algo), "%s", algo);
}

HcclResult hc_comm_settings_resolve(const HcclCommConfig *config, hc_comm_settings_t *settings_p, char *name,
                                    size_t name_len)
{
    hc_comm_settings_t s;
    HcclCommConfig local;
    uint32_t version = 0;
    HcclResult res = HCCL_SUCCESS;

    if (config != NULL)
        HC_CHECK(load_config(config, &local, &version));
    env_defaults(&s);
    if (config != NULL && version >= 1)
        res = apply_v1(&local, &s);
    if (res == HCCL_SUCCESS && config != NULL)
        res = apply_v2_to_v7(&local, version, &s, name, name_len);
    if (res == HCCL_SUCCESS && config != NULL)
        res = apply_v8_to_v11(&local, version, &s);
    if (res == HCCL_SUCCESS)
        *settings_p = s;
    return res;
}
