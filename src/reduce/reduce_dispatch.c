/*
 * Run-time choice of the reduction kernels (DESIGN.md 6): hc_reduce_multi forwards to the kernel
 * set chosen once per process from HOSTCCL_SIMD and the CPU's features.
 *
 * The choice is made under pthread_once, so the variable is read and an unknown value is warned
 * about exactly once however many threads reduce first. The chosen set is published through an
 * atomic pointer, which lets the fast path skip pthread_once after the first call and lets tests
 * choose again; a call already running keeps the set it loaded, and every set gives the same
 * results, so a change in between is harmless.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <strings.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_dtype.h"
#include "hc_log.h"
#include "hc_reduce.h"
#include "reduce_kernels.h"

/* Best first: "auto" takes the first one the CPU supports. The scalar set is always last. */
static const hc_reduce_kernel_ops_t *const kernel_sets[] = {
#if HC_REDUCE_HAVE_AVX2
    &hc_reduce_avx512bf16_ops,
    &hc_reduce_avx2_ops,
#endif
    &hc_reduce_scalar_ops,
};

#define KERNEL_SET_COUNT (sizeof(kernel_sets) / sizeof(kernel_sets[0]))

static _Atomic(const hc_reduce_kernel_ops_t *) active_kernels;
static pthread_once_t select_once = PTHREAD_ONCE_INIT;

static const hc_reduce_kernel_ops_t *best_supported(void)
{
    for (size_t i = 0; i < KERNEL_SET_COUNT; i++)
        if (kernel_sets[i]->supported())
            return kernel_sets[i];
    return &hc_reduce_scalar_ops;
}

static const hc_reduce_kernel_ops_t *find_by_name(const char *name)
{
    for (size_t i = 0; i < KERNEL_SET_COUNT; i++)
        if (strcasecmp(kernel_sets[i]->name, name) == 0)
            return kernel_sets[i];
    return NULL;
}

/* The set a HOSTCCL_SIMD value asks for. NULL or "auto" means the best the CPU runs; a named set
 * the CPU cannot run, or a name nobody knows, is warned about and replaced by the best one. */
static const hc_reduce_kernel_ops_t *choose(const char *value)
{
    const hc_reduce_kernel_ops_t *named;

    if (value == NULL || strcasecmp(value, "auto") == 0)
        return best_supported();
    named = find_by_name(value);
    if (named == NULL) {
        HC_WARN("HOSTCCL_SIMD=%s is not auto, avx512bf16, avx2 or scalar; using auto (%s kernels)", value,
                best_supported()->name);
        return best_supported();
    }
    if (!named->supported()) {
        HC_WARN("HOSTCCL_SIMD=%s but this CPU lacks the instructions it needs; using auto (%s kernels)",
                value, best_supported()->name);
        return best_supported();
    }
    return named;
}

static void select_from_config(void)
{
    const hc_reduce_kernel_ops_t *chosen = choose(hc_config_str(HC_CFG_SIMD));

    HC_INFO("reduction kernels: %s", chosen->name);
    atomic_store_explicit(&active_kernels, chosen, memory_order_release);
}

static const hc_reduce_kernel_ops_t *kernels(void)
{
    const hc_reduce_kernel_ops_t *k = atomic_load_explicit(&active_kernels, memory_order_acquire);

    if (k != NULL)
        return k;
    pthread_once(&select_once, select_from_config);
    return atomic_load_explicit(&active_kernels, memory_order_acquire);
}

/* Below one vector register of data the SIMD kernels only pad a tail through stack buffers (~120
 * instructions for an 8-byte fp32 sum against ~30 in the scalar loop); every kernel set gives the
 * same results, so tiny reductions take the scalar one. */
#define TINY_REDUCE_BYTES 32

void hc_reduce_multi(HcclDataType dtype, HcclReduceOp op, void *dst, const void *const *srcs, size_t nsrc,
                     size_t count)
{
    hc_assert(nsrc >= 1);
    if (count * hc_dtype_size(dtype) < TINY_REDUCE_BYTES) {
        hc_reduce_few_scalar(dtype, op, dst, srcs, nsrc, count);
        return;
    }
    kernels()->multi(dtype, op, dst, srcs, nsrc, count);
}

const char *hc_reduce_kernel_name(void)
{
    return kernels()->name;
}

const char *hc_reduce_select_for_test(const char *value)
{
    const hc_reduce_kernel_ops_t *chosen;

    /* Run the one-time selection first so that it cannot later overwrite the test's choice. */
    (void)kernels();
    chosen = choose(value != NULL ? value : hc_config_str(HC_CFG_SIMD));
    atomic_store_explicit(&active_kernels, chosen, memory_order_release);
    return chosen->name;
}
