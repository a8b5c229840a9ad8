/*
 * Error propagation (STYLE.md 7-8): one result type inside, HcclResult. The place that detects an
 * error logs it with its cause; HC_CHECK and HC_CHECK_GOTO only propagate, leaving a file:line
 * breadcrumb at debug level.
 */
#ifndef HC_CHECK_H
#define HC_CHECK_H

#include <hccl/hccl_types.h>

#include "hc_log.h"

/* Name of a result ("HCCL_E_PARA"), from the same X-macro as HcclGetErrorString. */
const char *hc_result_name(HcclResult res);

/* The HcclResult for an errno value: the one place errno is mapped. */
HcclResult hc_result_from_errno(int err);

#define HC_CHECK(call)                                                           \
    do {                                                                         \
        HcclResult hc_check_res_ = (call);                                       \
        if (hc_check_res_ != HCCL_SUCCESS) {                                     \
            HC_DEBUG("%s -> %s", #call, hc_result_name(hc_check_res_));          \
            return hc_check_res_;                                                \
        }                                                                        \
    } while (0)

#define HC_CHECK_GOTO(call, res, label)                                          \
    do {                                                                         \
        (res) = (call);                                                          \
        if ((res) != HCCL_SUCCESS) {                                             \
            HC_DEBUG("%s -> %s", #call, hc_result_name(res));                    \
            goto label;                                                          \
        }                                                                        \
    } while (0)

/* Invariants (not user mistakes): abort with the location. Always on. */
#define hc_assert(cond)                                                          \
    do {                                                                         \
        if (!(cond))                                                             \
            hc_assert_fail(#cond, __FILE__, __LINE__);                           \
    } while (0)

_Noreturn void hc_assert_fail(const char *expr, const char *file, int line);

#endif /* HC_CHECK_H */
