/*
 * hostccl: the AscendCL runtime on a host (CANN's acl_rt.h, hicann/runtime), the subset HCCL
 * programs, CANN's samples and hccl_test use. Names, signatures and values are CANN's.
 *
 * Devices are virtual ids 0..N-1 (docs/runtime.md: HOSTCCL_DEVICE_COUNT, ASCEND_RT_VISIBLE_DEVICES).
 * "Device" memory from aclrtMalloc is host memory in a per-process shared arena that peers on the
 * same host can map. Streams are in-order queues run by a worker thread per stream, or by the thread
 * that synchronises the stream. docs/runtime.md says what every call does on a host.
 */
#ifndef INC_EXTERNAL_ACL_ACL_RT_H_
#define INC_EXTERNAL_ACL_ACL_RT_H_

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 17
#define ACL_PATCH_VERSION 0

/* Event flags (aclrtCreateEventWithFlag, aclrtCreateEventExWithFlag). */
#define ACL_EVENT_SYNC 0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE 0x00000008U
#define ACL_EVENT_DEVICE_USE_ONLY 0x00000010U
#define ACL_EVENT_EXTERNAL 0x00000020U
#define ACL_EVENT_IPC 0x00000040U

/* Stream flags (aclrtCreateStreamWithConfig). */
#define ACL_STREAM_FAST_LAUNCH 0x00000001U
#define ACL_STREAM_FAST_SYNC 0x00000002U
#define ACL_STREAM_PERSISTENT 0x00000004U
#define ACL_STREAM_HUGE 0x00000008U
#define ACL_STREAM_CPU_SCHEDULE 0x00000010U
#define ACL_STREAM_DEVICE_USE_ONLY 0x00000020U

/* Stream failure modes (aclrtSetStreamFailureMode). */
#define ACL_CONTINUE_ON_FAILURE 0x00000000U
#define ACL_STOP_ON_FAILURE 0x00000001U

typedef enum aclrtRunMode {
    ACL_DEVICE,
    ACL_HOST
} aclrtRunMode;

typedef enum aclrtEventStatus {
    ACL_EVENT_STATUS_COMPLETE = 0,
    ACL_EVENT_STATUS_NOT_READY = 1,
    ACL_EVENT_STATUS_RESERVED = 2
} aclrtEventStatus;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

typedef enum aclrtCallbackBlockType {
    ACL_CALLBACK_NO_BLOCK = 0,
    ACL_CALLBACK_BLOCK = 1
} aclrtCallbackBlockType;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
    ACL_MEMCPY_DEFAULT = 4,
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5,
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
    ACL_MEM_MALLOC_HUGE1G_ONLY = 6,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000
} aclrtMemMallocPolicy;

/** Memory kinds aclrtGetMemInfo reports on (every kind is host memory here). */
typedef enum aclrtMemAttr {
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    ACL_DDR_MEM_HUGE,
    ACL_DDR_MEM_NORMAL,
    ACL_HBM_MEM_HUGE,
    ACL_HBM_MEM_NORMAL,
    ACL_DDR_MEM_P2P_HUGE,
    ACL_DDR_MEM_P2P_NORMAL,
    ACL_HBM_MEM_P2P_HUGE,
    ACL_HBM_MEM_P2P_NORMAL,
    ACL_HBM_MEM_HUGE1G,
    ACL_HBM_MEM_P2P_HUGE1G,
    ACL_MEM_NORMAL,
    ACL_MEM_HUGE,
    ACL_MEM_HUGE1G,
    ACL_MEM_P2P_NORMAL,
    ACL_MEM_P2P_HUGE,
    ACL_MEM_P2P_HUGE1G
} aclrtMemAttr;

typedef enum aclrtFloatOverflowMode {
    ACL_RT_OVERFLOW_MODE_SATURATION = 0,
    ACL_RT_OVERFLOW_MODE_INFNAN,
    ACL_RT_OVERFLOW_MODE_UNDEF
} aclrtFloatOverflowMode;

typedef enum aclrtMemLocationType {
    ACL_MEM_LOCATION_TYPE_HOST = 0,
    ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_MEM_LOCATION_TYPE_UNREGISTERED,
    ACL_MEM_LOCATION_TYPE_MANAGED,
    ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
    uint32_t id;
    aclrtMemLocationType type;
} aclrtMemLocation;

typedef enum aclrtMemAllocationType {
    ACL_MEM_ALLOCATION_TYPE_PINNED = 0
} aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
    ACL_MEM_HANDLE_TYPE_NONE = 0,
    ACL_MEM_HANDLE_TYPE_POSIX = 2
} aclrtMemHandleType;

/** What aclrtMallocPhysical allocates. */
typedef struct aclrtPhysicalMemProp {
    aclrtMemHandleType handleType;
    aclrtMemAllocationType allocationType;
    aclrtMemAttr memAttr;
    aclrtMemLocation location;
    uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
    ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF
} aclrtMemGranularityOptions;

/** Handle of a physical allocation (aclrtMallocPhysical). */
typedef void *aclrtDrvMemHandle;

/** Host function run in stream order by aclrtLaunchCallback. */
typedef void (*aclrtCallback)(void *userData);

/** Host function run in stream order by aclrtLaunchHostFunc. */
typedef void (*aclrtHostFunc)(void *args);

typedef enum aclrtLastErrLevel {
    ACL_RT_THREAD_LEVEL = 0
} aclrtLastErrLevel;

/** Device attributes (aclrtGetDeviceInfo); docs/runtime.md says what a host reports for each. */
typedef enum {
    ACL_DEV_ATTR_AICPU_CORE_NUM = 1,
    ACL_DEV_ATTR_AICORE_CORE_NUM = 101,
    ACL_DEV_ATTR_CUBE_CORE_NUM = 102,
    ACL_DEV_ATTR_VECTOR_CORE_NUM = 201,
    ACL_DEV_ATTR_WARP_SIZE = 202,
    ACL_DEV_ATTR_MAX_THREAD_PER_VECTOR_CORE = 203,
    ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE = 204,
    ACL_DEV_ATTR_MAX_GRID_DIM_X = 205,
    ACL_DEV_ATTR_MAX_GRID_DIM_Y = 206,
    ACL_DEV_ATTR_MAX_GRID_DIM_Z = 207,
    ACL_DEV_ATTR_MAX_BLOCK_PER_GRID = 208,
    ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK = 209,
    ACL_DEV_ATTR_MAX_BLOCK_DIM_X = 210,
    ACL_DEV_ATTR_MAX_BLOCK_DIM_Y = 211,
    ACL_DEV_ATTR_MAX_BLOCK_DIM_Z = 212,
    ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE = 301,
    ACL_DEV_ATTR_L2_CACHE_SIZE = 302,
    ACL_DEV_ATTR_SMP_ID = 401U,
    ACL_DEV_ATTR_PHY_CHIP_ID = 402U,
    ACL_DEV_ATTR_SUPER_POD_DEVICE_ID = 403U,
    ACL_DEV_ATTR_SUPER_POD_SERVER_ID = 404U,
    ACL_DEV_ATTR_SUPER_POD_ID = 405U,
    ACL_DEV_ATTR_CUST_OP_PRIVILEGE = 406U,
    ACL_DEV_ATTR_MAINBOARD_ID = 407U,
    ACL_DEV_ATTR_HD_CONNECT_TYPE = 408U,
    ACL_DEV_ATTR_DEVICE_FORM_FACTOR = 409U,
    ACL_DEV_ATTR_IS_VIRTUAL = 501U,
    ACL_DEV_ATTR_NPU_ARCH = 601U
} aclrtDevAttr;

/* ---- initialisation ------------------------------------------------------------------------- */

/**
 * @brief Initialise the runtime (reference counted). configPath may be NULL or ""; otherwise the
 *        file must exist. A second call without a finalise counts a reference and returns
 *        ACL_ERROR_REPEAT_INITIALIZE, as in CANN.
 */
extern aclError aclInit(const char *configPath);

/**
 * @brief Finalise the runtime: synchronises and destroys every stream. Called again without an
 *        aclInit in between: ACL_ERROR_REPEAT_FINALIZE. Called before any aclInit: it finalises (as
 *        CANN does) and returns ACL_SUCCESS.
 */
extern aclError aclFinalize(void);

/**
 * @brief Drop one aclInit reference; the last one finalises. *refCount (may be NULL) receives the
 *        references left. No reference left: ACL_ERROR_REPEAT_FINALIZE.
 */
extern aclError aclFinalizeReference(uint64_t *refCount);

/** @brief Runtime version: ACL_MAJOR_VERSION.ACL_MINOR_VERSION.ACL_PATCH_VERSION. */
extern aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion);

/** @brief The last error message logged on this thread ("" when none). */
extern const char *aclGetRecentErrMsg(void);

/** @brief The last error an acl call of this thread returned, cleared by the call. */
extern aclError aclrtGetLastError(aclrtLastErrLevel level);

/** @brief The last error an acl call of this thread returned, left in place. */
extern aclError aclrtPeekAtLastError(aclrtLastErrLevel level);

/** @brief Where the program runs: ACL_HOST. */
extern aclError aclrtGetRunMode(aclrtRunMode *runMode);

/* ---- devices -------------------------------------------------------------------------------- */

/** @brief Make deviceId the calling thread's current device (and its default context current). */
extern aclError aclrtSetDevice(int32_t deviceId);

/** @brief The calling thread's current device (ACL_ERROR_RT_CONTEXT_NULL when none is set). */
extern aclError aclrtGetDevice(int32_t *deviceId);

/** @brief Synchronise and destroy deviceId's default stream in this process. */
extern aclError aclrtResetDevice(int32_t deviceId);

/**
 * @brief Number of virtual devices: HOSTCCL_DEVICE_COUNT (default 8), narrowed by
 *        ASCEND_RT_VISIBLE_DEVICES when that is set.
 */
extern aclError aclrtGetDeviceCount(uint32_t *count);

/** @brief Wait for every stream of the current device. */
extern aclError aclrtSynchronizeDevice(void);

/** @brief aclrtSynchronizeDevice bounded by timeout ms (-1: no bound): ACL_ERROR_RT_STREAM_SYNC_TIMEOUT. */
extern aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout);

/** @brief One attribute of a virtual device (docs/runtime.md lists the values). */
extern aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value);

/** @brief Whether deviceId can read peerDeviceId's memory: always 1 (one host's memory). */
extern aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t peerDeviceId);

/** @brief Record that the current device accesses peerDeviceId (flags must be 0). */
extern aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags);

/** @brief Undo aclrtDeviceEnablePeerAccess. */
extern aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId);

/** @brief Float overflow mode: ACL_RT_OVERFLOW_MODE_INFNAN (IEEE, what the host computes) only. */
extern aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode);

/** @brief The float overflow mode: ACL_RT_OVERFLOW_MODE_INFNAN. */
extern aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode);

/**
 * @brief Seconds a stream waits in aclrtStreamWaitEvent for the event's record (0: forever);
 *        until called, HCCL_EXEC_TIMEOUT bounds that wait.
 */
extern aclError aclrtSetOpWaitTimeout(uint32_t timeout);

/* ---- contexts ------------------------------------------------------------------------------- */

/** @brief Create a context on deviceId and make it the calling thread's current context. */
extern aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);

/** @brief Destroy a context made by aclrtCreateContext (not a device's default context). */
extern aclError aclrtDestroyContext(aclrtContext context);

/** @brief Make context current on the calling thread; its device becomes the current device. */
extern aclError aclrtSetCurrentContext(aclrtContext context);

/**
 * @brief The calling thread's current context: the one set last, else the current device's
 *        default context; ACL_ERROR_RT_CONTEXT_NULL when the thread has neither.
 */
extern aclError aclrtGetCurrentContext(aclrtContext *context);

/* ---- memory --------------------------------------------------------------------------------- */

/** @brief Allocate size bytes of "device" memory from the shared arena (peers can map it). */
extern aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);

/** @brief aclrtMalloc (arena blocks are 512-byte aligned, so 32 bytes are always met). */
extern aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy);

/** @brief Free memory from aclrtMalloc. */
extern aclError aclrtFree(void *devPtr);

/** @brief Allocate size bytes of host memory (64-byte aligned). */
extern aclError aclrtMallocHost(void **hostPtr, size_t size);

/** @brief Free memory from aclrtMallocHost. */
extern aclError aclrtFreeHost(void *hostPtr);

/** @brief Free and total memory of the host (every attribute is host memory): MemAvailable, MemTotal. */
extern aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);

/** @brief Copy count bytes; destMax is the capacity of dst (count > destMax is an error). */
extern aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);

/** @brief aclrtMemcpy in stream order. */
extern aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                                 aclrtStream stream);

/** @brief Copy height rows of width bytes; rows start every spitch bytes in src, every dpitch in dst. */
extern aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              aclrtMemcpyKind kind);

/** @brief aclrtMemcpy2d in stream order. */
extern aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, aclrtMemcpyKind kind, aclrtStream stream);

/** @brief Set count bytes of devPtr (capacity maxCount) to value. */
extern aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);

/** @brief aclrtMemset in stream order. */
extern aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);

/* ---- virtual memory: reserve, allocate physical, map ----------------------------------------- */

/**
 * @brief The size unit of physical allocations and mappings: the page size (MINIMUM) or 2 MiB
 *        (RECOMMENDED).
 */
extern aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop, aclrtMemGranularityOptions option,
                                                 size_t *granularity);

/**
 * @brief Reserve size bytes of address space (inaccessible until mapped).
 * @param alignment 0 (the page size) or a power of two. @param expectPtr NULL, or a hint.
 * @param flags 0 or 1 (page-type hint; host pages are the same either way).
 */
extern aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                       uint64_t flags);

/** @brief Release a reservation; it must have no mapping left. */
extern aclError aclrtReleaseMemAddress(void *virPtr);

/**
 * @brief Allocate size bytes (a multiple of the granularity) of physical memory, shareable with the
 *        other ranks of the host like aclrtMalloc memory. flags must be 0.
 */
extern aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const aclrtPhysicalMemProp *prop,
                                    uint64_t flags);

/** @brief Free a physical allocation; its memory goes once its last mapping is unmapped. */
extern aclError aclrtFreePhysical(aclrtDrvMemHandle handle);

/**
 * @brief Map [offset, offset+size) of handle's memory at virPtr, inside a reservation and not
 *        overlapping another mapping. flags must be 0.
 */
extern aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags);

/** @brief Unmap the mapping that starts at virPtr (the range stays reserved). */
extern aclError aclrtUnmapMem(void *virPtr);

/* ---- streams -------------------------------------------------------------------------------- */

/** @brief Create a stream on the current device. */
extern aclError aclrtCreateStream(aclrtStream *stream);

/**
 * @brief Create a stream with a priority (0..7) and ACL_STREAM_* flags; a host stream behaves the
 *        same whatever the priority and flags.
 */
extern aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);

/** @brief Wait for a stream's tasks, then destroy it. */
extern aclError aclrtDestroyStream(aclrtStream stream);

/**
 * @brief Wait until every task enqueued on stream before this call has run.
 * @return the first error a task met since the last synchronisation, else ACL_SUCCESS.
 */
extern aclError aclrtSynchronizeStream(aclrtStream stream);

/** @brief aclrtSynchronizeStream bounded by timeout ms (-1: no bound): ACL_ERROR_RT_STREAM_SYNC_TIMEOUT. */
extern aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);

/** @brief Whether every task enqueued on stream has run (never blocks). */
extern aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);

/**
 * @brief ACL_CONTINUE_ON_FAILURE (default) or ACL_STOP_ON_FAILURE: after a failed task, skip the
 *        stream's copies, memsets and host functions until a synchronisation reports the failure.
 */
extern aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);

/** @brief Run fn(userData) in stream order. blockType is accepted for compatibility. */
extern aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                                    aclrtStream stream);

/**
 * @brief Run fn(args) in stream order: after every task enqueued on stream before it, before every
 *        task enqueued after it. It runs on the stream's executor (its worker thread, or the thread
 *        that synchronises the stream); it must not synchronise or destroy its own stream.
 * @param stream the stream (NULL: the current device's default stream).
 * @param fn the host function; NULL is ACL_ERROR_INVALID_PARAM.
 * @param args passed to fn unchanged.
 */
extern aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args);

/** @brief Compatibility: callbacks run on the stream's executor, no report thread is needed. */
extern aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);

/** @brief Compatibility counterpart of aclrtSubscribeReport. */
extern aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);

/** @brief Compatibility: waits up to timeout ms and returns ACL_ERROR_WAIT_CALLBACK_TIMEOUT. */
extern aclError aclrtProcessReport(int32_t timeout);

/* ---- events --------------------------------------------------------------------------------- */

/** @brief Create an event. */
extern aclError aclrtCreateEvent(aclrtEvent *event);

/**
 * @brief Create an event with ACL_EVENT_* flags (SYNC, TIME_LINE, CAPTURE_STREAM_PROGRESS,
 *        DEVICE_USE_ONLY accepted; EXTERNAL and IPC: ACL_ERROR_RT_FEATURE_NOT_SUPPORT).
 */
extern aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);

/** @brief aclrtCreateEventWithFlag; host events can always be recorded again. */
extern aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag);

/** @brief Destroy an event. */
extern aclError aclrtDestroyEvent(aclrtEvent event);

/** @brief Record event on stream: it completes when the tasks enqueued before it have run. */
extern aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);

/** @brief Reset event to the not-recorded state in stream order. */
extern aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);

/** @brief Make stream's later tasks wait for the event's latest record. */
extern aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);

/** @brief Block until the event's latest record has completed. */
extern aclError aclrtSynchronizeEvent(aclrtEvent event);

/**
 * @brief aclrtSynchronizeEvent bounded by timeout ms: -1 waits forever, 0 only checks;
 *        ACL_ERROR_RT_EVENT_SYNC_TIMEOUT when the record has not completed in time.
 */
extern aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);

/** @brief Whether the event's latest record has completed. */
extern aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status);

/** @brief Whether the event's latest record has completed (newer CANN form). */
extern aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);

/** @brief Milliseconds between the completion of two recorded events. */
extern aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);

#ifdef __cplusplus
}
#endif
#endif /* INC_EXTERNAL_ACL_ACL_RT_H_ */
