/*
 * HcclHostGetLinkInfo through the public library (linked with libhccl.so), on every rank of an
 * hccl-run job:
 *
 *   link_info shm       the job's ranks share a host: every peer is "shm" or "shm+cma", the same
 *                       word on every rank (the engine probes cross-memory attach once, for all)
 *   link_info tcp N     the job runs with HOSTCCL_TRANSPORT=tcp and HOSTCCL_NSOCKS=N: every peer is
 *                       "tcp ADDR:PORT xN", and every rank names rank r by the same ADDR:PORT (r's
 *                       listener, not its own)
 *
 * Both: "self" for this rank, the argument errors (NULL communicator or buffer, a peer out of
 * range, a buffer too small: nothing written), a destroyed communicator refused, and the answer
 * unchanged by an operation. Prints one line per rank and exits 0 when all of it holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_host.h>

#define LEN HCCL_HOST_LINK_INFO_MAX

static int fails;

static void expect(int ok, uint32_t rank, const char *what)
{
    if (!ok) {
        fprintf(stderr, "link_info: rank %u: %s\n", rank, what);
        fails++;
    }
}

static HcclComm world(const HcclHostLaunchInfo *launch, aclrtStream *stream_p)
{
    HcclRootInfo root;
    HcclComm comm = NULL;

    memset(&root, 0, sizeof(root));
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice((int32_t)launch->localRank) != ACL_SUCCESS ||
        aclrtCreateStream(stream_p) != ACL_SUCCESS || (launch->rank == 0 && HcclGetRootInfo(&root) != HCCL_SUCCESS) ||
        HcclHostBroadcastRootInfo(&root) != HCCL_SUCCESS ||
        HcclCommInitRootInfo(launch->size, &root, launch->rank, &comm) != HCCL_SUCCESS)
        return NULL;
    return comm;
}

/* Every rank's row of link texts to every rank. */
static char *gather_rows(HcclComm comm, aclrtStream stream, const char *row, uint32_t n)
{
    char *send = NULL, *recv = NULL, *all = malloc((size_t)n * n * LEN);

    if (all == NULL || aclrtMalloc((void **)&send, (size_t)n * LEN, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv, (size_t)n * n * LEN, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS)
        return NULL;
    memcpy(send, row, (size_t)n * LEN);
    if (HcclAllGather(send, recv, (uint64_t)n * LEN, HCCL_DATA_TYPE_UINT8, comm, stream) != HCCL_SUCCESS ||
        aclrtSynchronizeStream(stream) != ACL_SUCCESS)
        return NULL;
    memcpy(all, recv, (size_t)n * n * LEN);
    aclrtFree(send);
    aclrtFree(recv);
    return all;
}

static void check_args(HcclComm comm, uint32_t me, uint32_t n)
{
    char buf[LEN], tiny[3] = {'x', 'y', 'z'};

    expect(HcclHostGetLinkInfo(NULL, 0, buf, sizeof(buf)) == HCCL_E_PTR, me, "NULL comm is not HCCL_E_PTR");
    expect(HcclHostGetLinkInfo(comm, 0, NULL, sizeof(buf)) == HCCL_E_PTR, me, "NULL buf is not HCCL_E_PTR");
    expect(HcclHostGetLinkInfo(comm, n, buf, sizeof(buf)) == HCCL_E_PARA, me, "peer == size is not HCCL_E_PARA");
    expect(HcclHostGetLinkInfo(comm, (me + 1) % n, tiny, sizeof(tiny)) == HCCL_E_PARA, me,
           "a 3-byte buffer is not HCCL_E_PARA");
    expect(memcmp(tiny, "xyz", 3) == 0, me, "a failed call wrote into the buffer");
    expect(HcclHostGetLinkInfo(comm, me, buf, 5) == HCCL_SUCCESS && strcmp(buf, "self") == 0, me,
           "this rank is not \"self\" (in exactly 5 bytes)");
}

/* "shm", "shm+cma" or "shm+cma malloc" for every peer, the same on every rank. */
static void check_shm(const char *all, uint32_t me, uint32_t n)
{
    const char *first = &all[1 * LEN]; /* rank 0's view of rank 1 */

    expect(strcmp(first, "shm") == 0 || strcmp(first, "shm+cma") == 0 || strcmp(first, "shm+cma malloc") == 0, me,
           "a peer is neither shm, shm+cma nor shm+cma malloc");
    for (uint32_t a = 0; a < n; a++)
        for (uint32_t b = 0; b < n; b++)
            if (a != b)
                expect(strcmp(&all[((size_t)a * n + b) * LEN], first) == 0, me, "ranks describe shm links differently");
}

/* "tcp ADDR:PORT xN" for every peer; rank r named alike by everyone; no two ranks share ADDR:PORT. */
static void check_tcp(const char *all, uint32_t me, uint32_t n, unsigned nsocks)
{
    for (uint32_t b = 0; b < n; b++) {
        const char *ref = &all[((size_t)(b == 0 ? 1 : 0) * n + b) * LEN];
        char addr[LEN];
        unsigned k = 0, port = 0;
        const char *colon;
        if (sscanf(ref, "tcp %127s x%u", addr, &k) != 2 || k != nsocks || (colon = strrchr(addr, ':')) == NULL ||
            sscanf(colon + 1, "%u", &port) != 1 || port == 0 || port > 65535) {
            fprintf(stderr, "link_info: rank %u: \"%s\" is not \"tcp ADDR:PORT x%u\"\n", me, ref, nsocks);
            fails++;
            continue;
        }
        for (uint32_t a = 0; a < n; a++)
            if (a != b)
                expect(strcmp(&all[((size_t)a * n + b) * LEN], ref) == 0, me, "two ranks name a peer differently");
        for (uint32_t c = 0; c < b; c++)
            expect(strcmp(&all[((size_t)(c == 0 ? 1 : 0) * n + c) * LEN], ref) != 0 || n == 2, me,
                   "two ranks have the same listening address");
    }
}

int main(int argc, char **argv)
{
    HcclHostLaunchInfo launch;
    aclrtStream stream = NULL;
    HcclComm comm;
    char *row, *all, again[LEN];
    int tcp = argc >= 2 && strcmp(argv[1], "tcp") == 0;
    uint32_t me, n;

    if (argc < 2 || (tcp && argc < 3) || HcclHostGetLaunchInfo(&launch) != HCCL_SUCCESS) {
        fprintf(stderr, "usage: hccl-run -n N link_info shm | tcp NSOCKS\n");
        return 2;
    }
    me = launch.rank;
    n = launch.size;
    comm = world(&launch, &stream);
    row = calloc(n, LEN);
    if (comm == NULL || row == NULL || n < 2) {
        fprintf(stderr, "link_info: rank %u: no communicator of at least 2 ranks\n", me);
        return 1;
    }
    for (uint32_t p = 0; p < n; p++)
        expect(HcclHostGetLinkInfo(comm, p, &row[(size_t)p * LEN], LEN) == HCCL_SUCCESS, me, "a peer's link failed");
    check_args(comm, me, n);
    all = gather_rows(comm, stream, row, n);
    expect(all != NULL, me, "the rows could not be gathered");
    if (all != NULL && tcp)
        check_tcp(all, me, n, (unsigned)atoi(argv[2]));
    else if (all != NULL)
        check_shm(all, me, n);
    /* An operation ran (the AllGather): the answer is the same. */
    expect(HcclHostGetLinkInfo(comm, (me + 1) % n, again, LEN) == HCCL_SUCCESS &&
               strcmp(again, &row[(size_t)((me + 1) % n) * LEN]) == 0,
           me, "the answer changed after an operation");
    printf("link_info: rank %u of %u: %s\n", me, n, &row[(size_t)((me + 1) % n) * LEN]);
    HcclCommDestroy(comm);
    expect(HcclHostGetLinkInfo(comm, 0, again, LEN) == HCCL_E_PARA, me, "a destroyed communicator is not HCCL_E_PARA");
    free(row);
    free(all);
    aclrtDestroyStream(stream);
    aclFinalize();
    return fails == 0 ? 0 : 1;
}
