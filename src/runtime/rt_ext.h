/*
 * The host runtime's interface to libhccl. These functions are exported from libascendcl with the
 * acl prefix (only acl* and Hccl* symbols leave the libraries) but are not part of the public
 * headers: they are how HCCL operations join stream order and find shared memory.
 */
#ifndef HC_RT_EXT_H
#define HC_RT_EXT_H

#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A host task: runs once, in stream order, on the stream's worker thread or on the thread that
 * synchronises the stream (caller-runs). It returns ACL_SUCCESS or an error; the first error since
 * the last synchronisation is what aclrtSynchronizeStream returns. The task owns `arg` and must
 * release it itself. A task is never dropped: aclrtDestroyStream and aclFinalize run the queued
 * tasks before destroying a stream.
 */
typedef aclError (*aclrtHostTaskFn)(void *arg);

/*
 * Enqueue fn(arg) on stream (NULL: the calling thread's current device's default stream).
 * `what` names the task in logs: the public call that made it ("aclrtLaunchCallback"), which the
 * errors about the stream name too. Fails without enqueuing when the stream handle is invalid or
 * no device is set for a NULL stream.
 */
aclError aclrtHostLaunchTask(aclrtStream stream, aclrtHostTaskFn fn, void *arg, const char *what);

/*
 * The same with the caller's storage for the queue entry, so that enqueueing allocates nothing
 * (every HCCL op embeds one). `what` should be the public call that made the task: an error about
 * the stream (invalid handle, no current device for NULL) names it, never this function. The
 * runtime uses `link` until it calls fn and never touches the task afterwards: fn may free the
 * memory that holds it. On failure nothing was enqueued.
 *
 * Run-at-enqueue: with claimed_p non-NULL and may_run_now set, when the stream is idle (nothing
 * queued or running) and its policy has the caller run tasks (docs/runtime.md), the runtime asks
 * may_run_now(arg), on the launching thread; if it says yes, nothing is queued, *claimed_p is 1
 * and the stream is held for the calling thread: it must call aclrtHostRunClaimed(task) next,
 * which runs the task on that thread, in stream order, and releases the stream (other threads'
 * tasks queue behind it meanwhile). may_run_now must say yes only when the task can complete
 * with nothing more from the calling thread: the caller is blocked in it until it does.
 * Otherwise *claimed_p is 0 and the task is queued.
 *
 * Start-at-enqueue: when the task is queued on an idle stream (nothing queued or running before
 * it, so it is next whoever runs it), start_now(arg), if set, is called on the launching thread,
 * with the stream's lock held, before any thread can run the task: the task may do there the part
 * of its work that waits for nobody (an HCCL collective stages and publishes its first step, so
 * that peers need not wait for this rank's runner to wake up). It must not block. A task that has
 * become the queue's head may be asked again (aclrtHostRunReady): it starts its work once.
 */
typedef struct aclrtHostTask {
    struct aclrtHostTask *link; /* the runtime's */
    aclrtHostTaskFn fn;
    void *arg;
    const char *what;
    int owned; /* the runtime's: whether it allocated this entry */
    int (*may_run_now)(void *arg); /* optional: see above */
    void (*start_now)(void *arg);  /* optional: see above */
    void *claimed; /* the runtime's: the stream a launch claimed */
    int bounded;   /* optional: the task ends by itself within its own bound (an HCCL operation's
                    * HCCL_EXEC_TIMEOUT), so a thread waiting for an event recorded after it may run it */
} aclrtHostTask;

aclError aclrtHostLaunchTaskIn(aclrtStream stream, aclrtHostTask *task, int *claimed_p);
void aclrtHostRunClaimed(aclrtHostTask *task);

/*
 * A stream holds at most ACL_HOST_STREAM_DEPTH unfinished tasks, as a device's task queue holds a
 * bounded number: memory stays bounded in a burst of launches that nobody synchronises. A launch
 * that fills it waits there until half of them have run, running them on the launching thread where
 * the caller is the stream's runner. A task launched with aclrtHostLaunchTaskIn is queued anyway,
 * *claimed_p is then ACL_HOST_LAUNCH_FULL, and the caller calls aclrtHostThrottle(stream) once it
 * holds no lock a task may take.
 */
#define ACL_HOST_STREAM_DEPTH 1024u
#define ACL_HOST_LAUNCH_FULL 2
void aclrtHostThrottle(aclrtStream stream);

/*
 * A direct run: work the calling thread runs now, in stream order, without a task (libhccl's
 * blocking fast path: no queue entry, no task frame). Returns what aclrtHostDirectEnd takes, when
 * a launch would have been claimed on the owner's path (the calling thread created the stream
 * and no other thread used it, the stream is idle, the caller runs its tasks in the synchronous
 * pattern, nothing failed unreported) and nothing a task's frame gives is needed: the stream is
 * the calling thread's current device's and no profiler records it, and the stream is in the
 * thread's cache of streams it used (a launch put it there). Otherwise NULL: launch a task. The
 * work must not synchronise its own stream. Until aclrtHostDirectEnd the stream shows as executing:
 * work other threads launch on it waits. aclrtHostDirectEnd: err is the work's result as a task's
 * would be (a failure is what the next synchronisation returns, with msg, or the last error line
 * logged, as its line); `what` names the work as a task's `what` does (static storage).
 */
void *aclrtHostDirectBegin(aclrtStream stream);
/* Before a launch behind queued tasks, where the calling thread runs the stream's tasks and nobody
 * executes them now: run those at the head that can run now (their may_run_now says so), so that the
 * launch may find the stream idle, then call the new head's start_now (which may be called more
 * than once for a task this way: it must start its work once). */
void aclrtHostRunReady(aclrtStream stream);
void aclrtHostDirectEnd(void *direct, aclError err, const char *what, const char *msg);
/* Instead of aclrtHostDirectEnd, when the work turns out to need more than the calling thread may
 * give it now (an HCCL op whose peers have not begun it, once it has done what a start_now does):
 * task (its may_run_now and start_now are asked only by aclrtHostRunReady) is queued as the stream's next
 * task, ahead of what other threads launched meanwhile, and runs as a launched task would (a
 * synchroniser that came during the claim runs it, or has the worker run it). */
void aclrtHostDirectQueue(void *direct, aclrtHostTask *task);

/*
 * Another process waits for work that this one queued and nobody runs: a task left on a stream
 * whose callers run its tasks (the synchronous pattern) while the program computes instead of
 * synchronising. Every such stream's worker runs its queue now, as its backstop poll would have a
 * poll period later, and the stream leaves the synchronous pattern (docs/runtime.md). Streams
 * whose queue is empty or being run are left alone. Any thread may call it (libhccl's kick
 * listener, shm_kick.c).
 */
void aclrtHostKickRunners(void);

/*
 * Inside a task that is failing: text (copied) is why, in one line. The thread that synchronises
 * the stream and gets the error finds it as its last error (aclrtHostCarriedErrMsg), whichever
 * thread ran the task. Without it, the last error line the runtime logged while the task ran.
 */
void aclrtHostTaskSetErrMsg(const char *text);

/*
 * The error line a failed synchronisation carried to the calling thread (a task's, see above), or
 * NULL when the thread's last runtime error is not such a line; *ns_p: when it was carried
 * (CLOCK_MONOTONIC), to compare with the caller's own last error.
 */
const char *aclrtHostCarriedErrMsg(int64_t *ns_p);

/*
 * Who runs the stream's tasks now (docs/runtime.md, "Who runs the tasks"), for tools and tests:
 * *sync_pattern_p is 1 while the program synchronises right after enqueueing, 0 in the overlap
 * pattern; *runner_p is 1 when enqueue wakes the worker, 0 when tasks wait for the synchronising
 * caller (or run at enqueue). NULL stream: the current device's default stream.
 */
aclError aclrtHostStreamRunner(aclrtStream stream, int *sync_pattern_p, int *runner_p);

/*
 * A communicator's local ranks fill every CPU they may use (delta 1 at its creation, -1 at its
 * destruction): while any such communicator lives, a stream's worker could only run by taking a CPU
 * from a rank, and a caller that computes between enqueue and synchronisation runs its overlapped
 * tasks itself (docs/runtime.md, "Who runs the tasks").
 */
void aclrtHostCpusFull(int delta);

/*
 * A communicator's local ranks outnumber the CPUs they may use (delta 1 at its creation, -1 at its
 * destruction): while any such communicator lives, the streams' workers poll less often (every
 * wake-up takes a CPU from a rank; stream.c, POLL_MAX_NS).
 */
void aclrtHostCpusShared(int delta);

/*
 * If [ptr, ptr+len) lies inside one aclrtMalloc allocation of this process's shared arena, set
 * *fd_p to the arena's memfd and *offset_p to ptr's offset in it and return ACL_SUCCESS; otherwise
 * return ACL_ERROR_INVALID_PARAM. Peers on the host can map the range through /proc/PID/fd/FD or a
 * passed descriptor: the zero-copy path of the intra-host engine.
 */
aclError aclrtHostArenaLookup(const void *ptr, size_t len, int *fd_p, uint64_t *offset_p);

/* The calling thread's current device, or -1 when none is set (a query: nothing is logged). */
int32_t aclrtHostCurrentDevice(void);

/*
 * Virtual memory (vmm.c): ACL_SUCCESS when [ptr, ptr+len) lies inside one aclrtReserveMemAddress
 * reservation (aclrtHostMemReserved), or inside one aclrtMapMem mapping of handle
 * (aclrtHostMemMapped); otherwise ACL_ERROR_INVALID_PARAM, not logged.
 */
aclError aclrtHostMemReserved(const void *ptr, size_t len);
aclError aclrtHostMemMapped(const void *ptr, size_t len, void *handle);

/*
 * Profiling (prof.c). While aclprof records, every stream task is timed; a task may describe
 * itself by calling aclrtHostProfAnnotate while it runs (HCCL operations give their collective,
 * bytes, root or peer, communicator and result). aclrtHostProfActive says whether the calling
 * task is being recorded, so that a task computes its description only then.
 */
typedef struct {
    const char *name;     /* e.g. "allreduce" (static storage) */
    const char *category; /* "hccl", "memcpy", ... (static storage) */
    const char *comm;     /* communicator name, copied */
    int32_t rank;         /* -1: not a communicator op */
    uint32_t nranks;
    uint64_t seq;
    uint64_t count;
    const char *dtype;    /* static storage, or NULL */
    const char *redop;    /* static storage, or NULL */
    uint64_t bytes;
    int64_t peer;         /* root or peer rank; -1 when none */
    const char *peer_role; /* "root" or "peer" (static storage), or NULL */
    int result;           /* HcclResult */
} aclrtHostProfInfo;

int aclrtHostProfActive(void);
void aclrtHostProfAnnotate(const aclrtHostProfInfo *info);

#ifdef __cplusplus
}
#endif
#endif /* HC_RT_EXT_H */
