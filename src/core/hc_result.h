/* The X-macro of HcclResult: names and CANN's one-line texts (what CANN's HcclGetErrorString
 * returns), used by HcclGetErrorString and hc_result_name so that the strings never drift from
 * the enum. CANN has no text for HCCL_E_IN_STATUS and answers "unknown err" for it. */
#ifndef HC_RESULT_H
#define HC_RESULT_H

#define HC_RESULT_MAP(X)                                                                   \
    X(HCCL_SUCCESS, "no error")                                                            \
    X(HCCL_E_PARA, "parameter error")                                                      \
    X(HCCL_E_PTR, "empty pointer")                                                         \
    X(HCCL_E_MEMORY, "memory error")                                                       \
    X(HCCL_E_INTERNAL, "internal error")                                                   \
    X(HCCL_E_NOT_SUPPORT, "not support feature")                                           \
    X(HCCL_E_NOT_FOUND, "not found specific resource")                                     \
    X(HCCL_E_UNAVAIL, "resource unavailable")                                              \
    X(HCCL_E_SYSCALL, "call system interface error")                                       \
    X(HCCL_E_TIMEOUT, "timeout")                                                           \
    X(HCCL_E_OPEN_FILE_FAILURE, "open file fail")                                          \
    X(HCCL_E_TCP_CONNECT, "tcp connect fail")                                              \
    X(HCCL_E_ROCE_CONNECT, "roce connect fail")                                            \
    X(HCCL_E_TCP_TRANSFER, "tcp transfer fail")                                            \
    X(HCCL_E_ROCE_TRANSFER, "roce transfer fail")                                          \
    X(HCCL_E_RUNTIME, "call runtime api fail")                                             \
    X(HCCL_E_DRV, "call driver api fail")                                                  \
    X(HCCL_E_PROFILING, "call profiling api fail")                                         \
    X(HCCL_E_CCE, "call cce api fail")                                                     \
    X(HCCL_E_NETWORK, "call network api fail")                                             \
    X(HCCL_E_AGAIN, "try again")                                                           \
    X(HCCL_E_REMOTE, "error cqe")                                                          \
    X(HCCL_E_SUSPENDING, "error communicator suspending")                                  \
    X(HCCL_E_OPRETRY_FAIL, "retry constraint")                                             \
    X(HCCL_E_OOM, "out of memory")                                                         \
    X(HCCL_E_IN_STATUS, "unknown err")

#endif /* HC_RESULT_H */
