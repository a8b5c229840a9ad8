/*
 * hostccl: HCCL data types, result codes and configuration structures.
 *
 * Names and numeric values are those of CANN's hccl_types.h so that programs written for HCCL
 * compile unchanged. CANN's header is C++-only (it uses `const uint32_t` array bounds); this one
 * spells the same constants as macros so it compiles as C11 and as C++.
 */
#ifndef HCCL_TYPES_H_
#define HCCL_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every HCCL call (CANN numbering). */
typedef enum {
    HCCL_SUCCESS = 0,              /**< success */
    HCCL_E_PARA = 1,               /**< parameter error */
    HCCL_E_PTR = 2,                /**< empty pointer */
    HCCL_E_MEMORY = 3,             /**< memory error */
    HCCL_E_INTERNAL = 4,           /**< internal error */
    HCCL_E_NOT_SUPPORT = 5,        /**< not supported feature */
    HCCL_E_NOT_FOUND = 6,          /**< specific resource not found */
    HCCL_E_UNAVAIL = 7,            /**< resource unavailable */
    HCCL_E_SYSCALL = 8,            /**< system call error */
    HCCL_E_TIMEOUT = 9,            /**< timeout */
    HCCL_E_OPEN_FILE_FAILURE = 10, /**< open file failure */
    HCCL_E_TCP_CONNECT = 11,       /**< tcp connect failure */
    HCCL_E_ROCE_CONNECT = 12,      /**< roce connect failure */
    HCCL_E_TCP_TRANSFER = 13,      /**< tcp transfer failure */
    HCCL_E_ROCE_TRANSFER = 14,     /**< roce transfer failure */
    HCCL_E_RUNTIME = 15,           /**< runtime api failure */
    HCCL_E_DRV = 16,               /**< driver api failure */
    HCCL_E_PROFILING = 17,         /**< profiling api failure */
    HCCL_E_CCE = 18,               /**< cce api failure */
    HCCL_E_NETWORK = 19,           /**< network api failure */
    HCCL_E_AGAIN = 20,             /**< try again */
    HCCL_E_REMOTE = 21,            /**< remote peer failed */
    HCCL_E_SUSPENDING = 22,        /**< communicator suspending */
    HCCL_E_RESERVED                /**< reserved */
} HcclResult;

/** Opaque handle to a communicator. */
typedef void *HcclComm;

/** Reduction operation. */
typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

/** Element data type. hostccl supports values 0..11; 12..15 are CANN-only and rejected. */
typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3,
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,
    HCCL_DATA_TYPE_INT128 = 12,
    HCCL_DATA_TYPE_HIF8 = 13,
    HCCL_DATA_TYPE_FP8E4M3 = 14,
    HCCL_DATA_TYPE_FP8E5M2 = 15,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

/** Process-wide configuration keys for HcclSetConfig / HcclGetConfig. */
typedef enum {
    HCCL_DETERMINISTIC = 0, /**< 0: non-deterministic, 1: deterministic */
    HCCL_CONFIG_RESERVED
} HcclConfig;

union HcclConfigValue {
    int32_t value;
};
#ifndef __cplusplus
typedef union HcclConfigValue HcclConfigValue;
#endif

#define HCCL_ROOT_INFO_BYTES 4108u  /**< size of HcclRootInfo */
#define COMM_NAME_MAX_LENGTH 128u   /**< communicator name capacity, including the NUL */
#define UDI_MAX_LENGTH 128u         /**< UDI capacity */

/** Opaque root info made by HcclGetRootInfo and passed unchanged to every rank. */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

#define HCCL_COMM_CONFIG_INFO_BYTES 24u
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0u
#define HCCL_COMM_CONFIG_VERSION 5u
#define HCCL_COMM_DEFAULT_BUFFSIZE 200u
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DEFAULT_DETERMINISTIC 0u
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DEFAULT_OP_EXPANSION_MODE 0u
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffu

/** Per-communicator configuration; initialise with HcclCommConfigInit. */
typedef struct HcclCommConfigDef {
    char reserved[HCCL_COMM_CONFIG_INFO_BYTES]; /**< size, magic word, version (set by init) */
    uint32_t hcclBufferSize;                     /**< MB of staging buffer (HCCL_BUFFSIZE) */
    uint32_t hcclDeterministic;                  /**< 1: bit-identical reductions */
    char hcclCommName[COMM_NAME_MAX_LENGTH];     /**< communicator name; empty: generated */
    char hcclUdi[UDI_MAX_LENGTH];                /**< user-defined information (ignored) */
    uint32_t hcclOpExpansionMode;                /**< ignored on hosts */
    uint32_t hcclRdmaTrafficClass;               /**< ignored on hosts */
    uint32_t hcclRdmaServiceLevel;               /**< ignored on hosts */
} HcclCommConfig;

typedef enum {
    HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
    HCCL_COMM_CONFIG_DETERMINISTIC = 1,
    HCCL_COMM_CONFIG_COMM_NAME = 2,
    HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
    HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
    HCCL_COMM_CONFIG_RESERVED
} HcclCommConfigCapability;

typedef enum {
    HCCL_SEND = 0,
    HCCL_RECV = 1,
    HCCL_SEND_RECV_RESERVED
} HcclSendRecvType;

/** One entry of HcclBatchSendRecv. */
typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType;
    void *buf;
    uint64_t count;
    HcclDataType dataType;
    uint32_t remoteRank;
} HcclSendRecvItem;

#ifdef __cplusplus
}
#endif
#endif /* HCCL_TYPES_H_ */
