/*
 * The configuration table (DESIGN.md 8): every tunable is one row of config.c with its name,
 * type, default and help. Precedence: HcclCommConfig field > environment variable > default;
 * the communicator applies its config fields on top of these values.
 *
 * Values are read from the environment at each call (they are read at communicator creation, not
 * on the fast path), so a program or a test may change a variable between communicators.
 */
#ifndef HC_CONFIG_H
#define HC_CONFIG_H

#include <stdint.h>

typedef enum {
    HC_CFG_CONNECT_TIMEOUT,  /* HCCL_CONNECT_TIMEOUT, s */
    HC_CFG_EXEC_TIMEOUT,     /* HCCL_EXEC_TIMEOUT, s, 0 = never */
    HC_CFG_IF_IP,            /* HCCL_IF_IP */
    HC_CFG_SOCKET_IFNAME,    /* HCCL_SOCKET_IFNAME */
    HC_CFG_IF_BASE_PORT,     /* HCCL_IF_BASE_PORT, 0 = ephemeral */
    HC_CFG_BUFFSIZE,         /* HCCL_BUFFSIZE, MB */
    HC_CFG_ENTRY_LOG_ENABLE, /* HCCL_ENTRY_LOG_ENABLE */
    HC_CFG_LOG_LEVEL,        /* ASCEND_GLOBAL_LOG_LEVEL */
    HC_CFG_DETERMINISTIC,    /* HCCL_DETERMINISTIC: false, true, strict */
    HC_CFG_ALGO,             /* HCCL_ALGO */
    HC_CFG_DEVICE_COUNT,     /* HOSTCCL_DEVICE_COUNT */
    HC_CFG_ARENA_BYTES,      /* HOSTCCL_ARENA_BYTES */
    HC_CFG_TRANSPORT,        /* HOSTCCL_TRANSPORT */
    HC_CFG_PEER_CHECK_MS,    /* HOSTCCL_PEER_CHECK_MS */
    HC_CFG_STORE,            /* HOSTCCL_STORE */
    HC_CFG_STORE_TOKEN,      /* HOSTCCL_STORE_TOKEN */
    HC_CFG_SIMD,             /* HOSTCCL_SIMD */
    HC_CFG_TRACE_OPS,        /* HOSTCCL_TRACE_OPS */
    HC_CFG_TRACE_DUMP,       /* HOSTCCL_TRACE_DUMP */
    HC_CFG_CMA,              /* HOSTCCL_CMA */
    HC_CFG_ZERO_COPY_MIN,    /* HOSTCCL_ZERO_COPY_MIN */
    HC_CFG_P2P_SINGLE_COPY_MIN, /* HOSTCCL_P2P_SINGLE_COPY_MIN */
    HC_CFG_P2P_CMA_MIN,      /* HOSTCCL_P2P_CMA_MIN */
    HC_CFG_BCAST_IN_PLACE_MIN,     /* HOSTCCL_BCAST_IN_PLACE_MIN, -1 = by cores */
    HC_CFG_ALLGATHER_IN_PLACE_MIN, /* HOSTCCL_ALLGATHER_IN_PLACE_MIN, -1 = by cores */
    HC_CFG_SPREAD_RANKS,     /* HOSTCCL_SPREAD_RANKS */
    HC_CFG_NSOCKS,           /* HOSTCCL_NSOCKS */
    HC_CFG_NET_CHUNK_BYTES,  /* HOSTCCL_NET_CHUNK_BYTES */
    HC_CFG_NET_TIMEOUT_S,    /* HOSTCCL_NET_TIMEOUT_S */
    HC_CFG_NET_EARLY_MAX,    /* HOSTCCL_NET_EARLY_MAX_BYTES */
    HC_CFG_HIERARCHY,        /* HOSTCCL_HIERARCHY */
    HC_CFG_DEBUG,            /* HOSTCCL_DEBUG */
    HC_CFG_RANK_TABLE_SECRET, /* HOSTCCL_RANK_TABLE_SECRET */
    HC_CFG_VISIBLE_DEVICES,  /* ASCEND_RT_VISIBLE_DEVICES */
    HC_CFG_SOC_NAME,         /* HOSTCCL_SOC_NAME */
    HC_CFG_STILL_WAITING_S,  /* HOSTCCL_STILL_WAITING_S, 0 = never */
    HC_CFG_STILL_WAITING_BACKOFF, /* HOSTCCL_STILL_WAITING_BACKOFF */
    HC_CFG_CMA_MIN,          /* HOSTCCL_CMA_MIN */
    HC_CFG_CMA_HUGE_MIN,     /* HOSTCCL_CMA_HUGE_MIN */
    HC_CFG_CMA_CHOOSE_MIN,   /* HOSTCCL_CMA_CHOOSE_MIN */
    HC_CFG_PROGRESS,         /* HOSTCCL_PROGRESS */
    HC_CFG_BACKSTOP_MS,      /* HOSTCCL_BACKSTOP_MS */
    HC_CFG_STREAM_STORES,    /* HOSTCCL_STREAM_STORES, -1 = measured */
    HC_CFG_COUNT
} hc_config_id_t;

typedef enum {
    HC_CFG_TYPE_INT,  /* decimal integer within [min, max] */
    HC_CFG_TYPE_BOOL, /* 1/0, true/false, yes/no, on/off */
    HC_CFG_TYPE_STR
} hc_config_type_t;

typedef struct {
    const char *name;      /* environment variable */
    hc_config_type_t type;
    const char *default_value;
    int64_t min, max;      /* for HC_CFG_TYPE_INT */
    const char *help;
} hc_config_row_t;

/* The row of id (for docs/env.md and tools). */
const hc_config_row_t *hc_config_row(hc_config_id_t id);

/* Integer or bool value: the environment if valid, else the default (an invalid value is logged
 * once as a warning naming the variable). */
int64_t hc_config_int(hc_config_id_t id);

/* String value: the environment if set and non-empty, else the default; NULL when both empty. */
const char *hc_config_str(hc_config_id_t id);

#endif /* HC_CONFIG_H */
