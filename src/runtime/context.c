/*
 * Contexts. In CANN a context holds a device's resources for the threads that make it current;
 * aclrtSetDevice makes the device's default context current, aclrtCreateContext makes a new one.
 * On a host, what a context selects is its device: making a context current makes its device the
 * thread's current device, so streams created and NULL-stream calls made afterwards belong to it.
 *
 * Contexts are registry objects (handle.c), so a destroyed or forged context handle is refused
 * without touching memory. The default contexts, one per device, are made on first request and
 * live as long as the process.
 */
#include <stdlib.h>

#include "hc_compiler.h"
#include "hc_log.h"
#include "hc_rt.h"

typedef struct {
    hc_rt_object_t base; /* first: the registry holds contexts by their base */
    int32_t device;
    int is_default;
} context_t;

/* The context the thread made current with aclrtSetCurrentContext / aclrtCreateContext; NULL:
 * the current device's default context. */
static HC_TLS_FAST void *tls_context;

static pthread_mutex_t defaults_lock = PTHREAD_MUTEX_INITIALIZER;
static void *default_contexts[HC_RT_MAX_DEVICES];

static void context_release(hc_rt_object_t *obj)
{
    free(obj);
}

static aclError context_new(int32_t device, int is_default, void **handle_p)
{
    context_t *ctx = calloc(1, sizeof(*ctx));
    aclError res;

    if (ctx == NULL) {
        HC_ERROR("cannot create a context on device %d: out of memory", device);
        return ACL_ERROR_BAD_ALLOC;
    }
    *ctx = (context_t){.base = {.kind = HC_RT_KIND_CONTEXT, .release = context_release},
                       .device = device, .is_default = is_default};
    atomic_init(&ctx->base.refs, 1);
    res = hc_rt_handle_register(&ctx->base);
    if (res != ACL_SUCCESS) {
        free(ctx);
        return res;
    }
    *handle_p = ctx->base.handle;
    return ACL_SUCCESS;
}

/* The device of a live context; ACL_ERROR_RT_INVALID_HANDLE (not logged) for anything else. */
static aclError lookup_device(void *handle, int32_t *device_p, int *is_default_p)
{
    hc_rt_object_t *obj;
    context_t *ctx;

    if (hc_rt_handle_lookup(handle, HC_RT_KIND_CONTEXT, &obj) != ACL_SUCCESS)
        return ACL_ERROR_RT_INVALID_HANDLE;
    ctx = (context_t *)obj;
    *device_p = ctx->device;
    if (is_default_p != NULL)
        *is_default_p = ctx->is_default;
    hc_rt_object_unref(obj);
    return ACL_SUCCESS;
}

static aclError context_device(void *handle, const char *call, int32_t *device_p, int *is_default_p)
{
    aclError res = lookup_device(handle, device_p, is_default_p);

    if (res != ACL_SUCCESS)
        HC_ERROR("%s: context %p is not a live context (NULL, destroyed, or never created)", call, handle);
    return res;
}

void hc_rt_context_clear_current(void)
{
    tls_context = NULL;
}

HC_RT_EXPORT aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)
{
    void *handle = NULL; /* set on success (GCC -O3 cannot tell) */
    aclError res;

    if (context == NULL) {
        HC_ERROR("aclrtCreateContext: context is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_device_check(deviceId);
    if (res == ACL_SUCCESS)
        res = context_new(deviceId, 0, &handle);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    hc_rt_device_swap(deviceId);
    tls_context = handle;
    *context = handle;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtDestroyContext(aclrtContext context)
{
    hc_rt_object_t *obj;
    int32_t device;
    int is_default;
    aclError res = context_device(context, "aclrtDestroyContext", &device, &is_default);

    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    if (is_default) {
        HC_ERROR("aclrtDestroyContext: context %p is device %d's default context, which aclrtResetDevice "
                 "releases", context, device);
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    if (hc_rt_handle_unregister(context, HC_RT_KIND_CONTEXT, &obj) != ACL_SUCCESS) {
        HC_ERROR("aclrtDestroyContext: context %p was destroyed by another thread meanwhile", context);
        return hc_rt_ret(ACL_ERROR_RT_INVALID_HANDLE);
    }
    hc_rt_object_unref(obj);
    if (tls_context == context)
        tls_context = NULL;
    return ACL_SUCCESS;
}

HC_RT_EXPORT aclError aclrtSetCurrentContext(aclrtContext context)
{
    int32_t device;
    aclError res = context_device(context, "aclrtSetCurrentContext", &device, NULL);

    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    hc_rt_device_swap(device);
    tls_context = context;
    return ACL_SUCCESS;
}

/* The thread's context if it is still alive and on the current device, else the device's default
 * context, made on first request. */
HC_RT_EXPORT aclError aclrtGetCurrentContext(aclrtContext *context)
{
    int32_t device, ctx_device;
    aclError res;

    if (context == NULL) {
        HC_ERROR("aclrtGetCurrentContext: context is NULL");
        return hc_rt_ret(ACL_ERROR_INVALID_PARAM);
    }
    res = hc_rt_device_current("aclrtGetCurrentContext", &device);
    if (res != ACL_SUCCESS)
        return hc_rt_ret(res);
    if (tls_context != NULL && lookup_device(tls_context, &ctx_device, NULL) == ACL_SUCCESS && ctx_device == device) {
        *context = tls_context;
        return ACL_SUCCESS;
    }
    pthread_mutex_lock(&defaults_lock);
    if (default_contexts[device] == NULL)
        res = context_new(device, 1, &default_contexts[device]);
    *context = default_contexts[device];
    pthread_mutex_unlock(&defaults_lock);
    return hc_rt_ret(res);
}
