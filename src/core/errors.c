/* Result names, descriptions and the errno mapping (the one place errno becomes HcclResult). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <hccl/hccl_types.h>

#include "hc_check.h"
#include "hc_result.h"

const char *hc_result_name(HcclResult res)
{
    switch (res) {
#define NAME_CASE(code, text) \
    case code:                \
        return #code;
        HC_RESULT_MAP(NAME_CASE)
#undef NAME_CASE
    default:
        return "HCCL_E_UNKNOWN";
    }
}

HcclResult hc_result_from_errno(int err)
{
    switch (err) {
    case 0:
        return HCCL_SUCCESS;
    case ENOMEM:
    case ENOSPC:
        return HCCL_E_MEMORY;
    case EINVAL:
        return HCCL_E_PARA;
    case ETIMEDOUT:
        return HCCL_E_TIMEOUT;
    case EAGAIN:
        return HCCL_E_AGAIN;
    case ENOENT:
        return HCCL_E_NOT_FOUND;
    case EACCES:
    case EPERM:
        return HCCL_E_UNAVAIL;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return HCCL_E_TCP_CONNECT;
    default:
        return HCCL_E_SYSCALL;
    }
}

_Noreturn void hc_assert_fail(const char *expr, const char *file, int line)
{
    hc_log_write(HC_LOG_ERROR, file, line, "assertion failed: %s (%s:%d)", expr, file, line);
    abort();
}
