/*
 * Which engine serves a communicator (DESIGN.md 5), and the group views engines run over.
 *
 * The factories are tried in order; the first that fits the communicator's peer table builds the
 * engine. The intra-host engine fits when every rank shares this host; the hierarchical engine
 * (shared memory inside each host, TCP schedules between hosts) fits everything else. A shared
 * segment that the ranks of a host cannot map (ranks in different containers) fails alike on every
 * rank with HCCL_E_UNAVAIL, and the next factory is asked to do without shared memory.
 */
#include <stdlib.h>
#include <string.h>

#include "hc_algo.h"
#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_shm.h"

static const hc_engine_factory_t *const factories[] = {
    &hc_shm_engine_factory,
    &hc_hier_engine_factory,
};

HcclResult hc_group_init(hc_group_t *group, const hc_group_t *from, const uint32_t *ranks, uint32_t n)
{
    uint32_t mine = hc_group_my_rank(from);

    *group = *from;
    group->ranks = malloc((n ? n : 1) * sizeof(*group->ranks));
    if (group->ranks == NULL) {
        HC_ERROR("out of memory making a group of %u ranks", n);
        return HCCL_E_MEMORY;
    }
    memcpy(group->ranks, ranks, n * sizeof(*ranks));
    group->size = n;
    group->me = hc_group_index_of(group, mine);
    if (group->me == UINT32_MAX) {
        free(group->ranks);
        group->ranks = NULL;
        HC_ERROR("internal error: rank %u is not a member of the group it joins", mine);
        return HCCL_E_INTERNAL;
    }
    return HCCL_SUCCESS;
}

void hc_group_fini(hc_group_t *group)
{
    free(group->ranks);
    group->ranks = NULL;
    group->size = 0;
}

uint32_t hc_group_index_of(const hc_group_t *group, uint32_t r)
{
    for (uint32_t i = 0; i < group->size; i++)
        if (group->ranks[i] == r)
            return i;
    return UINT32_MAX;
}

int hc_group_same_host(const hc_group_t *world, uint32_t a, uint32_t b)
{
    return memcmp(world->peers[a].host_id, world->peers[b].host_id, HC_HOST_ID_BYTES) == 0;
}

/* The whole communicator as a group: index i is rank i. */
static HcclResult world_group(hc_comm_t *comm, hc_group_t *world)
{
    hc_group_t base = {
        .size = 1,
        .me = 0,
        .ranks = &comm->rank,
        .comm_size = comm->nranks,
        .peers = comm->peers,
        .settings = &comm->settings,
        .aborting = &comm->aborting,
        .lock = &comm->exec_lock,
        .token = comm->token,
    };
    uint32_t *all = malloc(comm->nranks * sizeof(*all));
    HcclResult res;

    if (all == NULL) {
        HC_ERROR("out of memory making the group of %u ranks", comm->nranks);
        return HCCL_E_MEMORY;
    }
    for (uint32_t r = 0; r < comm->nranks; r++)
        all[r] = r;
    res = hc_group_init(world, &base, all, comm->nranks);
    free(all);
    return res;
}

HcclResult hc_engine_attach(hc_comm_t *comm, hc_boot_t *boot)
{
    hc_group_t world;
    unsigned flags = 0;
    HcclResult res = HCCL_E_NOT_SUPPORT;

    HC_CHECK(world_group(comm, &world));
    for (size_t i = 0; i < sizeof(factories) / sizeof(factories[0]); i++) {
        if (!factories[i]->fits(&world, flags))
            continue;
        res = factories[i]->create(&world, boot, flags, &comm->engine);
        if (res != HCCL_E_UNAVAIL || (flags & HC_ENGINE_NO_SHM))
            break;
        HC_WARN("the ranks of a host cannot share memory (see above): using TCP between all ranks");
        flags |= HC_ENGINE_NO_SHM;
    }
    hc_group_fini(&world);
    return res;
}
