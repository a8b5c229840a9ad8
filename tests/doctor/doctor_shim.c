/*
 * A fault planter for hccl-doctor's tests, loaded with LD_PRELOAD into every rank. It plays a bad
 * link between two ranks of one host, where the real links are all shared memory:
 *
 *   HCCL_DOCTOR_SHIM="slow:1:2,drop:0:3"
 *
 * slow:A:B  rank A's HcclSend to rank B is delayed by 2 ms plus 20 us per KiB (about 50 MB/s), so
 *           the pair A-B has a long latency and a low bandwidth, far outside what load on a shared
 *           machine does to a healthy pair;
 * drop:A:B  rank A's HcclSend to rank B is swallowed (reported as success, never sent), so the
 *           pair never answers.
 *
 * gate:DIR rank 0 stops right after its world communicator is up (HcclCommInitRootInfo returned, so
 *           every rank's connections are open), creates DIR/up and waits up to 60 s for DIR/go:
 *           a test changes the network there (tests/netns/doctor.sh closes a firewall between two
 *           hosts) at a point that is the same in every run. The other ranks wait for rank 0 in
 *           the doctor's first exchange.
 *
 * Only sends on the two-rank communicators the doctor makes per pair are touched (the shim learns
 * them from HcclCreateSubCommConfig): the world communicator stays healthy. A and B are world
 * ranks; this process's world rank is RANK (set by hccl-run).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hccl/hccl.h>

#define MAX_COMMS 256

typedef HcclResult (*send_fn)(void *, uint64_t, HcclDataType, uint32_t, HcclComm, aclrtStream);
typedef HcclResult (*init_fn)(uint32_t, const HcclRootInfo *, uint32_t, HcclComm *);
typedef HcclResult (*subcomm_fn)(HcclComm *, uint32_t, uint32_t *, uint64_t, uint32_t, HcclCommConfig *,
                                 HcclComm *);

static struct {
    HcclComm comm;
    uint32_t peer_world[2];
} pairs[MAX_COMMS];
static int npairs;

/* The fault for sends from this rank to world rank `to`: 0 none, 's' slow, 'd' drop. */
static int fault_for(uint32_t to)
{
    const char *spec = getenv("HCCL_DOCTOR_SHIM"), *rank = getenv("RANK");
    char buf[256], *tok, *save = NULL;
    int found = 0;

    if (spec == NULL || rank == NULL)
        return 0;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (tok = strtok_r(buf, ",", &save); tok != NULL && !found; tok = strtok_r(NULL, ",", &save)) {
        char kind[8];
        unsigned a, b;
        if (sscanf(tok, "%7[a-z]:%u:%u", kind, &a, &b) == 3 && a == (unsigned)atoi(rank) && b == to)
            found = strcmp(kind, "slow") == 0 ? 's' : strcmp(kind, "drop") == 0 ? 'd' : 0;
    }
    return found;
}

/* The directory of a gate:DIR entry, or NULL. */
static const char *gate_dir(char *buf, size_t len)
{
    const char *spec = getenv("HCCL_DOCTOR_SHIM"), *at = spec != NULL ? strstr(spec, "gate:") : NULL;

    if (at == NULL)
        return NULL;
    snprintf(buf, len, "%s", at + 5);
    buf[strcspn(buf, ",")] = '\0';
    return buf;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm)
{
    init_fn real = (init_fn)dlsym(RTLD_NEXT, "HcclCommInitRootInfo");
    HcclResult res = real(nRanks, rootInfo, rank, comm);
    char dir[200], path[256];
    FILE *f;

    if (res != HCCL_SUCCESS || rank != 0 || gate_dir(dir, sizeof(dir)) == NULL)
        return res;
    snprintf(path, sizeof(path), "%s/up", dir);
    f = fopen(path, "w");
    if (f != NULL)
        fclose(f);
    snprintf(path, sizeof(path), "%s/go", dir);
    /* The test's own step takes well under a second; 60 s is its bound, not a wait for time. */
    for (int i = 0; i < 3000 && access(path, F_OK) != 0; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return res;
}

HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds, uint64_t subCommId,
                                   uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm)
{
    subcomm_fn real = (subcomm_fn)dlsym(RTLD_NEXT, "HcclCreateSubCommConfig");
    HcclResult res = real(comm, rankNum, rankIds, subCommId, subCommRankId, config, subComm);

    if (res == HCCL_SUCCESS && rankNum == 2 && npairs < MAX_COMMS) {
        pairs[npairs].comm = *subComm;
        pairs[npairs].peer_world[0] = rankIds[0];
        pairs[npairs].peer_world[1] = rankIds[1];
        npairs++;
    }
    return res;
}

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                    aclrtStream stream)
{
    send_fn real = (send_fn)dlsym(RTLD_NEXT, "HcclSend");

    for (int i = 0; i < npairs; i++) {
        int fault;
        if (pairs[i].comm != comm || destRank > 1)
            continue;
        fault = fault_for(pairs[i].peer_world[destRank]);
        if (fault == 'd')
            return HCCL_SUCCESS;
        if (fault == 's') {
            uint64_t bytes = count * (dataType == HCCL_DATA_TYPE_UINT8 ? 1 : 8);
            uint64_t us = 2000 + bytes / 1024 * 20;
            struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return real(sendBuf, count, dataType, destRank, comm, stream);
}
