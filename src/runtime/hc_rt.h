/*
 * The host runtime's internal interface: handles, streams and their executor, devices. Everything
 * here is hidden inside libascendcl; the library exports only the acl* entry points
 * (include/acl/acl*.h and rt_ext.h), which are marked HC_RT_EXPORT.
 */
#ifndef HC_RT_H
#define HC_RT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <acl/acl.h>

#include "hc_time.h"
#include "rt_ext.h"

/* The build hides every symbol (-fvisibility=hidden); the version script can only export what is
 * visible, so each public definition says so explicitly. */
#define HC_RT_EXPORT __attribute__((visibility("default")))

/* HOSTCCL_DEVICE_COUNT's upper bound in the config table: sizes the per-device tables. */
#define HC_RT_MAX_DEVICES 4096

/* ---- handles (handle.c) ---------------------------------------------------------------------- */

typedef enum {
    HC_RT_KIND_STREAM = 1,
    HC_RT_KIND_EVENT = 2,
    HC_RT_KIND_CONTEXT = 3,
    HC_RT_KIND_PHYSMEM = 4
} hc_rt_kind_t;

/*
 * The base every stream and event embeds first. Users hold an opaque handle that names a registry
 * slot and its generation, never the object's address, so a stale or forged handle is detected
 * without touching freed memory. The registry holds one reference; every call that looks a handle
 * up holds another until it is done, so an object outlives a concurrent destroy.
 */
typedef struct hc_rt_object {
    atomic_uint refs;
    hc_rt_kind_t kind;
    void *handle;                                /* set by hc_rt_handle_register */
    void (*release)(struct hc_rt_object *obj);   /* frees the object with the last reference */
} hc_rt_object_t;

/* Give obj (holding one reference, which the registry keeps) a handle. */
aclError hc_rt_handle_register(hc_rt_object_t *obj);

/* Find a live object of kind and take a reference; ACL_ERROR_RT_INVALID_HANDLE without logging. */
aclError hc_rt_handle_lookup(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p);

/* Remove handle from the registry; the registry's reference passes to the caller. */
aclError hc_rt_handle_unregister(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p);

/* Every live object of kind, each with a reference taken; free the array with free(). */
aclError hc_rt_handle_collect(hc_rt_kind_t kind, hc_rt_object_t ***objs_p, size_t *count_p);

/* Whether handle named an object of the parent process before fork() (for the error message). */
int hc_rt_handle_from_parent(const void *handle, hc_rt_kind_t kind);

void hc_rt_object_ref(hc_rt_object_t *obj);
void hc_rt_object_unref(hc_rt_object_t *obj);

/*
 * hc_rt_handle_lookup and hc_rt_object_unref for a use that begins and ends on the calling thread (a
 * launch, a record, a synchronisation): the object usually comes from the thread's cache of the
 * objects it used last, which holds a reference to each, so that the pair costs no atomic
 * read-modify-write (four per pair otherwise, ~6 ns each here). Every borrow is returned with
 * hc_rt_handle_return on the same thread. hc_rt_handle_borrow_cached: only from the cache (NULL
 * otherwise, nothing logged); hc_rt_handle_keep: put a reference just taken in the cache as a borrow
 * (0: every entry is borrowed, the caller's reference stays a plain one, which hc_rt_handle_return
 * drops all the same).
 */
aclError hc_rt_handle_borrow(const void *handle, hc_rt_kind_t kind, hc_rt_object_t **obj_p);
hc_rt_object_t *hc_rt_handle_borrow_cached(const void *handle, hc_rt_kind_t kind);
int hc_rt_handle_keep(const void *handle, hc_rt_object_t *obj);
void hc_rt_handle_return(hc_rt_object_t *obj);

/* ---- streams and the executor (stream.c) ----------------------------------------------------- */

typedef struct hc_rt_stream hc_rt_stream_t;

/* A new stream of device with its worker thread, registered; the caller holds one reference. */
aclError hc_rt_stream_create(int32_t device, hc_rt_stream_t **stream_p);

/* The stream named by handle (NULL: the current device's default stream), with a reference taken.
 * Logs why when there is none; `call` names the entry point in that line. */
aclError hc_rt_stream_get(aclrtStream handle, const char *call, hc_rt_stream_t **stream_p);

void hc_rt_stream_put(hc_rt_stream_t *stream);

/*
 * hc_rt_stream_get and hc_rt_stream_put for a use that begins and ends on the calling thread (a
 * synchronisation, a launch and the run of the task it claimed): the stream usually comes from the
 * thread's cache of the streams it used last, which holds a reference to each, so that the pair
 * costs no atomic read-modify-write (four per pair otherwise, ~6 ns each here, two pairs per op).
 * Every borrow is returned with hc_rt_stream_return on the same thread.
 */
aclError hc_rt_stream_borrow(aclrtStream handle, const char *call, hc_rt_stream_t **stream_p);
void hc_rt_stream_return(hc_rt_stream_t *stream);

int32_t hc_rt_stream_device(const hc_rt_stream_t *stream);
void *hc_rt_stream_handle(const hc_rt_stream_t *stream);

/* Append fn(arg) to the stream's queue. On failure nothing is enqueued and arg stays the caller's. */
aclError hc_rt_stream_enqueue(hc_rt_stream_t *stream, aclrtHostTaskFn fn, void *arg, const char *what);
/* The same; bounded: the task ends by itself (aclrtHostTask.bounded); *pos_p: the stream's count of
 * enqueued tasks that this one completes (hc_rt_stream_wait_begin), for a task that waits can name
 * (an event's record: the stream notes the time, from which a wait behind the queue measures its
 * gap). With pos_p the caller throttles (hc_rt_stream_throttle) once it has published the position. */
aclError hc_rt_stream_enqueue_at(hc_rt_stream_t *stream, aclrtHostTaskFn fn, void *arg, const char *what,
                                 int bounded, uint64_t *pos_p);
/* The same with the caller's entry (task->owned 0: the task's function disposes of it, and the
 * stream does not touch it once the function has begun). */
aclError hc_rt_stream_enqueue_task(hc_rt_stream_t *stream, aclrtHostTask *task, uint64_t *pos_p);
/* The same with the caller's entry (aclrtHostLaunchTaskIn); task->owned says who frees it. With
 * claimed_p, the stream may instead be claimed for the calling thread (run-at-enqueue, stream.c):
 * *claimed_p = 1, nothing is queued, and the caller must call hc_rt_stream_run_claimed next;
 * ACL_HOST_LAUNCH_FULL: queued, and the stream is full (the caller throttles, see below). Without
 * claimed_p the launch never throttles: hc_rt_stream_enqueue does. */
aclError hc_rt_stream_launch(hc_rt_stream_t *stream, aclrtHostTask *task, int *claimed_p);
/* After a launch that filled the stream (ACL_HOST_STREAM_DEPTH unfinished tasks, rt_ext.h): run
 * (or wait for) its oldest tasks until half the depth is left. The caller holds no lock a task may
 * take. */
void hc_rt_stream_throttle(hc_rt_stream_t *stream);
/* Where the caller is the stream's runner and nobody executes: run the queued tasks at the head
 * that can run now (their may_run_now), on the calling thread, then start the new head (its
 * start_now). */
void hc_rt_stream_run_ready(hc_rt_stream_t *stream);
/* A peer waits for tasks queued here that nobody runs (aclrtHostKickRunners): on every stream where the
 * caller is the runner and nobody executes the queue, the worker runs it now, as its backstop poll
 * would have. */
void hc_rt_stream_kick_all(void);
/* Run a task whose launch claimed the stream, in stream order, and release the stream. */
void hc_rt_stream_run_claimed(hc_rt_stream_t *stream, aclrtHostTask *task);
/* A direct run (aclrtHostDirectBegin): the stream claimed for work the calling thread runs now
 * without a task, or NULL (launch a task instead); end it with hc_rt_stream_direct_end. */
hc_rt_stream_t *hc_rt_stream_direct_begin(aclrtStream handle);
void hc_rt_stream_direct_end(hc_rt_stream_t *stream, aclError err, const char *what, const char *msg);
void hc_rt_stream_direct_queue(hc_rt_stream_t *stream, aclrtHostTask *task);
/* The policy's state (aclrtHostStreamRunner). */
void hc_rt_stream_runner(hc_rt_stream_t *stream, int *sync_pattern_p, int *runner_p);

/* Wait until every task enqueued before the call has run; timeout_ms < 0 waits without bound and
 * runs the tasks on the calling thread (caller-runs). Returns and clears the first task error. */
aclError hc_rt_stream_sync(hc_rt_stream_t *stream, int64_t timeout_ms);
/* A thread is about to wait for the task enqueued at pos on the stream named by handle (an event's
 * record), or asks whether it has run: its worker runs the tasks now, up to that one where the
 * callers are the stream's runners. wait (NULL for a poll or a bounded or in-task wait): the
 * program's own untimed wait, which the stream's policy sees as a synchronisation when it is for
 * the last task queued, else as a wait behind the queue; call hc_rt_stream_wait_end with it once
 * the wait is over. */
typedef struct {
    hc_rt_stream_t *stream; /* the epoch whose end the wait's end reports, or NULL */
    int64_t entry_ns;       /* when the program called the wait (its gap ends there) */
} hc_rt_stream_wait_t;
void hc_rt_stream_wait_begin(const void *handle, uint64_t pos, hc_rt_stream_wait_t *wait);
void hc_rt_stream_wait_end(hc_rt_stream_wait_t *wait);

/* Run the queued tasks, stop the worker and drop the handle. */
aclError hc_rt_stream_destroy(aclrtStream handle);

/* Destroy every stream of the process (aclFinalize). Returns the first error met. */
aclError hc_rt_stream_destroy_all(void);

/* Whether the calling thread is inside a task of the stream named by handle. */
int hc_rt_stream_runs_here(const void *handle);

/* Whether the stream has run every task enqueued on it (and start them if nobody does). */
int hc_rt_stream_idle(hc_rt_stream_t *stream);

/* ACL_STOP_ON_FAILURE (1) or ACL_CONTINUE_ON_FAILURE (0). */
void hc_rt_stream_set_stop_on_failure(hc_rt_stream_t *stream, int stop);

/* Inside a task: whether it should skip its work because an earlier task of its stream failed and
 * the stream stops on failure. Copies, memsets and host functions honour it. */
int hc_rt_task_skipping(void);

/* aclrtHostTaskSetErrMsg: the running task's error line, for its synchroniser. */
void hc_rt_task_set_err_msg(const char *text);

/* ---- the thread's last error (init.c) ---------------------------------------------------------- */

/* Record err as the calling thread's last error when it is one; returns err. Every public entry
 * point returns through it, so aclrtGetLastError sees every failure. */
aclError hc_rt_ret(aclError err);

/* Warn once per process when `call` needs a device and aclInit was never called. */
void hc_rt_init_check(const char *call);

/* ---- devices (device.c, device_info.c, context.c) ---------------------------------------------- */

/* How many devices this process sees (HOSTCCL_DEVICE_COUNT, narrowed by ASCEND_RT_VISIBLE_DEVICES). */
int32_t hc_rt_device_count(void);

/* The host's id of logical device `device` (its entry in ASCEND_RT_VISIBLE_DEVICES). */
int32_t hc_rt_device_physical(int32_t device);

/* aclrtSetOpWaitTimeout's seconds, or fallback_s when it was never called. */
int64_t hc_rt_op_wait_timeout_s(int64_t fallback_s);

/* aclrtSetDevice: the thread's current context becomes its device's default context. */
void hc_rt_context_clear_current(void);

/* ACL_SUCCESS when 0 <= device < HOSTCCL_DEVICE_COUNT, else logs and ACL_ERROR_RT_INVALID_DEVICEID. */
aclError hc_rt_device_check(int32_t device);

/* The calling thread's current device, or ACL_ERROR_RT_CONTEXT_NULL with a line telling the user
 * (of `call`) to call aclrtSetDevice first. */
aclError hc_rt_device_current(const char *call, int32_t *device_p);

/* Make device (-1: none) the calling thread's current device; returns the previous one. */
int32_t hc_rt_device_swap(int32_t device);

/* device's default stream (created on first use), with a reference taken. */
aclError hc_rt_device_default_stream(int32_t device, hc_rt_stream_t **stream_p);

/* Forget every default stream (aclFinalize destroys them with the other streams). */
void hc_rt_device_forget_defaults(void);

/* ---- memory (memory.c, arena.c, vmm.c) -------------------------------------------------------- */

/* The host's available and total memory in bytes (/proc/meminfo); 0 on success. */
int hc_rt_host_memory(size_t *available_p, size_t *total_p);

/* A page-aligned block of size bytes (a multiple of the page size) in the shared arena, for a
 * physical allocation: its address, the arena's memfd (-1 when the arena is private memory) and
 * the block's offset in it. */
aclError hc_rt_arena_alloc_pages(size_t size, void **ptr_p, int *fd_p, uint64_t *offset_p);

/* Free a block of hc_rt_arena_alloc_pages. */
void hc_rt_arena_free_pages(void *ptr);

/* aclrtHostArenaLookup for mapped virtual memory: ACL_SUCCESS and the memfd and offset behind
 * [ptr, ptr+len) when it lies inside one mapping of arena memory; not logged. */
aclError hc_rt_vmm_lookup(const void *ptr, size_t len, int *fd_p, uint64_t *offset_p);

/* ---- profiling (prof.c) ------------------------------------------------------------------------- */

/* One task being timed; the task may describe itself through aclrtHostProfAnnotate. */
typedef struct hc_rt_prof_task {
    int64_t start_ns;
    int annotated;
    aclrtHostProfInfo info;
    char comm[128];
    struct hc_rt_prof_task *outer; /* a task that synchronises another stream runs its tasks inside */
} hc_rt_prof_task_t;

/* Whether a recording runs that covers device (one atomic load when none runs). */
int hc_rt_prof_wants(int32_t device);
void hc_rt_prof_task_begin(hc_rt_prof_task_t *task);
void hc_rt_prof_task_end(hc_rt_prof_task_t *task, const char *what, int32_t device, unsigned stream_number,
                         aclError err);

/* aclFinalize: stop a running recording (writing its trace) and end the session. */
void hc_rt_prof_finalize_quietly(void);

/* ---- condition variables on the monotonic clock ---------------------------------------------- */

/* Every timed wait in the runtime measures CLOCK_MONOTONIC, so wall-clock jumps move no deadline. */
static inline int hc_rt_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int err;

    err = pthread_condattr_init(&attr);
    if (err != 0)
        return err;
    err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (err == 0)
        err = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return err;
}

/* Wait on cond until signalled or deadline_ns (0: no deadline); ETIMEDOUT once it has passed. */
static inline int hc_rt_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ns)
{
    struct timespec ts;

    if (deadline_ns == 0)
        return pthread_cond_wait(cond, mutex);
    ts.tv_sec = (time_t)(deadline_ns / HC_NS_PER_S);
    ts.tv_nsec = (long)(deadline_ns % HC_NS_PER_S);
    return pthread_cond_timedwait(cond, mutex, &ts);
}

/* ---- fork() (fork.c) ------------------------------------------------------------------------ */

/*
 * A child of fork() starts with no streams or events and an arena of its own; the parent goes on
 * as before. Each module takes its locks in prepare (so that the child's copy is consistent) and
 * releases them in parent and child; the child also drops what belongs to the parent.
 */
void hc_rt_init_fork_prepare(void);
void hc_rt_init_fork_parent(void);
void hc_rt_init_fork_child(void);
void hc_rt_device_fork_prepare(void);
void hc_rt_device_fork_parent(void);
void hc_rt_device_fork_child(void);
void hc_rt_handle_fork_prepare(void);
void hc_rt_handle_fork_parent(void);
void hc_rt_handle_fork_child(void);
void hc_rt_arena_fork_prepare(void);
void hc_rt_arena_fork_parent(void);
void hc_rt_arena_fork_child(void);
void hc_rt_stream_fork_child(void);

#endif /* HC_RT_H */
