/*
 * Frameworks load libhccl with dlopen (and Python's ctypes does), so both libraries must load that
 * way: their static TLS has to fit in what glibc keeps for dlopen'ed libraries (~1.6 KB). Loads
 * libascendcl and libhccl by path (argv[1], argv[2]), finds the entry points, and checks that an
 * error still reaches aclGetRecentErrMsg on this thread and on a second one.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef int (*set_device_fn)(int);
typedef const char *(*err_msg_fn)(void);

static set_device_fn set_device;
static err_msg_fn recent_error;

static int error_reaches_message(void)
{
    if (recent_error()[0] != '\0') {
        fprintf(stderr, "FAIL: an error message before any error: %s\n", recent_error());
        return 0;
    }
    if (set_device(-1) == 0) {
        fprintf(stderr, "FAIL: aclrtSetDevice(-1) succeeded\n");
        return 0;
    }
    if (strstr(recent_error(), "error") == NULL) {
        fprintf(stderr, "FAIL: aclGetRecentErrMsg after a failed call: \"%s\"\n", recent_error());
        return 0;
    }
    return 1;
}

static void *thread_main(void *arg)
{
    *(int *)arg = error_reaches_message();
    return NULL;
}

int main(int argc, char **argv)
{
    void *acl, *hccl;
    pthread_t thread;
    int thread_ok = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBASCENDCL LIBHCCL\n", argv[0]);
        return 2;
    }
    acl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (acl == NULL) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    hccl = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (hccl == NULL) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", argv[2], dlerror());
        return 1;
    }
    set_device = (set_device_fn)dlsym(acl, "aclrtSetDevice");
    recent_error = (err_msg_fn)dlsym(acl, "aclGetRecentErrMsg");
    if (set_device == NULL || recent_error == NULL || dlsym(hccl, "HcclCommInitRootInfo") == NULL ||
        dlsym(hccl, "HcclAllReduce") == NULL) {
        fprintf(stderr, "FAIL: entry points missing after dlopen\n");
        return 1;
    }
    if (!error_reaches_message() || pthread_create(&thread, NULL, thread_main, &thread_ok) != 0)
        return 1;
    pthread_join(thread, NULL);
    if (!thread_ok)
        return 1;
    printf("dlopen: both libraries load with dlopen, errors reach aclGetRecentErrMsg per thread\n");
    return 0;
}
