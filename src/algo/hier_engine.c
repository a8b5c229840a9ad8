/* The hierarchical engine: placeholder while the TCP transport is written. */
#include <stdlib.h>

#include "hc_algo.h"
#include "hc_check.h"

typedef struct {
    hc_engine_t base;
} hier_engine_t;

static void hier_destroy(hc_engine_t *engine)
{
    hc_group_fini(&engine->group);
    free(engine);
}

static const hc_engine_ops_t hier_ops = {
    .name = "hier",
    .destroy = hier_destroy,
};

static int hier_fits(const hc_group_t *world, unsigned flags)
{
    (void)world, (void)flags;
    return 1;
}

static HcclResult hier_create(const hc_group_t *world, hc_boot_t *boot, unsigned flags, hc_engine_t **engine_p)
{
    hier_engine_t *eng = calloc(1, sizeof(*eng));

    (void)boot, (void)flags;
    if (eng == NULL)
        return HCCL_E_MEMORY;
    eng->base.ops = &hier_ops;
    if (hc_group_init(&eng->base.group, world, world->ranks, world->size) != HCCL_SUCCESS) {
        free(eng);
        return HCCL_E_MEMORY;
    }
    *engine_p = &eng->base;
    return HCCL_SUCCESS;
}

const hc_engine_factory_t hc_hier_engine_factory = {
    .name = "hier",
    .fits = hier_fits,
    .create = hier_create,
};
