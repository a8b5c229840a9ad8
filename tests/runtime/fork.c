/*
 * fork() safety (issue 12, bug 2). A child of fork() starts with no streams and no communicators of
 * its parent (using one fails with a message that says so), with a private copy of the buffers it
 * inherited and an arena of its own; its exit is prompt; the parent goes on unharmed.
 *
 * usage: fork_test continue|exec
 *   continue  fork, then use hostccl in both processes:
 *             - the child reads the parent's buffer, overwrites it, allocates and fills one of its
 *               own, is refused the parent's stream and communicator, and runs a communicator of its
 *               own; it must exit within CHILD_BOUND_S;
 *             - the parent's buffer is unchanged, its next aclrtMalloc does not hand out the child's
 *               bytes, its stream and communicator still work, and a rendezvous it had open before
 *               the fork still completes (the child's exit must not stop it).
 *   exec      fork + exec of this program, which must inherit no hostccl descriptor and run a
 *             communicator of its own.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hccl/hccl.h>

#include "capture.h"

#define BYTES (1u << 20)
#define COUNT (BYTES / sizeof(float))
/* The child is done in milliseconds; the bound is far above that and far below the 120 s a child
 * blocked on its parent's rendezvous thread would take. */
#define CHILD_BOUND_S 10.0

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: pid %d: check failed: %s\n", __FILE__, __LINE__,  \
                    (int)getpid(), #cond);                                            \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static float value(int who, size_t i)
{
    return (float)who * 0.37f + (float)i * 0.001953125f + 0.1f;
}

/* A one-rank communicator of this process, and an AllReduce on buf checked against its input. */
static HcclComm one_rank_comm(void)
{
    HcclRootInfo info;
    HcclComm comm;

    CHECK(HcclGetRootInfo(&info) == HCCL_SUCCESS);
    CHECK(HcclCommInitRootInfo(1, &info, 0, &comm) == HCCL_SUCCESS);
    return comm;
}

static void allreduce_check(HcclComm comm, aclrtStream stream, float *buf, int who)
{
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = value(who, i);
    CHECK(HcclAllReduce(buf, buf, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream) == HCCL_SUCCESS);
    CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    for (size_t i = 0; i < COUNT; i++)
        CHECK(buf[i] == value(who, i));
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static int any_byte(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == v)
            return 1;
    return 0;
}

/* What the child of "continue" does with what it inherited; exits with its verdict. */
static _Noreturn void child_continue(unsigned char *inherited, aclrtStream parent_stream, HcclComm parent_comm)
{
    aclrtStream stream;
    unsigned char *own;
    HcclComm comm;
    capture_t cap;
    char *log;

    CHECK(all_bytes(inherited, BYTES, 'P'));          /* the child sees what the parent wrote */
    memset(inherited, 'C', BYTES);                    /* ... and its writes stay its own */
    CHECK(aclrtMalloc((void **)&own, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    memset(own, 'K', BYTES);
    capture_begin(&cap);
    CHECK(aclrtSynchronizeStream(parent_stream) == ACL_ERROR_RT_INVALID_HANDLE);
    CHECK(HcclAllReduce(own, own, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, parent_comm, NULL) == HCCL_E_PARA);
    log = capture_end(&cap);
    CHECK(strstr(log, "was created by the parent process before fork()") != NULL);
    CHECK(count_of(log, "before fork()") == 2);
    free(log);
    /* A stream and a communicator of its own work; the memset above must not be lost meanwhile. */
    CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    comm = one_rank_comm();
    {
        float *x;
        CHECK(aclrtMalloc((void **)&x, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
        allreduce_check(comm, stream, x, 2);
        CHECK(aclrtFree(x) == ACL_SUCCESS);
    }
    CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS);
    CHECK(aclrtFree(inherited) == ACL_SUCCESS); /* an inherited buffer can be freed */
    /* `own` is kept: the parent's next allocation must not be it. exit() runs the libraries'
     * destructors, which must not wait for the parent's threads. */
    exit(0);
}

/* Wait for the child at most `bound` seconds; its exit status, or -1 on timeout (then killed). */
static int wait_child(pid_t pid, double bound, double *took_p)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), status;
    double start = now_s();
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};

    CHECK(pidfd >= 0);
    if (poll(&pfd, 1, (int)(bound * 1000)) <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        close(pidfd);
        return -1;
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    close(pidfd);
    *took_p = now_s() - start;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

typedef struct {
    HcclRootInfo *info;
    uint32_t rank;
    HcclResult res;
} join_t;

static void *join_rank(void *arg)
{
    join_t *j = arg;
    HcclComm comm;

    if (aclrtSetDevice((int32_t)j->rank) != ACL_SUCCESS) {
        j->res = HCCL_E_RUNTIME;
        return NULL;
    }
    j->res = HcclCommInitRootInfo(2, j->info, j->rank, &comm);
    if (j->res == HCCL_SUCCESS)
        j->res = HcclCommDestroy(comm);
    return NULL;
}

static int run_continue(void)
{
    unsigned char *mine, *next;
    aclrtStream stream;
    HcclRootInfo pending;
    HcclComm comm;
    pthread_t threads[2];
    join_t joins[2];
    double took = 0;
    pid_t pid;
    int code;

    CHECK(aclInit(NULL) == ACL_SUCCESS);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS);
    CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    comm = one_rank_comm();
    {
        float *x;
        CHECK(aclrtMalloc((void **)&x, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
        allreduce_check(comm, stream, x, 1);
        CHECK(aclrtFree(x) == ACL_SUCCESS);
    }
    CHECK(aclrtMalloc((void **)&mine, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    memset(mine, 'P', BYTES);
    /* A rendezvous left open across the fork: its server thread runs in the parent only. */
    CHECK(HcclGetRootInfo(&pending) == HCCL_SUCCESS);

    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        child_continue(mine, stream, comm);
    code = wait_child(pid, CHILD_BOUND_S, &took);
    if (code != 0) {
        fprintf(stderr, "the child %s\n", code < 0 ? "did not exit within the bound" : "failed");
        return 1;
    }
    printf("child exited 0 after %.3f s\n", took);
    CHECK(all_bytes(mine, BYTES, 'P'));
    CHECK(aclrtMalloc((void **)&next, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    CHECK(!any_byte(next, BYTES, 'K')); /* not the child's block, with the child's bytes */
    {
        float *x = (float *)(void *)next;
        allreduce_check(comm, stream, x, 3);
    }
    /* The rendezvous opened before the fork still serves two ranks. */
    for (uint32_t r = 0; r < 2; r++) {
        joins[r] = (join_t){.info = &pending, .rank = r};
        CHECK(pthread_create(&threads[r], NULL, join_rank, &joins[r]) == 0);
    }
    for (uint32_t r = 0; r < 2; r++) {
        pthread_join(threads[r], NULL);
        CHECK(joins[r].res == HCCL_SUCCESS);
    }
    CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS);
    CHECK(aclrtFree(mine) == ACL_SUCCESS);
    CHECK(aclrtFree(next) == ACL_SUCCESS);
    CHECK(aclFinalize() == ACL_SUCCESS);
    printf("fork + continue: ok\n");
    return 0;
}

/* The exec'ed child: no descriptor of hostccl came through exec. */
static int run_exec_child(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    aclrtStream stream;
    HcclComm comm;
    float *x;

    CHECK(d != NULL);
    while ((e = readdir(d)) != NULL) {
        char path[300], target[256];
        ssize_t n;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strstr(target, "hostccl") != NULL || strstr(target, "socket:") != NULL) {
            fprintf(stderr, "exec'ed child inherited descriptor %s -> %s\n", e->d_name, target);
            return 1;
        }
    }
    closedir(d);
    CHECK(aclInit(NULL) == ACL_SUCCESS);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS);
    CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    comm = one_rank_comm();
    CHECK(aclrtMalloc((void **)&x, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    allreduce_check(comm, stream, x, 4);
    CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS);
    CHECK(aclFinalize() == ACL_SUCCESS);
    return 0;
}

static int run_exec(const char *self)
{
    unsigned char *mine;
    aclrtStream stream;
    HcclRootInfo pending;
    HcclComm comm;
    double took = 0;
    pid_t pid;
    int code;

    CHECK(aclInit(NULL) == ACL_SUCCESS);
    CHECK(aclrtSetDevice(0) == ACL_SUCCESS);
    CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    comm = one_rank_comm();
    CHECK(aclrtMalloc((void **)&mine, BYTES, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
    memset(mine, 'P', BYTES);
    CHECK(HcclGetRootInfo(&pending) == HCCL_SUCCESS);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, self, "exec-child", (char *)NULL);
        _exit(127);
    }
    code = wait_child(pid, CHILD_BOUND_S, &took);
    if (code != 0) {
        fprintf(stderr, "the exec'ed child %s (%d)\n", code < 0 ? "did not exit within the bound" : "failed", code);
        return 1;
    }
    printf("exec'ed child exited 0 after %.3f s\n", took);
    CHECK(all_bytes(mine, BYTES, 'P'));
    CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    CHECK(aclrtDestroyStream(stream) == ACL_SUCCESS);
    CHECK(aclrtFree(mine) == ACL_SUCCESS);
    CHECK(aclFinalize() == ACL_SUCCESS);
    printf("fork + exec: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    if (strcmp(mode, "continue") == 0)
        return run_continue();
    if (strcmp(mode, "exec") == 0)
        return run_exec("/proc/self/exe");
    if (strcmp(mode, "exec-child") == 0)
        return run_exec_child();
    fprintf(stderr, "usage: %s continue|exec\n", argv[0]);
    return 2;
}
