/*
 * hostccl: AscendCL runtime subset on a host.
 *
 * Devices are virtual ids 0..N-1 (N from HOSTCCL_DEVICE_COUNT). "Device" memory from aclrtMalloc
 * is host memory in a per-process shared arena that peers on the same host can map. Streams are
 * in-order queues run by a worker thread per stream, or by the thread that synchronises it.
 */
#ifndef INC_EXTERNAL_ACL_ACL_RT_H_
#define INC_EXTERNAL_ACL_ACL_RT_H_

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
    ACL_MEMCPY_DEFAULT = 4
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
} aclrtMemMallocPolicy;

typedef enum aclrtCallbackBlockType {
    ACL_CALLBACK_NO_BLOCK = 0,
    ACL_CALLBACK_BLOCK = 1
} aclrtCallbackBlockType;

typedef enum aclrtEventStatus {
    ACL_EVENT_STATUS_COMPLETE = 0,
    ACL_EVENT_STATUS_NOT_READY = 1,
    ACL_EVENT_STATUS_RESERVED = 2
} aclrtEventStatus;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

/** Host function run in stream order by aclrtLaunchCallback. */
typedef void (*aclrtCallback)(void *userData);

/** Host function run in stream order by aclrtLaunchHostFunc. */
typedef void (*aclrtHostFunc)(void *args);

/* ---- devices -------------------------------------------------------------------------------- */

/** @brief Make deviceId the calling thread's current device. */
extern aclError aclrtSetDevice(int32_t deviceId);

/** @brief The calling thread's current device (ACL_ERROR_RT_CONTEXT_NULL when none is set). */
extern aclError aclrtGetDevice(int32_t *deviceId);

/** @brief Synchronise and destroy deviceId's default stream in this process. */
extern aclError aclrtResetDevice(int32_t deviceId);

/** @brief Number of virtual devices (HOSTCCL_DEVICE_COUNT, default 64). */
extern aclError aclrtGetDeviceCount(uint32_t *count);

/** @brief Wait for every stream of the current device. */
extern aclError aclrtSynchronizeDevice(void);

/* ---- memory --------------------------------------------------------------------------------- */

/** @brief Allocate size bytes of "device" memory from the shared arena (peers can map it). */
extern aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);

/** @brief Free memory from aclrtMalloc. */
extern aclError aclrtFree(void *devPtr);

/** @brief Allocate size bytes of host memory (64-byte aligned). */
extern aclError aclrtMallocHost(void **hostPtr, size_t size);

/** @brief Free memory from aclrtMallocHost. */
extern aclError aclrtFreeHost(void *hostPtr);

/** @brief Copy count bytes; destMax is the capacity of dst (count > destMax is an error). */
extern aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);

/** @brief aclrtMemcpy in stream order. */
extern aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                                 aclrtStream stream);

/** @brief Set count bytes of devPtr (capacity maxCount) to value. */
extern aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);

/** @brief aclrtMemset in stream order. */
extern aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);

/* ---- streams -------------------------------------------------------------------------------- */

/** @brief Create a stream on the current device. */
extern aclError aclrtCreateStream(aclrtStream *stream);

/** @brief Wait for a stream's tasks, then destroy it. */
extern aclError aclrtDestroyStream(aclrtStream stream);

/**
 * @brief Wait until every task enqueued on stream before this call has run.
 * @return the first error a task met since the last synchronisation, else ACL_SUCCESS.
 */
extern aclError aclrtSynchronizeStream(aclrtStream stream);

/** @brief aclrtSynchronizeStream bounded by timeout ms (-1: no bound): ACL_ERROR_RT_STREAM_SYNC_TIMEOUT. */
extern aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);

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
