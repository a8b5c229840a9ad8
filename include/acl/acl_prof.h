/*
 * hostccl: AscendCL profiling (CANN's acl_prof.h, hicann/runtime), the calls hccl_test makes.
 *
 * On a host, profiling records a timeline of the tasks streams run (HCCL operations with their
 * bytes, root or peer, communicator and result; copies; host functions; event records and waits)
 * and writes it, at aclprofStop, as a Chrome trace (JSON for chrome://tracing or ui.perfetto.dev)
 * into the directory given to aclprofInit. docs/runtime.md describes the file.
 */
#ifndef INC_EXTERNAL_ACL_PROF_H_
#define INC_EXTERNAL_ACL_PROF_H_

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What to record (aclprofCreateConfig's dataTypeConfig). A host records HCCL operations for
 * ACL_PROF_HCCL_TRACE and every other stream task for ACL_PROF_TASK_TIME; the other bits are
 * accepted and record nothing more. */
#define ACL_PROF_ACL_API 0x0001ULL
#define ACL_PROF_TASK_TIME 0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU 0x0008ULL
#define ACL_PROF_L2CACHE 0x0010ULL
#define ACL_PROF_HCCL_TRACE 0x0020ULL
#define ACL_PROF_TRAINING_TRACE 0x0040ULL
#define ACL_PROF_MSPROFTX 0x0080ULL
#define ACL_PROF_RUNTIME_API 0x0100ULL
#define ACL_PROF_GE_API_L0 0x0200ULL
#define ACL_PROF_TASK_TIME_L0 0x0800ULL
#define ACL_PROF_TASK_MEMORY 0x1000ULL
#define ACL_PROF_GE_API_L1 0x01000000ULL
#define ACL_PROF_TASK_TIME_L2 0x2000ULL
#define ACL_PROF_OP_ATTR 0x4000ULL
#define ACL_PROF_TASK_TIME_L3 0x8000ULL
#define ACL_PROF_API_STATS 0x400000000ULL
#define ACL_PROF_AICORE_SHAPE 0x800000000ULL

#define ACL_PROF_MAX_OP_NAME_LEN 257
#define ACL_PROF_MAX_OP_TYPE_LEN 65

typedef enum {
    ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
    ACL_AICORE_PIPE_UTILIZATION = 1,
    ACL_AICORE_MEMORY_BANDWIDTH = 2,
    ACL_AICORE_L0B_AND_WIDTH = 3,
    ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
    ACL_AICORE_MEMORY_UB = 5,
    ACL_AICORE_L2_CACHE = 6,
    ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
    ACL_AICORE_MEMORY_ACCESS = 8,
    ACL_AICORE_NONE = 0xFF
} aclprofAicoreMetrics;

typedef enum {
    ACL_STEP_START = 0,
    ACL_STEP_END = 1
} aclprofStepTag;

typedef enum {
    ACL_PROF_ARGS_MIN = 0,
    ACL_PROF_STORAGE_LIMIT = 1,
    ACL_PROF_SYS_HARDWARE_MEM_FREQ = 3,
    ACL_PROF_LLC_MODE = 4,
    ACL_PROF_SYS_IO_FREQ = 5,
    ACL_PROF_SYS_INTERCONNECTION_FREQ = 6,
    ACL_PROF_DVPP_FREQ = 7,
    ACL_PROF_HOST_SYS = 8,
    ACL_PROF_HOST_SYS_USAGE = 9,
    ACL_PROF_HOST_SYS_USAGE_FREQ = 10,
    ACL_PROF_LOW_POWER_FREQ = 11,
    ACL_PROF_SYS_MEM_SERVICEFLOW = 12,
    ACL_PROF_SYS_CPU_FREQ = 13,
    ACL_PROF_OPTYPE = 14,
    ACL_PROF_NTS_METRICS = 15,
    ACL_PROF_PATH = 16,
    ACL_PROF_ARGS_MAX = 17
} aclprofConfigType;

typedef struct aclprofConfig aclprofConfig;
typedef struct aclprofAicoreEvents aclprofAicoreEvents;

/**
 * @brief Start a profiling session that writes into the directory profilerResultPath (created if
 *        missing). length is strlen(profilerResultPath). A second aclprofInit without aclprofFinalize:
 *        ACL_ERROR_REPEAT_INITIALIZE.
 */
extern aclError aclprofInit(const char *profilerResultPath, size_t length);

/** @brief End the session (stopping a running recording first, which writes its trace). */
extern aclError aclprofFinalize(void);

/**
 * @brief Start recording what profilerConfig asks for. Needs aclprofInit; a recording already
 *        running: ACL_ERROR_PROF_ALREADY_RUN.
 */
extern aclError aclprofStart(const aclprofConfig *profilerConfig);

/**
 * @brief A recording configuration: the devices whose streams to record (deviceIdList, deviceNums
 *        entries) and what to record (ACL_PROF_* bits). aicoreEvents must be NULL.
 * @return the configuration, or NULL for bad arguments (logged).
 */
extern aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                          aclprofAicoreMetrics aicoreMetrics,
                                          const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig);

/** @brief Free a configuration made by aclprofCreateConfig. */
extern aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig);

/**
 * @brief Stop the recording started with profilerConfig and write its Chrome trace. Nothing
 *        running: ACL_ERROR_PROF_NOT_RUN.
 */
extern aclError aclprofStop(const aclprofConfig *profilerConfig);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_PROF_H_ */
