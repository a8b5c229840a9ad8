/*
 * hostccl: the AscendCL base types and error codes (CANN numbering: acl_base_rt.h and
 * error_codes/rt_error_codes.h) used by the host runtime.
 *
 * CANN declares the codes as `static const int`; hostccl declares them as enumerators, which have
 * the same type and value and can also be used in switch statements.
 */
#ifndef INC_EXTERNAL_ACL_ACL_BASE_H_
#define INC_EXTERNAL_ACL_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;
typedef int aclError;
typedef uint16_t aclFloat16;

enum {
    ACL_SUCCESS = 0,
    ACL_ERROR_NONE = 0,

    ACL_ERROR_INVALID_PARAM = 100000,
    ACL_ERROR_UNINITIALIZE = 100001,
    ACL_ERROR_REPEAT_INITIALIZE = 100002,
    ACL_ERROR_INVALID_FILE = 100003,
    ACL_ERROR_WRITE_FILE = 100004,
    ACL_ERROR_INVALID_FILE_SIZE = 100005,
    ACL_ERROR_PARSE_FILE = 100006,
    ACL_ERROR_FILE_MISSING_ATTR = 100007,
    ACL_ERROR_FILE_ATTR_INVALID = 100008,
    ACL_ERROR_INVALID_DUMP_CONFIG = 100009,
    ACL_ERROR_INVALID_PROFILING_CONFIG = 100010,
    ACL_ERROR_REPEAT_SUBSCRIBE = 100033,
    ACL_ERROR_STREAM_NOT_SUBSCRIBE = 100034,
    ACL_ERROR_THREAD_NOT_SUBSCRIBE = 100035,
    ACL_ERROR_WAIT_CALLBACK_TIMEOUT = 100036,
    ACL_ERROR_REPEAT_FINALIZE = 100037,
    ACL_ERROR_PROF_ALREADY_RUN = 100042,
    ACL_ERROR_PROF_NOT_RUN = 100043,
    ACL_ERROR_PROF_REPEAT_SUBSCRIBE = 148046,
    ACL_ERROR_PROF_API_CONFLICT = 148047,

    ACL_ERROR_BAD_ALLOC = 200000,
    ACL_ERROR_API_NOT_SUPPORT = 200001,
    ACL_ERROR_INVALID_DEVICE = 200002,
    ACL_ERROR_MEMORY_ADDRESS_UNALIGNED = 200003,
    ACL_ERROR_RESOURCE_NOT_MATCH = 200004,
    ACL_ERROR_INVALID_RESOURCE_HANDLE = 200005,
    ACL_ERROR_FEATURE_UNSUPPORTED = 200006,
    ACL_ERROR_PROF_MODULES_UNSUPPORTED = 200007,

    ACL_ERROR_STORAGE_OVER_LIMIT = 300000,

    ACL_ERROR_INTERNAL_ERROR = 500000,
    ACL_ERROR_FAILURE = 500001,
    ACL_ERROR_GE_FAILURE = 500002,
    ACL_ERROR_RT_FAILURE = 500003,
    ACL_ERROR_DRV_FAILURE = 500004,
    ACL_ERROR_PROFILING_FAILURE = 500005,

    /* CANN's rt_error_codes.h, the ones the host runtime returns. */
    ACL_ERROR_RT_PARAM_INVALID = 107000,
    ACL_ERROR_RT_INVALID_DEVICEID = 107001,
    ACL_ERROR_RT_CONTEXT_NULL = 107002,
    ACL_ERROR_RT_STREAM_CONTEXT = 107003,
    ACL_ERROR_RT_ADDR_UNALIGNED = 107008,
    ACL_ERROR_RT_FILE_OPEN = 107009,
    ACL_ERROR_RT_FILE_WRITE = 107010,
    ACL_ERROR_RT_INVALID_HANDLE = 107017,
    ACL_ERROR_RT_WAIT_TIMEOUT = 107019,
    ACL_ERROR_RT_TASK_TIMEOUT = 107020,

    ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000,
    ACL_ERROR_RT_MEMORY_ALLOCATION = 207001,
    ACL_ERROR_RT_MEMORY_FREE = 207002,
    ACL_ERROR_RT_NO_DEVICE = 207004,
    ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207005,
    ACL_ERROR_RT_NO_PERMISSION = 207006,
    ACL_ERROR_RT_OVER_LIMIT = 207012,

    ACL_ERROR_RT_INTERNAL_ERROR = 507000,
    ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004,
    ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006,
    ACL_ERROR_RT_CONTEXT_RELEASE_ERROR = 507007,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046,
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507047,
    /** hostccl extension: a communication task on the stream failed; HcclGetCommAsyncError tells why. */
    ACL_ERROR_RT_COMM_OP_FAILED = 507100
};

typedef enum {
    ACL_DEBUG = 0,
    ACL_INFO = 1,
    ACL_WARNING = 2,
    ACL_ERROR = 3
} aclLogLevel;

/**
 * @brief The SoC name programs compare to pick code paths: HOSTCCL_SOC_NAME, default "HostCPU"
 *        (docs/runtime.md). Never NULL.
 */
extern const char *aclrtGetSocName(void);

/** @brief Convert an IEEE half to float. */
extern float aclFloat16ToFloat(aclFloat16 value);

/** @brief Convert a float to IEEE half (round to nearest even). */
extern aclFloat16 aclFloatToFloat16(float value);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_ACL_BASE_H_ */
