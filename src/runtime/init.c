/*
 * Runtime initialisation. Nothing on a host needs aclInit to have been called: devices, memory and
 * streams are created on first use. aclInit and aclFinalize keep CANN's state machine (and error
 * codes) so that programs that check them behave the same, and aclFinalize releases every stream.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hc_log.h"
#include "hc_rt.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
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
    if (initialized) {
        pthread_mutex_unlock(&init_lock);
        HC_ERROR("aclInit was called twice without aclFinalize in between");
        return ACL_ERROR_REPEAT_INITIALIZE;
    }
    res = check_config_file(configPath);
    if (res == ACL_SUCCESS) {
        initialized = 1;
        atomic_store(&init_seen, 1);
    }
    pthread_mutex_unlock(&init_lock);
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

/*
 * Synchronise and destroy every stream, the devices' default streams included. Memory from
 * aclrtMalloc stays valid (a program may free it after finalising), and aclInit may be called
 * again. Do not call it while other threads still use streams.
 */
HC_RT_EXPORT aclError aclFinalize(void)
{
    aclError res;

    pthread_mutex_lock(&init_lock);
    if (!initialized) {
        pthread_mutex_unlock(&init_lock);
        HC_ERROR("aclFinalize was called without a matching aclInit (finalised twice?)");
        return ACL_ERROR_REPEAT_FINALIZE;
    }
    hc_rt_device_forget_defaults();
    res = hc_rt_stream_destroy_all();
    initialized = 0;
    pthread_mutex_unlock(&init_lock);
    return res;
}

HC_RT_EXPORT aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion)
{
    if (majorVersion == NULL || minorVersion == NULL || patchVersion == NULL) {
        HC_ERROR("aclrtGetVersion: a version pointer is NULL");
        return ACL_ERROR_INVALID_PARAM;
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
