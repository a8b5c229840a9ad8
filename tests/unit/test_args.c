/*
 * Argument checking of every entry point (DESIGN.md 7), table-driven: each row makes one call with
 * one thing wrong and names the result it must get. Runs on a 1-rank communicator made in-process,
 * and on a destroyed one. None of these calls may crash, hang or enqueue anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <hccl/hccl.h>

static HcclComm g_comm;
static aclrtStream g_stream;
static float g_buf[64];
static uint64_t g_counts[1] = {4};
static uint64_t g_displs[1] = {0};
#define C g_comm
#define S g_stream
#define B g_buf

typedef struct {
    const char *name;
    HcclResult (*call)(void);
    HcclResult expect;
} row_t;

/* ---- one function per row ---------------------------------------------------------------------- */
static HcclResult ar_ok(void) { return HcclAllReduce(B, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, C, S); }
static HcclResult ar_null_comm(void) { return HcclAllReduce(B, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, S); }
static HcclResult ar_bogus_comm(void) { return HcclAllReduce(B, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, (HcclComm)B, S); }
static HcclResult ar_bad_dtype(void) { return HcclAllReduce(B, B, 4, (HcclDataType)99, HCCL_REDUCE_SUM, C, S); }
static HcclResult ar_int128(void) { return HcclAllReduce(B, B, 4, HCCL_DATA_TYPE_INT128, HCCL_REDUCE_SUM, C, S); }
static HcclResult ar_bad_op(void) { return HcclAllReduce(B, B, 4, HCCL_DATA_TYPE_FP32, (HcclReduceOp)7, C, S); }
static HcclResult ar_null_send(void) { return HcclAllReduce(NULL, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, C, S); }
static HcclResult ar_null_recv(void) { return HcclAllReduce(B, NULL, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, C, S); }
static HcclResult ar_count0_null(void) { return HcclAllReduce(NULL, NULL, 0, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, C, S); }
static HcclResult ar_overflow(void) { return HcclAllReduce(B, B, UINT64_MAX / 2, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, C, S); }
static HcclResult bc_bad_root(void) { return HcclBroadcast(B, 4, HCCL_DATA_TYPE_FP32, 1, C, S); }
static HcclResult bc_null_buf(void) { return HcclBroadcast(NULL, 4, HCCL_DATA_TYPE_FP32, 0, C, S); }
static HcclResult bc_ok(void) { return HcclBroadcast(B, 4, HCCL_DATA_TYPE_FP32, 0, C, S); }
static HcclResult red_bad_root(void) { return HcclReduce(B, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 5, C, S); }
static HcclResult red_bad_op(void) { return HcclReduce(B, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_RESERVED, 0, C, S); }
static HcclResult ag_null_recv(void) { return HcclAllGather(B, NULL, 4, HCCL_DATA_TYPE_FP32, C, S); }
static HcclResult ag_bad_dtype(void) { return HcclAllGather(B, B, 4, HCCL_DATA_TYPE_FP8E4M3, C, S); }
static HcclResult agv_null_counts(void) { return HcclAllGatherV(B, 4, B, NULL, g_displs, HCCL_DATA_TYPE_FP32, C, S); }
static HcclResult agv_count_mismatch(void) { return HcclAllGatherV(B, 3, B, g_counts, g_displs, HCCL_DATA_TYPE_FP32, C, S); }
static HcclResult rs_bad_op(void) { return HcclReduceScatter(B, B, 4, HCCL_DATA_TYPE_FP32, (HcclReduceOp)4, C, S); }
static HcclResult rsv_null_displs(void) { return HcclReduceScatterV(B, g_counts, NULL, B, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, C, S); }
static HcclResult sc_bad_root(void) { return HcclScatter(B, B, 4, HCCL_DATA_TYPE_FP32, 2, C, S); }
static HcclResult sc_null_send_root(void) { return HcclScatter(NULL, B, 4, HCCL_DATA_TYPE_FP32, 0, C, S); }
static HcclResult a2a_type_mismatch(void) { return HcclAlltoAll(B, 4, HCCL_DATA_TYPE_FP32, B, 4, HCCL_DATA_TYPE_INT32, C, S); }
static HcclResult a2a_null(void) { return HcclAlltoAll(NULL, 4, HCCL_DATA_TYPE_FP32, B, 4, HCCL_DATA_TYPE_FP32, C, S); }
static HcclResult a2av_null_counts(void) { return HcclAlltoAllV(B, NULL, g_displs, HCCL_DATA_TYPE_FP32, B, g_counts, g_displs, HCCL_DATA_TYPE_FP32, C, S); }
static HcclResult a2avc_null_matrix(void) { return HcclAlltoAllVC(B, NULL, HCCL_DATA_TYPE_FP32, B, HCCL_DATA_TYPE_FP32, C, S); }
static HcclResult send_self(void) { return HcclSend(B, 4, HCCL_DATA_TYPE_FP32, 0, C, S); }
static HcclResult send_out_of_range(void) { return HcclSend(B, 4, HCCL_DATA_TYPE_FP32, 9, C, S); }
static HcclResult recv_null(void) { return HcclRecv(NULL, 4, HCCL_DATA_TYPE_FP32, 9, C, S); }
static HcclResult batch_null(void) { return HcclBatchSendRecv(NULL, 2, C, S); }
static HcclResult batch_bad_type(void)
{
    HcclSendRecvItem item = {.sendRecvType = (HcclSendRecvType)5, .buf = B, .count = 1,
                             .dataType = HCCL_DATA_TYPE_FP32, .remoteRank = 0};
    return HcclBatchSendRecv(&item, 1, C, S);
}
static HcclResult barrier_null(void) { return HcclBarrier(NULL, S); }
static HcclResult barrier_ok(void) { return HcclBarrier(C, S); }
static HcclResult rank_null(void) { return HcclGetRankId(C, NULL); }
static HcclResult size_null(void) { return HcclGetRankSize(C, NULL); }
static HcclResult name_null(void) { return HcclGetCommName(C, NULL); }
static HcclResult rank_null_comm(void) { uint32_t r; return HcclGetRankId(NULL, &r); }
static HcclResult async_null(void) { return HcclGetCommAsyncError(C, NULL); }
static HcclResult root_info_null(void) { return HcclGetRootInfo(NULL); }
static HcclResult init_null_info(void) { HcclComm c; return HcclCommInitRootInfo(2, NULL, 0, &c); }
static HcclResult init_rank_range(void)
{
    HcclRootInfo info;
    HcclComm c;
    memset(&info, 0, sizeof(info));
    return HcclCommInitRootInfo(2, &info, 2, &c);
}
static HcclResult init_zero_ranks(void)
{
    HcclRootInfo info;
    HcclComm c;
    memset(&info, 0, sizeof(info));
    return HcclCommInitRootInfo(0, &info, 0, &c);
}
static HcclResult init_garbage_info(void)
{
    HcclRootInfo info;
    HcclComm c;
    memset(&info, 0x77, sizeof(info));
    return HcclCommInitRootInfo(1, &info, 0, &c);
}
static HcclResult init_config_uninit(void)
{
    HcclRootInfo info;
    HcclCommConfig config;
    HcclComm c;
    memset(&config, 0, sizeof(config));
    if (HcclGetRootInfo(&info) != HCCL_SUCCESS)
        return HCCL_E_INTERNAL;
    return HcclCommInitRootInfoConfig(1, &info, 0, &config, &c);
}
static HcclResult init_all_dup(void) { int32_t d[2] = {0, 0}; HcclComm c[2]; return HcclCommInitAll(2, d, c); }
static HcclResult init_all_zero(void) { int32_t d[1] = {0}; HcclComm c[1]; return HcclCommInitAll(0, d, c); }
static HcclResult destroy_null(void) { return HcclCommDestroy(NULL); }
static HcclResult set_config_bad(void) { HcclConfigValue v = {.value = 3}; return HcclSetConfig(HCCL_DETERMINISTIC, v); }
static HcclResult get_config_null(void) { return HcclGetConfig(HCCL_DETERMINISTIC, NULL); }

static const row_t rows[] = {
    {"allreduce ok", ar_ok, HCCL_SUCCESS},
    {"allreduce NULL comm", ar_null_comm, HCCL_E_PTR},
    {"allreduce foreign handle", ar_bogus_comm, HCCL_E_PARA},
    {"allreduce unknown dtype", ar_bad_dtype, HCCL_E_PARA},
    {"allreduce int128", ar_int128, HCCL_E_PARA},
    {"allreduce unknown op", ar_bad_op, HCCL_E_PARA},
    {"allreduce NULL send", ar_null_send, HCCL_E_PTR},
    {"allreduce NULL recv", ar_null_recv, HCCL_E_PTR},
    {"allreduce count 0 NULL buffers", ar_count0_null, HCCL_SUCCESS},
    {"allreduce count overflow", ar_overflow, HCCL_E_PARA},
    {"broadcast root out of range", bc_bad_root, HCCL_E_PARA},
    {"broadcast NULL buffer", bc_null_buf, HCCL_E_PTR},
    {"broadcast ok", bc_ok, HCCL_SUCCESS},
    {"reduce root out of range", red_bad_root, HCCL_E_PARA},
    {"reduce reserved op", red_bad_op, HCCL_E_PARA},
    {"allgather NULL recv", ag_null_recv, HCCL_E_PTR},
    {"allgather fp8", ag_bad_dtype, HCCL_E_PARA},
    {"allgatherv NULL counts", agv_null_counts, HCCL_E_PTR},
    {"allgatherv sendCount != recvCounts[rank]", agv_count_mismatch, HCCL_E_PARA},
    {"reducescatter bad op", rs_bad_op, HCCL_E_PARA},
    {"reducescatterv NULL displs", rsv_null_displs, HCCL_E_PTR},
    {"scatter root out of range", sc_bad_root, HCCL_E_PARA},
    {"scatter NULL send on root", sc_null_send_root, HCCL_E_PTR},
    {"alltoall type mismatch", a2a_type_mismatch, HCCL_E_PARA},
    {"alltoall NULL send", a2a_null, HCCL_E_PTR},
    {"alltoallv NULL counts", a2av_null_counts, HCCL_E_PTR},
    {"alltoallvc NULL matrix", a2avc_null_matrix, HCCL_E_PTR},
    {"send to self", send_self, HCCL_E_PARA},
    {"send peer out of range", send_out_of_range, HCCL_E_PARA},
    {"recv peer out of range before NULL", recv_null, HCCL_E_PARA},
    {"batch NULL items", batch_null, HCCL_E_PTR},
    {"batch bad item type", batch_bad_type, HCCL_E_PARA},
    {"barrier NULL comm", barrier_null, HCCL_E_PTR},
    {"barrier ok", barrier_ok, HCCL_SUCCESS},
    {"rank id NULL", rank_null, HCCL_E_PTR},
    {"rank size NULL", size_null, HCCL_E_PTR},
    {"comm name NULL", name_null, HCCL_E_PTR},
    {"rank id NULL comm", rank_null_comm, HCCL_E_PTR},
    {"async error NULL", async_null, HCCL_E_PTR},
    {"root info NULL", root_info_null, HCCL_E_PTR},
    {"init NULL root info", init_null_info, HCCL_E_PTR},
    {"init rank out of range", init_rank_range, HCCL_E_PARA},
    {"init zero ranks", init_zero_ranks, HCCL_E_PARA},
    {"init garbage root info", init_garbage_info, HCCL_E_PARA},
    {"init config not initialised", init_config_uninit, HCCL_E_PARA},
    {"init all duplicate device", init_all_dup, HCCL_E_PARA},
    {"init all zero devices", init_all_zero, HCCL_E_PARA},
    {"destroy NULL", destroy_null, HCCL_E_PTR},
    {"set config bad value", set_config_bad, HCCL_E_PARA},
    {"get config NULL", get_config_null, HCCL_E_PTR},
};

static int make_comm(void **state)
{
    HcclRootInfo info;

    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&g_stream), ACL_SUCCESS);
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    assert_int_equal(HcclCommInitRootInfo(1, &info, 0, &g_comm), HCCL_SUCCESS);
    return 0;
}

static int drop_comm(void **state)
{
    (void)state;
    assert_int_equal(aclrtSynchronizeStream(g_stream), ACL_SUCCESS);
    assert_int_equal(HcclCommDestroy(g_comm), HCCL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(g_stream), ACL_SUCCESS);
    return 0;
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        HcclResult got = rows[i].call();
        if (got != rows[i].expect)
            fail_msg("%s: got %s, expected %s", rows[i].name, HcclGetErrorString(got),
                     HcclGetErrorString(rows[i].expect));
    }
    /* Nothing that failed was enqueued; what succeeded runs. */
    assert_int_equal(aclrtSynchronizeStream(g_stream), ACL_SUCCESS);
}

static void test_destroyed_comm(void **state)
{
    HcclRootInfo info;
    HcclComm comm;
    uint32_t rank;

    (void)state;
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    assert_int_equal(HcclCommInitRootInfo(1, &info, 0, &comm), HCCL_SUCCESS);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
    assert_int_equal(HcclCommDestroy(comm), HCCL_E_PARA);
    assert_int_equal(HcclGetRankId(comm, &rank), HCCL_E_PARA);
    assert_int_equal(HcclAllReduce(g_buf, g_buf, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, g_stream),
                     HCCL_E_PARA);
}

static void test_queries(void **state)
{
    char name[COMM_NAME_MAX_LENGTH];
    uint32_t rank = 99, size = 99;
    HcclResult async = HCCL_E_INTERNAL;

    (void)state;
    assert_int_equal(HcclGetRankId(g_comm, &rank), HCCL_SUCCESS);
    assert_int_equal(HcclGetRankSize(g_comm, &size), HCCL_SUCCESS);
    assert_int_equal(HcclGetCommName(g_comm, name), HCCL_SUCCESS);
    assert_int_equal(HcclGetCommAsyncError(g_comm, &async), HCCL_SUCCESS);
    assert_int_equal(rank, 0);
    assert_int_equal(size, 1);
    assert_int_equal(async, HCCL_SUCCESS);
    assert_true(strncmp(name, "hccl_", 5) == 0);
}

/* CANN's texts, and its two fallbacks. */
static void test_error_strings(void **state)
{
    (void)state;
    assert_string_equal(HcclGetErrorString(HCCL_SUCCESS), "no error");
    assert_string_equal(HcclGetErrorString(HCCL_E_PARA), "parameter error");
    assert_string_equal(HcclGetErrorString(HCCL_E_NOT_SUPPORT), "not support feature");
    assert_string_equal(HcclGetErrorString(HCCL_E_REMOTE), "error cqe");
    assert_string_equal(HcclGetErrorString(HCCL_E_SUSPENDING), "error communicator suspending");
    assert_string_equal(HcclGetErrorString(HCCL_E_OPRETRY_FAIL), "retry constraint");
    assert_string_equal(HcclGetErrorString(HCCL_E_OOM), "out of memory");
    assert_string_equal(HcclGetErrorString((HcclResult)25), "unknown err");
    assert_string_equal(HcclGetErrorString(HCCL_E_IN_STATUS), "unknown err");
    assert_string_equal(HcclGetErrorString(HCCL_E_RESERVED), "unknown error");
    assert_string_equal(HcclGetErrorString((HcclResult)-1), "unknown error");
    assert_int_equal(HCCL_E_RESERVED, 1042);
}

static void test_config_name(void **state)
{
    HcclRootInfo info;
    HcclCommConfig config;
    HcclComm comm;
    char name[COMM_NAME_MAX_LENGTH];

    (void)state;
    HcclCommConfigInit(&config);
    strcpy(config.hcclCommName, "tp_group");
    config.hcclBufferSize = 1;
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    assert_int_equal(HcclCommInitRootInfoConfig(1, &info, 0, &config, &comm), HCCL_SUCCESS);
    assert_int_equal(HcclGetCommName(comm, name), HCCL_SUCCESS);
    assert_string_equal(name, "tp_group");
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_destroyed_comm),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test(test_config_name),
    };
    return cmocka_run_group_tests(tests, make_comm, drop_comm);
}
