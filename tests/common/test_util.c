#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

static int saved_stderr = -1;
static int capture_fd = -1;

void t_stderr_capture(void)
{
    fflush(stderr);
    capture_fd = memfd_create("t-stderr", MFD_CLOEXEC);
    saved_stderr = dup(STDERR_FILENO);
    if (capture_fd < 0 || saved_stderr < 0 || dup2(capture_fd, STDERR_FILENO) < 0) {
        perror("t_stderr_capture");
        exit(1);
    }
}

char *t_stderr_release(void)
{
    off_t len;
    char *text;

    fflush(stderr);
    len = lseek(capture_fd, 0, SEEK_END);
    text = calloc(1, (size_t)len + 1);
    if (text == NULL || pread(capture_fd, text, (size_t)len, 0) != len) {
        perror("t_stderr_release");
        exit(1);
    }
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    close(capture_fd);
    if (write(STDERR_FILENO, text, (size_t)len) < 0)
        exit(1);
    return text;
}

int t_stderr_wait(const char *needle, int timeout_ms)
{
    const struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};

    for (int waited = 0; waited <= timeout_ms; waited++) {
        struct stat st;
        char *text;
        int found;

        if (fstat(capture_fd, &st) != 0 || (text = calloc(1, (size_t)st.st_size + 1)) == NULL)
            return 0;
        found = pread(capture_fd, text, (size_t)st.st_size, 0) == st.st_size && strstr(text, needle) != NULL;
        free(text);
        if (found)
            return 1;
        nanosleep(&pause, NULL);
    }
    return 0;
}

void t_world_init(t_world_t *world)
{
    HcclRootInfo info;

    memset(&info, 0, sizeof(info));
    T_CHECK_HCCL(HcclHostGetLaunchInfo(&world->launch));
    T_CHECK_ACL(aclrtSetDevice((int32_t)world->launch.localRank));
    T_CHECK_ACL(aclrtCreateStream(&world->stream));
    if (world->launch.rank == 0)
        T_CHECK_HCCL(HcclGetRootInfo(&info));
    T_CHECK_HCCL(HcclHostBroadcastRootInfo(&info));
    T_CHECK_HCCL(HcclCommInitRootInfo(world->launch.size, &info, world->launch.rank, &world->comm));
}

void t_world_fini(t_world_t *world)
{
    T_CHECK_HCCL(HcclCommDestroy(world->comm));
    T_CHECK_ACL(aclrtDestroyStream(world->stream));
}

const char *t_result_name(HcclResult res)
{
    static const char *const names[] = {
        "HCCL_SUCCESS", "HCCL_E_PARA", "HCCL_E_PTR", "HCCL_E_MEMORY", "HCCL_E_INTERNAL", "HCCL_E_NOT_SUPPORT",
        "HCCL_E_NOT_FOUND", "HCCL_E_UNAVAIL", "HCCL_E_SYSCALL", "HCCL_E_TIMEOUT", "HCCL_E_OPEN_FILE_FAILURE",
        "HCCL_E_TCP_CONNECT", "HCCL_E_ROCE_CONNECT", "HCCL_E_TCP_TRANSFER", "HCCL_E_ROCE_TRANSFER",
        "HCCL_E_RUNTIME", "HCCL_E_DRV", "HCCL_E_PROFILING", "HCCL_E_CCE", "HCCL_E_NETWORK", "HCCL_E_AGAIN",
        "HCCL_E_REMOTE", "HCCL_E_SUSPENDING", "HCCL_E_OPRETRY_FAIL", "HCCL_E_OOM",
    };

    if ((unsigned)res < sizeof(names) / sizeof(names[0]))
        return names[res];
    return res == HCCL_E_IN_STATUS ? "HCCL_E_IN_STATUS" : "HCCL_E_UNKNOWN";
}
