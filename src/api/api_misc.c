/* HcclCommInitAll. */
#include <pthread.h>
#include <stdlib.h>

#include "hc_api.h"
#include "hc_boot.h"
#include "hc_check.h"

/* HcclCommInitAll: one thread per device joins a root info made here. */
typedef struct {
    const HcclRootInfo *info;
    uint32_t ndev;
    uint32_t rank;
    int32_t device;
    HcclComm comm;
    HcclResult res;
} init_all_arg_t;

static void *init_all_rank(void *p)
{
    init_all_arg_t *arg = p;

    if (aclrtSetDevice(arg->device) != ACL_SUCCESS) {
        arg->res = HCCL_E_RUNTIME;
        return NULL;
    }
    arg->res = HcclCommInitRootInfo(arg->ndev, arg->info, arg->rank, &arg->comm);
    return NULL;
}

static HcclResult check_devices(uint32_t ndev, const int32_t *devices)
{
    for (uint32_t i = 0; i < ndev; i++) {
        for (uint32_t j = 0; j < i; j++) {
            if (devices[i] == devices[j]) {
                HC_ERROR("HcclCommInitAll: device %d is listed twice (positions %u and %u)", devices[i], j, i);
                return HCCL_E_PARA;
            }
        }
    }
    return HCCL_SUCCESS;
}

static HcclResult run_init_threads(init_all_arg_t *args, uint32_t ndev)
{
    pthread_t *threads = calloc(ndev, sizeof(*threads));
    uint32_t started = 0;
    HcclResult res = HCCL_SUCCESS;

    if (threads == NULL)
        return HCCL_E_MEMORY;
    for (; started < ndev; started++) {
        if (pthread_create(&threads[started], NULL, init_all_rank, &args[started]) != 0) {
            HC_ERROR("HcclCommInitAll: cannot start thread %u", started);
            res = HCCL_E_SYSCALL;
            break;
        }
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    for (uint32_t i = 0; i < started && res == HCCL_SUCCESS; i++)
        res = args[i].res;
    return res;
}

HC_API_EXPORT HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms)
{
    HcclRootInfo info;
    init_all_arg_t *args;
    HcclResult res;

    if (devices == NULL || comms == NULL) {
        HC_ERROR("HcclCommInitAll: %s is NULL", devices == NULL ? "devices" : "comms");
        return HCCL_E_PTR;
    }
    if (ndev == 0) {
        HC_ERROR("HcclCommInitAll: ndev is 0");
        return HCCL_E_PARA;
    }
    HC_CHECK(check_devices(ndev, devices));
    HC_CHECK(hc_boot_root_create(&info, 1)); /* threads of this process: loopback */
    args = calloc(ndev, sizeof(*args));
    if (args == NULL)
        return HCCL_E_MEMORY;
    for (uint32_t i = 0; i < ndev; i++)
        args[i] = (init_all_arg_t){.info = &info, .ndev = ndev, .rank = i, .device = devices[i]};
    res = run_init_threads(args, ndev);
    for (uint32_t i = 0; i < ndev; i++) {
        if (res != HCCL_SUCCESS && args[i].comm != NULL)
            HcclCommDestroy(args[i].comm);
        comms[i] = res == HCCL_SUCCESS ? args[i].comm : NULL;
    }
    free(args);
    return res;
}
