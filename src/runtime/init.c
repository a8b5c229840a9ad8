/*
 * Runtime initialisation, versions and the thread's last error. Nothing on a host needs aclInit to
 * have been called: devices, memory and streams are created on first use. aclInit and aclFinalize
 * keep CANN's state machine (and error codes) so that programs that check them behave the same,
 * and finalising releases every stream.
 *
 * CANN's state machine: aclInit counts references (a repeated aclInit adds one and returns
 * ACL_ERROR_REPEAT_INITIALIZE); aclFinalize finalises unless it already did since the last
 * aclInit, including before any aclInit (hccl_test -h finalises without ever initialising, and
 * CANN answers ACL_SUCCESS); aclFinalizeReference drops one reference and finalises on the last.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hc_compiler.h"
#include "hc_config.h"
#include "hc_log.h"
#include "hc_rt.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t init_refs;   /* aclInit references */
static int finalized;        /* aclFinalize ran since the last aclInit (CANN starts at 0) */

static HC_TLS_FAST aclError tls_last_error;

aclError hc_rt_ret(aclError err)
{
    if (err != ACL_SUCCESS)
        tls_last_error = err;
    return err;
}
/* Set by aclInit, or once the missing aclInit was reported: the check on the device path is then
 * one relaxed load. */
static atomic_int init_seen;

/* The configuration file is CANN's (dump and profiling options); none of it applies to a host, so
 * it is only checked to exist, as CANN does before parsing it. */
static aclError check_config_file(const char *path)
{
    FILE *file;

    if (path == NULL || path[0] == '\0')
        return ACL_SUCCESS;
    file = fopen(path, "r");
    if (file == NULL) {
        int err = errno; /* before logging, which may change errno */

        HC_ERROR("aclInit: cannot open the configuration file %s: %s", path, strerror(err));
        return ACL_ERROR_INVALID_FILE;
    }
    fclose(file);
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclInit(const char *configPath)
{
    aclError res;

    pthread_mutex_lock(&init_lock);
    if (init_refs > 0) {
        init_refs++;
        pthread_mutex_unlock(&init_lock);
        HC_INFO("aclInit was called again without aclFinalize: %llu references now",
                (unsigned long long)init_refs);
        return hc_rt_ret(ACL_ERROR_REPEAT_INITIALIZE);
    }
    res = check_config_file(configPath);
    if (res == ACL_SUCCESS) {
        init_refs = 1;
        finalized = 0;
        atomic_store(&init_seen, 1);
    }
    pthread_mutex_unlock(&init_lock);
    return hc_rt_ret(res);
}

/* Release every stream (lock held). Memory from aclrtMalloc stays valid: a program may free it
 * after finalising. */
static aclError finalize_locked(void)
{
    aclError res;

    hc_rt_device_forget_defaults();
    res = hc_rt_stream_destroy_all();
    hc_rt_prof_finalize_quietly();
    finalized = 1;
    init_refs = 0;
    return res;
}

/*
 * CANN answers a device call made before aclInit with ACL_ERROR_UNINITIALIZE. hostccl needs no
 * initialisation and goes on, but says so once per process: a program that forgets aclInit here
 * would fail on an NPU.
 */
void hc_rt_init_check(const char *call)
{
    if (atomic_load_explicit(&init_seen, memory_order_relaxed) || atomic_exchange(&init_seen, 1))
        return;
    HC_WARN("%s was called before aclInit: CANN refuses that with ACL_ERROR_UNINITIALIZE (100001); hostccl "
            "goes on, but call aclInit(NULL) first so that the program also runs on Ascend", call);
}

/* Do not call it while other threads still use streams. */
HC_RT_EXPORT aclError aclFinalize(void)
{
    aclError res;

    pthread_mutex_lock(&init_lock);
    if (finalized) {
        pthread_mutex_unlock(&init_lock);
        HC_ERROR("aclFinalize was called again without aclInit in between");
        return hc_rt_ret(ACL_ERROR_REPEAT_FINALIZE);
    }
    res = finalize_locked();
    pthread_mutex_unlock(&init_lock);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclFinalizeReference(uint64_t *refCount)
{
    aclError res = ACL_SUCCESS;

    pthread_mutex_lock(&init_lock);
    if (init_refs == 0) {
        pthread_mutex_unlock(&init_lock);
        if (refCount != NULL)
            *refCount = 0;
        HC_ERROR("aclFinalizeReference: no aclInit reference is left (called too often, or without aclInit)");
        return hc_rt_ret(ACL_ERROR_REPEAT_FINALIZE);
    }
    if (init_refs > 1)
        init_refs--;
    else
        res = finalize_locked();
    if (refCount != NULL)
        *refCount = init_refs;
    pthread_mutex_unlock(&init_lock);
    return hc_rt_ret(res);
}

HC_RT_EXPORT aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)
{
    if (majorVersion == NULL || minorVersion == NULL || patchVersion == NULL) {
        HC_ERROR("aclrtGetVersion: a version pointer is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}

HC_RT_EXPORT const char *aclGetRecentErrMsg(void)
{
    return hc_log_last_error();
}

/* One level exists (the thread's), as in CANN. */
static aclError check_level(aclrtLastErrLevel level, const char *call)
{
    if (level != ACL_RT_THREAD_LEVEL) {
        HC_ERROR("%s: level %d is not ACL_RT_THREAD_LEVEL", call, (int)level);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtGetLastError(aclrtLastErrLevel level)
{
    aclError last;

    if (check_level(level, "aclrtGetLastError") != ACL_SUCCESS)
        return ACL_ERROR_INVALID_PARAM;
    last = tls_last_error;
    tls_last_error = ACL_SUCCESS;
    return last;
}

HC_RT_EXPORT aclError aclrtPeekAtLastError(aclrtLastErrLevel level)
{
    if (check_level(level, "aclrtPeekAtLastError") != ACL_SUCCESS)
        return ACL_ERROR_INVALID_PARAM;
    return tls_last_error;
}

HC_RT_EXPORT aclError aclrtGetRunMode(aclrtRunMode *runMode)
{
    if (runMode == NULL) {
        HC_ERROR("aclrtGetRunMode: runMode is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

HC_RT_EXPORT const char *aclrtGetSocName(void)
{
    return hc_config_str(HC_CFG_SOC_NAME);
}

/* ---- fork() ---------------------------------------------------------------------------------- */

void hc_rt_init_fork_prepare(void)
{
    pthread_mutex_lock(&init_lock);
}

void hc_rt_init_fork_parent(void)
{
    pthread_mutex_unlock(&init_lock);
}

/* The child keeps the parent's aclInit: it runs the same program, which initialised once. */
void hc_rt_init_fork_child(void)
{
    pthread_mutex_unlock(&init_lock);
}
