#include <string.h>
#include <sys/mman.h>
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
