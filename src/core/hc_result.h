/* The X-macro of HcclResult: names and one-line descriptions, used by HcclGetErrorString and
 * hc_result_name so that the strings never drift from the enum. */
#ifndef HC_RESULT_H
#define HC_RESULT_H

#define HC_RESULT_MAP(X)                                                                   \
    X(HCCL_SUCCESS, "success")                                                             \
    X(HCCL_E_PARA, "invalid parameter")                                                    \
    X(HCCL_E_PTR, "null pointer")                                                          \
    X(HCCL_E_MEMORY, "memory error")                                                       \
    X(HCCL_E_INTERNAL, "internal error")                                                   \
    X(HCCL_E_NOT_SUPPORT, "not supported")                                                 \
    X(HCCL_E_NOT_FOUND, "resource not found")                                              \
    X(HCCL_E_UNAVAIL, "resource unavailable")                                              \
    X(HCCL_E_SYSCALL, "system call failed")                                                \
    X(HCCL_E_TIMEOUT, "timeout")                                                           \
    X(HCCL_E_OPEN_FILE_FAILURE, "cannot open file")                                        \
    X(HCCL_E_TCP_CONNECT, "tcp connect failed")                                            \
    X(HCCL_E_ROCE_CONNECT, "roce connect failed")                                          \
    X(HCCL_E_TCP_TRANSFER, "tcp transfer failed")                                          \
    X(HCCL_E_ROCE_TRANSFER, "roce transfer failed")                                        \
    X(HCCL_E_RUNTIME, "runtime call failed")                                               \
    X(HCCL_E_DRV, "driver call failed")                                                    \
    X(HCCL_E_PROFILING, "profiling call failed")                                           \
    X(HCCL_E_CCE, "cce call failed")                                                       \
    X(HCCL_E_NETWORK, "network error")                                                     \
    X(HCCL_E_AGAIN, "try again")                                                           \
    X(HCCL_E_REMOTE, "remote rank failed")                                                 \
    X(HCCL_E_SUSPENDING, "communicator suspending")

#endif /* HC_RESULT_H */
