/* Helpers shared by the multi-rank test programs. */
#ifndef HC_TEST_UTIL_H
#define HC_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

/* A condition the test relies on (the programs that link the internal library use this alone). */
#define T_CHECK(cond)                                                                            \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#define T_CHECK_ACL(call)                                                                        \
    do {                                                                                         \
        aclError t_err_ = (call);                                                                \
        if (t_err_ != ACL_SUCCESS) {                                                             \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, t_err_);        \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#define T_CHECK_HCCL(call)                                                                       \
    do {                                                                                         \
        HcclResult t_res_ = (call);                                                              \
        if (t_res_ != HCCL_SUCCESS) {                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                 \
                    HcclGetErrorString(t_res_));                                                 \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

/* The enumerator's name of res ("HCCL_E_REMOTE"): what scripts grep for, whereas HcclGetErrorString
 * gives CANN's text ("error cqe"). */
const char *t_result_name(HcclResult res);

/* Capture this process's stderr into a memory file so that a test can assert on the log lines a
 * failure produced; t_stderr_release prints what was captured to the real stderr and returns it
 * (malloc'ed, NUL-terminated). */
void t_stderr_capture(void);
char *t_stderr_release(void);
/* Wait (up to timeout_ms, from any thread) until the captured stderr holds needle; 1 once it does. */
int t_stderr_wait(const char *needle, int timeout_ms);

/* Launch info, device, stream and a communicator made with HcclHostBroadcastRootInfo. */
typedef struct {
    HcclHostLaunchInfo launch;
    aclrtStream stream;
    HcclComm comm;
} t_world_t;

void t_world_init(t_world_t *world);
void t_world_fini(t_world_t *world);

#endif
