/*
 * The configuration table. docs/env.md is generated from it (tools/hc_env_doc) and a test checks
 * that the committed file matches.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hc_config.h"
#include "hc_log.h"

#define ROW_INT(id_, name_, def_, min_, max_, help_) \
    [id_] = {.name = name_, .type = HC_CFG_TYPE_INT, .default_value = def_, .min = min_, .max = max_, .help = help_}
#define ROW_BOOL(id_, name_, def_, help_) \
    [id_] = {.name = name_, .type = HC_CFG_TYPE_BOOL, .default_value = def_, .min = 0, .max = 1, .help = help_}
#define ROW_STR(id_, name_, def_, help_) \
    [id_] = {.name = name_, .type = HC_CFG_TYPE_STR, .default_value = def_, .help = help_}

static const hc_config_row_t rows[HC_CFG_COUNT] = {
    ROW_INT(HC_CFG_CONNECT_TIMEOUT, "HCCL_CONNECT_TIMEOUT", "120", 1, 7200,
            "Seconds a rank waits for the others while a communicator is created; a rank missing "
            "at the end is named in the error."),
    ROW_INT(HC_CFG_EXEC_TIMEOUT, "HCCL_EXEC_TIMEOUT", "1836", 0, 2147483647,
            "Seconds an operation waits for its peers before failing with HCCL_E_TIMEOUT; 0 waits "
            "forever."),
    ROW_STR(HC_CFG_IF_IP, "HCCL_IF_IP", "",
            "IP address the root info's rendezvous listener binds to (first choice)."),
    ROW_STR(HC_CFG_SOCKET_IFNAME, "HCCL_SOCKET_IFNAME", "",
            "Interface(s) for the rendezvous listener when HCCL_IF_IP is unset: prefixes separated by "
            "commas; '=' before the list means exact names, '^' means every interface but these."),
    ROW_INT(HC_CFG_IF_BASE_PORT, "HCCL_IF_BASE_PORT", "0", 0, 65535,
            "Port of the root info's listener; 0 picks an ephemeral port. Rank tables: rank 0 serves "
            "the rendezvous at this + its device_id (60000 + device_id when 0, CANN's default)."),
    ROW_INT(HC_CFG_BUFFSIZE, "HCCL_BUFFSIZE", "200", 1, 65536,
            "MB of staging buffer per communicator; bounds the shared-memory slots of the intra-host "
            "engine (overridden by HcclCommConfig.hcclBufferSize)."),
    ROW_BOOL(HC_CFG_ENTRY_LOG_ENABLE, "HCCL_ENTRY_LOG_ENABLE", "0",
             "1 logs every HCCL call with its arguments at info level, whatever the log level."),
    ROW_INT(HC_CFG_LOG_LEVEL, "ASCEND_GLOBAL_LOG_LEVEL", "2", 0, 4,
            "Log level: 0 debug, 1 info, 2 warning, 3 error, 4 off."),
    ROW_STR(HC_CFG_DETERMINISTIC, "HCCL_DETERMINISTIC", "",
            "false, true or strict (any case; 0, 1 and 2 too; unset: false): the deterministic level. "
            "Inside a host reductions always combine ranks in rank order, bit-identical run after run at "
            "every level; across hosts true and strict make them rank-ordered too (otherwise ring and "
            "halving-doubling schedules combine in their own order). When set it wins over HcclSetConfig, "
            "as in CANN; HcclCommConfig.hcclDeterministic overrides it per communicator."),
    ROW_STR(HC_CFG_ALGO, "HCCL_ALGO", "",
            "Algorithm override in HCCL syntax, e.g. 'level0:NA;level1:ring' or per op "
            "'allreduce=level0:NA;level1:H-D_R/alltoall=level0:NA;level1:pairwise': the schedule between "
            "hosts (inside one host the shared-memory engine has one way per op and ignores it). A value "
            "hostccl cannot honour is a warning naming it."),
    ROW_INT(HC_CFG_DEVICE_COUNT, "HOSTCCL_DEVICE_COUNT", "8", 1, 4096,
            "Number of virtual devices of the host (8, an Ascend server's NPUs, so that CANN's "
            "one-thread-per-device samples start 8 ranks and print what their READMEs show); "
            "ASCEND_RT_VISIBLE_DEVICES selects among them."),
    ROW_INT(HC_CFG_ARENA_BYTES, "HOSTCCL_ARENA_BYTES", "68719476736", 1048576, 140737488355328LL,
            "Address space reserved for aclrtMalloc's shared arena (bytes; pages are only used "
            "when touched)."),
    ROW_STR(HC_CFG_TRANSPORT, "HOSTCCL_TRANSPORT", "auto",
            "auto: shared memory inside a host, TCP between hosts; tcp: TCP between all peers."),
    ROW_INT(HC_CFG_PEER_CHECK_MS, "HOSTCCL_PEER_CHECK_MS", "500", 10, 60000,
            "How often a waiting rank checks that the peers it waits for are alive (ms)."),
    ROW_STR(HC_CFG_STORE, "HOSTCCL_STORE", "",
            "host:port of the rendezvous store used by HcclHostBroadcastRootInfo (set by hccl-run)."),
    ROW_STR(HC_CFG_STORE_TOKEN, "HOSTCCL_STORE_TOKEN", "",
            "Hex token presented to the rendezvous store (set by hccl-run)."),
    ROW_STR(HC_CFG_SIMD, "HOSTCCL_SIMD", "auto",
            "Reduction kernels: auto picks the best set the CPU runs: avx512bf16 (the AVX2/F16C "
            "kernels with bf16 rounded by AVX-512 BF16), avx2, or scalar (the reference kernels); "
            "naming one forces it. Every set gives the same bits."),
    ROW_INT(HC_CFG_TRACE_OPS, "HOSTCCL_TRACE_OPS", "64", 0, 65536,
            "Operations each communicator's flight recorder keeps: the latest, except that an "
            "operation still queued or running is never overwritten (a burst deeper than this keeps "
            "its oldest unfinished operations)."),
    ROW_STR(HC_CFG_TRACE_DUMP, "HOSTCCL_TRACE_DUMP", "",
            "When an operation fails (timeout, mismatch, dead peer), each rank also writes its flight "
            "recorder and its view of every rank as JSON to FILE.rank<R>."),
    ROW_INT(HC_CFG_ZERO_COPY_MIN, "HOSTCCL_ZERO_COPY_MIN", "1048576", 0, 9223372036854775807LL,
            "Bytes of data per op from which collectives read peers' buffers in place (zero copy) "
            "instead of copying through shared slots; see docs/performance.md for how it was chosen."),
    ROW_INT(HC_CFG_P2P_SINGLE_COPY_MIN, "HOSTCCL_P2P_SINGLE_COPY_MIN", "256", 0, 9223372036854775807LL,
            "Bytes of a Send from which the receiver copies straight out of the sender's aclrtMalloc "
            "buffer (one copy) instead of through the shared ring (two); see docs/performance.md."),
    ROW_INT(HC_CFG_P2P_CMA_MIN, "HOSTCCL_P2P_CMA_MIN", "-1", -1, 9223372036854775807LL,
            "The same for a Send from plain (malloc) memory, which the receiver then reads with "
            "process_vm_readv (if HOSTCCL_CMA allows it). -1: where process_vm_readv of 4 KiB pages is "
            "fast (measured at communicator creation), the sends of a grouped exchange (a group or batch "
            "that also receives from the same peer): chosen by measuring from HOSTCCL_CMA_CHOOSE_MIN "
            "(by default where every rank has a core), else from 256 KiB (1 MiB when ranks share "
            "cores); other sends never (one-way streams are as fast or faster on the ring; "
            "docs/performance.md)."),
    ROW_INT(HC_CFG_BCAST_IN_PLACE_MIN, "HOSTCCL_BCAST_IN_PLACE_MIN", "-1", -1, 9223372036854775807LL,
            "Bytes from which Broadcast receivers always copy straight from the root's aclrtMalloc buffer "
            "instead of through its slot. -1: with a core per rank the root picks by measuring from 64 KiB, "
            "as HOSTCCL_CMA_CHOOSE_MIN describes for plain memory (in place was 1.7-3x faster on untouched "
            "buffers, 2-4x slower on buffers the program writes before each call); when ranks share cores "
            "never (docs/performance.md). Must be the same on every rank."),
    ROW_INT(HC_CFG_ALLGATHER_IN_PLACE_MIN, "HOSTCCL_ALLGATHER_IN_PLACE_MIN", "-1", -1, 9223372036854775807LL,
            "Bytes of output from which AllGather and AllGatherV always copy each block straight from its "
            "rank's aclrtMalloc buffer instead of through the slots. -1: with a core per rank each rank "
            "picks for its own block by measuring from 64 KiB, as for Broadcast; when ranks share cores "
            "never (docs/performance.md). Must be the same on every rank."),
    ROW_BOOL(HC_CFG_CMA, "HOSTCCL_CMA", "1",
             "Let copies read peers' plain (malloc) memory with process_vm_readv when the kernel allows "
             "it (probed at communicator creation); 0 forces the copy-through path."),
    ROW_INT(HC_CFG_CMA_MIN, "HOSTCCL_CMA_MIN", "-1", -1, 9223372036854775807LL,
            "Bytes of op data from which Broadcast, Scatter, AllGather(V) and AlltoAll read a peer's plain "
            "(malloc) memory straight from it with process_vm_readv (one copy) instead of through the "
            "slots (two), whatever pages back it, and AllReduce writes its result into the peers' outputs "
            "with process_vm_writev. -1: measured at communicator creation: where "
            "process_vm_readv of 4 KiB pages is fast (at most 2.5x a memcpy), AllReduce from 64 KiB, "
            "AlltoAll(V/VC) and AllGather(V) from 256 KiB (AllReduce from 256 KiB, AlltoAll from 1 MiB "
            "and AllGather never when ranks share cores) and Scatter from 2 MiB; where it is fair (slower, "
            "but at most 0.75 us a page more than the memcpy), AlltoAll(V/VC) from 8 MiB when ranks share "
            "cores; else never (on a PVM guest these reads were 1.5-2.9x slower than the slots; "
            "docs/performance.md). Must be the same on every rank."),
    ROW_INT(HC_CFG_CMA_HUGE_MIN, "HOSTCCL_CMA_HUGE_MIN", "-1", -1, 9223372036854775807LL,
            "The same for plain memory backed by huge pages (numpy arrays from 4 MiB, hugetlbfs, "
            "madvise(MADV_HUGEPAGE)), which process_vm_readv reads at memcpy speed; the owner of a buffer "
            "looks at its own page tables (PAGEMAP_SCAN, Linux 6.7) and tells its peers. Also the size "
            "from which a Send from such memory is read in place. -1: 256 KiB with a core per rank, 1 MiB "
            "when ranks share cores (measured, docs/performance.md). Must be the same on every rank."),
    ROW_INT(HC_CFG_CMA_CHOOSE_MIN, "HOSTCCL_CMA_CHOOSE_MIN", "-1", -1, 9223372036854775807LL,
            "Bytes of op data from which the owner of a plain (malloc) buffer of a Broadcast, Scatter, "
            "AllGather(V) or AlltoAll(V), or the sender of an exchange (HOSTCCL_P2P_CMA_MIN -1), picks how its peers "
            "read it by measuring: it times its calls of the op, each from its start to the start of its "
            "next call of the same op and size (what the program does in between included), on both "
            "paths (process_vm_readv from the buffer, or through the slots), and keeps the faster one, "
            "trying the other again now and then. Buffers left untouched between calls read faster in "
            "place, buffers the program writes before each call through the slots (docs/performance.md). "
            "-1: 64 KiB where process_vm_readv of 4 KiB pages is fast and every rank has a core, else "
            "never; below it, and where HOSTCCL_CMA_MIN is set, the fixed sizes above decide. Must be "
            "the same on every rank."),
    ROW_BOOL(HC_CFG_SPREAD_RANKS, "HOSTCCL_SPREAD_RANKS", "1",
             "When the ranks of a host could each have a CPU and two of them wait for each other on the "
             "same one, the higher rank moves its thread to a CPU no local rank uses, at most every "
             "millisecond; when ranks outnumber CPUs, a waiting rank away from its home CPU (local rank "
             "i: CPU number i mod n of the n in its mask, as hccl-run --bind-to share places them) moves "
             "there, at most every 10 ms (its affinity mask is set to that CPU and straight back; a mask "
             "of one CPU is never touched). 0: never change a thread's affinity (docs/performance.md, Ranks that share a "
             "CPU)."),
    ROW_INT(HC_CFG_NSOCKS, "HOSTCCL_NSOCKS", "2", 1, 15,
            "TCP connections per pair of ranks on different hosts for data (one more carries control "
            "messages); large messages are cut into chunks spread over them. Must be the same on every rank."),
    ROW_INT(HC_CFG_NET_CHUNK_BYTES, "HOSTCCL_NET_CHUNK_BYTES", "524288", 4096, 16777216,
            "Largest piece of a message sent over TCP as one frame (bytes)."),
    ROW_INT(HC_CFG_NET_TIMEOUT_S, "HOSTCCL_NET_TIMEOUT_S", "6", 2, 3600,
            "Seconds after which a peer host that stopped answering (power loss, cable, link down) is "
            "declared dead: TCP keepalive probes and TCP_USER_TIMEOUT on every inter-host connection."),
    ROW_INT(HC_CFG_NET_EARLY_MAX, "HOSTCCL_NET_EARLY_MAX_BYTES", "268435456", 0, 9223372036854775807LL,
            "Largest TCP message a rank keeps aside when it arrives before the receive for it is posted "
            "(a Send before its Recv); a larger one waits in the socket, holding back what follows it."),
    ROW_BOOL(HC_CFG_HIERARCHY, "HOSTCCL_HIERARCHY", "1",
             "Across hosts, run collectives in two levels (shared memory inside each host, TCP between "
             "hosts); 0 runs them flat over TCP between all ranks, as a baseline. Must be the same on every rank."),
    ROW_STR(HC_CFG_DEBUG, "HOSTCCL_DEBUG", "",
            "Comma-separated debug topics, logged whatever the log level: algo (every schedule choice)."),
    ROW_STR(HC_CFG_RANK_TABLE_SECRET, "HOSTCCL_RANK_TABLE_SECRET", "",
            "Mixed into the rendezvous token HcclCommInitClusterInfo derives from the rank table; set "
            "the same value on every rank to keep out processes that can read or rebuild the table "
            "(docs/multihost.md)."),
    ROW_STR(HC_CFG_VISIBLE_DEVICES, "ASCEND_RT_VISIBLE_DEVICES", "",
            "Comma-separated device ids (below HOSTCCL_DEVICE_COUNT) this process sees, renumbered from 0 "
            "in the order given; the list stops at the first invalid or repeated id (warned once)."),
    ROW_STR(HC_CFG_SOC_NAME, "HOSTCCL_SOC_NAME", "HostCPU",
            "What aclrtGetSocName returns; programs compare it to pick code paths."),
    ROW_INT(HC_CFG_STILL_WAITING_S, "HOSTCCL_STILL_WAITING_S", "10", 0, 86400,
            "Seconds an operation waits for its peers before it logs a warning that it is still waiting, "
            "naming the rank it waits for and what that rank is doing; 0: never. The op itself still fails "
            "only at HCCL_EXEC_TIMEOUT."),
    ROW_INT(HC_CFG_STILL_WAITING_BACKOFF, "HOSTCCL_STILL_WAITING_BACKOFF", "2", 1, 16,
            "Each further still-waiting line of one wait comes this many times later than the one before "
            "(at most every 10 minutes)."),
    ROW_STR(HC_CFG_PROGRESS, "HOSTCCL_PROGRESS", "auto",
            "Who runs an operation the program does not synchronise at once: auto measures, per stream, "
            "whether the stream's worker or the synchronising caller makes enqueue + compute + "
            "synchronise faster; worker or caller fixes it (docs/runtime.md)."),
    ROW_INT(HC_CFG_BACKSTOP_MS, "HOSTCCL_BACKSTOP_MS", "1", 1, 600000,
            "Milliseconds a task that nobody synchronises waits, on a stream whose synchronising callers "
            "run its tasks, before the stream's worker runs it; the worker polls that often while tasks "
            "come (docs/runtime.md)."),
    ROW_INT(HC_CFG_STREAM_STORES, "HOSTCCL_STREAM_STORES", "-1", -1, 1,
            "How a rank copies data into the shared slots and rings its peers read: 0 with ordinary stores, "
            "1 with non-temporal stores (whole lines to memory, none fetched first; x86-64), -1 where every "
            "rank has a core whichever it measures faster, timing its ops that copy 16 KiB or more, else "
            "ordinary stores (docs/performance.md)."),
};

/* One warning per variable and process, not one per read. */
static atomic_ullong warned_mask;
_Static_assert(HC_CFG_COUNT <= 64, "warned_mask has a bit per configuration row");

const hc_config_row_t *hc_config_row(hc_config_id_t id)
{
    return (unsigned)id < HC_CFG_COUNT ? &rows[id] : NULL;
}

static void warn_once(hc_config_id_t id, const char *value)
{
    unsigned long long bit = 1ull << (unsigned)id;

    if (atomic_fetch_or(&warned_mask, bit) & bit)
        return;
    HC_WARN("ignoring %s=\"%s\": expected %s in [%lld, %lld]; using the default %s", rows[id].name, value,
            rows[id].type == HC_CFG_TYPE_BOOL ? "a boolean" : "an integer", (long long)rows[id].min,
            (long long)rows[id].max, rows[id].default_value);
}

/* Parse a boolean or integer value; returns 0 on success. */
static int parse_value(const hc_config_row_t *row, const char *text, int64_t *value_p)
{
    char *end;
    long long v;

    if (row->type == HC_CFG_TYPE_BOOL) {
        static const char *const yes[] = {"1", "true", "yes", "on"};
        static const char *const no[] = {"0", "false", "no", "off"};
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
            if (strcasecmp(text, yes[i]) == 0) {
                *value_p = 1;
                return 0;
            }
            if (strcasecmp(text, no[i]) == 0) {
                *value_p = 0;
                return 0;
            }
        }
        return -1;
    }
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < row->min || v > row->max)
        return -1;
    *value_p = v;
    return 0;
}

int64_t hc_config_int(hc_config_id_t id)
{
    const hc_config_row_t *row = hc_config_row(id);
    const char *env;
    int64_t value = 0;

    if (row == NULL || row->type == HC_CFG_TYPE_STR)
        return 0;
    env = getenv(row->name);
    if (env != NULL && env[0] != '\0') {
        if (parse_value(row, env, &value) == 0)
            return value;
        warn_once(id, env);
    }
    if (parse_value(row, row->default_value, &value) != 0)
        return 0;
    return value;
}

const char *hc_config_str(hc_config_id_t id)
{
    const hc_config_row_t *row = hc_config_row(id);
    const char *env;

    if (row == NULL)
        return NULL;
    env = getenv(row->name);
    if (env != NULL && env[0] != '\0')
        return env;
    return row->default_value[0] != '\0' ? row->default_value : NULL;
}
