/* The ways to broadcast rank 0's bytes without MPI (hc_launch.h), and the first of them: the store. */
#include <string.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_launch.h"
#include "hc_store.h"
#include "hc_time.h"

static const hc_launch_bcast_ops_t *const ways[] = {
    &hc_launch_bcast_store,
    &hc_launch_bcast_pmix,
    &hc_launch_bcast_slurm_local,
};

const hc_launch_bcast_ops_t *hc_launch_bcast_pick(const hc_launch_t *job)
{
    for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++)
        if (ways[i]->fits(job))
            return ways[i];
    return NULL;
}

static int store_fits(const hc_launch_t *job)
{
    return job->store_is_ours && hc_store_client_configured();
}

/* How long a rank waits for rank 0's value before it asks the store whether rank 0 has ended: a
 * dead root is reported within about this long (plus a loopback round trip). */
#define ROOT_EXIT_CHECK_NS (500 * HC_NS_PER_MS)

/* Whether the launcher recorded in the store that rank 0 ended (hc_store_exit_key): 1 with how in
 * `how`, else 0. */
static int root_has_ended(char *how, size_t len)
{
    char key[HC_STORE_EXIT_KEY_BYTES];
    size_t got = 0;

    hc_store_exit_key(0, key);
    if (hc_store_get(key, how, len - 1, &got, hc_now_ns()) != HCCL_SUCCESS)
        return 0;
    how[got < len ? got : len - 1] = '\0';
    return 1;
}

/* Wait for rank 0's value until the deadline, in slices between which the store is asked whether
 * rank 0 has ended. */
static HcclResult wait_root_value(const char *key, void *buf, size_t cap, size_t *len_p, int64_t deadline)
{
    char how[128];

    for (;;) {
        int64_t slice = hc_now_ns() + ROOT_EXIT_CHECK_NS;
        HcclResult res = hc_store_get(key, buf, cap, len_p, deadline != 0 && slice > deadline ? deadline : slice);

        if (res != HCCL_E_TIMEOUT || hc_deadline_passed(deadline))
            return res;
        if (root_has_ended(how, sizeof(how))) {
            HC_ERROR("\"%s\" will never arrive: rank 0 %s before it published it (rank 0 calls HcclGetRootInfo "
                     "and HcclHostBroadcastRootInfo)", key, how);
            return HCCL_E_REMOTE;
        }
    }
}

/* Every rank but 0 waits for rank 0's value; the result is copied out only when complete. */
static HcclResult store_fetch(const char *key, void *buf, size_t len)
{
    int64_t timeout_s = hc_config_int(HC_CFG_CONNECT_TIMEOUT);
    uint8_t received[HC_STORE_MAX_VALUE];
    size_t got = 0;
    HcclResult res;

    res = wait_root_value(key, received, sizeof(received), &got, hc_deadline_after_s(timeout_s));
    if (res == HCCL_E_TIMEOUT) {
        HC_ERROR("\"%s\" did not arrive from rank 0 within HCCL_CONNECT_TIMEOUT=%lld s; every rank must call "
                 "HcclHostBroadcastRootInfo the same number of times", key, (long long)timeout_s);
        return res;
    }
    HC_CHECK(res);
    if (got != len) {
        HC_ERROR("\"%s\" from the store is %zu bytes, not %zu: is another job using the same store?", key, got,
                 len);
        return HCCL_E_INTERNAL;
    }
    memcpy(buf, received, len);
    return HCCL_SUCCESS;
}

static HcclResult store_bcast(const hc_launch_t *job, const char *key, void *buf, size_t len)
{
    return job->rank == 0 ? hc_store_set(key, buf, len) : store_fetch(key, buf, len);
}

const hc_launch_bcast_ops_t hc_launch_bcast_store = {
    .name = "store",
    .fits = store_fits,
    .bcast = store_bcast,
};
