/*
 * hostccl: HCCL data types, result codes and configuration structures.
 *
 * Names, numeric values and struct layouts are those of CANN's hccl_types.h (hicann/hcomm) so that
 * programs written for HCCL compile unchanged and pass the same bytes. CANN's header is C++-only (it
 * uses `const uint32_t` array bounds); this one spells the same constants as macros so that it
 * compiles as C11 and as C++.
 */
#ifndef HCCL_TYPES_H_
#define HCCL_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every HCCL call (CANN numbering). HcclGetErrorString gives CANN's text for each. */
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
    HCCL_E_OPRETRY_FAIL = 23,      /**< retry constraint */
    HCCL_E_OOM = 24,               /**< out of memory */
    HCCL_E_IN_STATUS = 1041,       /**< the error information is in the status */
    HCCL_E_RESERVED                /**< reserved (1042) */
} HcclResult;

/** Opaque handle to a communicator. */
typedef void *HcclComm;

/** Opaque handle to a connection (CANN's channel API; not used by hostccl). */
typedef void *HcclConn;

/** Opaque handle to a symmetric memory window (HcclCommSymWinRegister). */
typedef void *HcclCommSymWindow;

/** Reduction operation. */
typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

/**
 * Element data type. hostccl supports values 0..11; INT128 (12), HIF8 (14) and the FP8 types
 * (15..17) are CANN's and are refused with HCCL_E_PARA. 13 is unused, as in CANN.
 */
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
    HCCL_DATA_TYPE_HIF8 = 14,
    HCCL_DATA_TYPE_FP8E4M3 = 15,
    HCCL_DATA_TYPE_FP8E5M2 = 16,
    HCCL_DATA_TYPE_FP8E8M0 = 17,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

/** Process-wide configuration keys for HcclSetConfig / HcclGetConfig. */
typedef enum {
    HCCL_DETERMINISTIC = 0, /**< 0: non-deterministic, 1: deterministic, 2: strict (order-preserving) */
    HCCL_CONFIG_RESERVED
} HcclConfig;

union HcclConfigValue {
    int32_t value;
};
#ifndef __cplusplus
typedef union HcclConfigValue HcclConfigValue;
#endif

#define HCCL_ROOT_INFO_BYTES 4108u              /**< size of HcclRootInfo */
#define COMM_NAME_MAX_LENGTH 128u               /**< communicator name capacity, including the NUL */
#define BUFFER_NAME_MAX_LENGTH 128u             /**< hcclBufferName capacity */
#define UDI_MAX_LENGTH 128u                     /**< UDI capacity */
#define HCCL_COMM_ALGO_MAX_LENGTH 1600u         /**< hcclAlgo capacity */
#define HCCL_COMM_RETRY_ENABLE_MAX_LENGTH 50u   /**< hcclRetryEnable capacity */
#define HCCL_COMM_RETRY_PARAMS_MAX_LENGTH 128u  /**< hcclRetryParams capacity */

/** Opaque root info made by HcclGetRootInfo and passed unchanged to every rank. */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

#define HCCL_COMM_CONFIG_INFO_BYTES 24u
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0u
/** The layout below; a library reads any version up to its own and ignores later fields. */
#define HCCL_COMM_CONFIG_VERSION 11u
#define HCCL_COMM_DEFAULT_BUFFSIZE 200u
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DEFAULT_DETERMINISTIC 0u
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DEFAULT_OP_EXPANSION_MODE 0u
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET ((int32_t)-1)
#define HCCL_COMM_QOS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET 0xffffffffu
#define HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE 16ull

/**
 * Per-communicator configuration (version 11, 2248 bytes); initialise it with HcclCommConfigInit.
 * The first 24 bytes hold the size, magic word and version that HcclCommConfigInit writes: a
 * library reads min(size, its own size) bytes and the fields of versions up to the one recorded,
 * so a config built against an older or newer header is read correctly.
 */
typedef struct HcclCommConfigDef {
    char reserved[HCCL_COMM_CONFIG_INFO_BYTES];       /**< size, magic word, version */
    uint32_t hcclBufferSize;                          /**< v1: MB of staging buffer (HCCL_BUFFSIZE) */
    uint32_t hcclDeterministic;                       /**< v1: 0, 1 deterministic, 2 strict */
    char hcclCommName[COMM_NAME_MAX_LENGTH];          /**< v2: communicator name; empty: generated */
    char hcclUdi[UDI_MAX_LENGTH];                     /**< v3: user-defined information */
    uint32_t hcclOpExpansionMode;                     /**< v4: where ops are expanded (a host expands all) */
    uint32_t hcclRdmaTrafficClass;                    /**< v5: RDMA traffic class (no RDMA on hosts) */
    uint32_t hcclRdmaServiceLevel;                    /**< v5: RDMA service level (no RDMA on hosts) */
    uint32_t hcclWorldRankID;                         /**< v6: this rank in the job's world */
    uint64_t hcclJobID;                               /**< v6: job identifier */
    uint8_t aclGraphZeroCopyEnable;                   /**< v7: 0 or 1 */
    int32_t hcclExecTimeOut;                          /**< v8: seconds; overrides HCCL_EXEC_TIMEOUT */
    char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];         /**< v8: HCCL_ALGO syntax */
    char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH]; /**< v8: HCCL_OP_RETRY_ENABLE syntax */
    char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH]; /**< v8: HCCL_OP_RETRY_PARAMS syntax */
    char hcclBufferName[BUFFER_NAME_MAX_LENGTH];      /**< v9: name of a shared staging buffer */
    uint32_t hcclQos;                                 /**< v10: SDMA QoS (no SDMA on hosts) */
    uint64_t hcclSymWinMaxMemSizePerRank;             /**< v10: GB of symmetric-window address space per rank */
    uint32_t hcclChannelSqDepth;                      /**< v11: submission queue depth (no queues on hosts) */
} HcclCommConfig;

/** The configuration fields a library honours: HcclGetCommConfigCapability returns the count. */
typedef enum {
    HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
    HCCL_COMM_CONFIG_DETERMINISTIC = 1,
    HCCL_COMM_CONFIG_COMM_NAME = 2,
    HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
    HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
    HCCL_COMM_CONFIG_WORLD_RANKID = 5,
    HCCL_COMM_CONFIG_JOBID = 6,
    HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
    HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
    HCCL_COMM_CONFIG_ALGO = 9,
    HCCL_COMM_CONFIG_RETRY = 10,
    HCCL_COMM_CONFIG_BUFFER_NAME = 11,
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

/** Operation kinds, as CANN numbers them (profiling and algorithm configuration). */
typedef enum {
    HCCL_CMD_INVALID = 0,
    HCCL_CMD_BROADCAST = 1,
    HCCL_CMD_ALLREDUCE,
    HCCL_CMD_REDUCE,
    HCCL_CMD_SEND,
    HCCL_CMD_RECEIVE,
    HCCL_CMD_ALLGATHER,
    HCCL_CMD_REDUCE_SCATTER,
    HCCL_CMD_ALLTOALLV,
    HCCL_CMD_ALLTOALLVC,
    HCCL_CMD_ALLTOALL,
    HCCL_CMD_GATHER,
    HCCL_CMD_SCATTER,
    HCCL_CMD_BATCH_SEND_RECV,
    HCCL_CMD_BATCH_PUT,
    HCCL_CMD_BATCH_GET,
    HCCL_CMD_ALLGATHER_V,
    HCCL_CMD_REDUCE_SCATTER_V,
    HCCL_CMD_BATCH_WRITE,
    HCCL_CMD_HALF_ALLTOALLV = 20,
    HCCL_CMD_ALL,
    HCCL_CMD_FINALIZE = 100,
    HCCL_CMD_INTER_GROUP_SYNC,
    HCCL_CMD_INIT,
    HCCL_CMD_BARRIER,
    HCCL_CMD_MAX
} HcclCMDType;

/** What HcclCommGetStatus reports. */
typedef enum {
    HCCL_COMM_STATUS_READY = 0,
    HCCL_COMM_STATUS_SUSPENDING = 1,
    HCCL_COMM_STATUS_INVALID = 254,
    HCCL_COMM_STATUS_RESERVED = 255
} HcclCommStatus;

/** When a state callback (HcclCommRegCommStateCallback) is called. */
typedef enum {
    HCCL_COMM_STATE_PHASE_INVALID = -1,
    HCCL_COMM_STATE_PHASE_DESTROY_PRE = 0,  /**< in HcclCommDestroy, before the communicator goes */
    HCCL_COMM_STATE_PHASE_DESTROY_POST = 1, /**< in HcclCommDestroy, after it is gone */
    HCCL_COMM_STATE_PHASE_RESUME_PRE = 2,   /**< in HcclCommResume, before it resumes */
    HCCL_COMM_STATE_PHASE_RESUME_POST = 3   /**< in HcclCommResume, after it resumed */
} HcclCommStatePhase;

#ifdef __cplusplus
}
#endif
#endif /* HCCL_TYPES_H_ */
