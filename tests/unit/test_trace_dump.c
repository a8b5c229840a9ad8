/*
 * HOSTCCL_TRACE_DUMP: when an op fails, each rank's JSON shows that op as failed with its result,
 * not as still running and successful. Two ranks as threads of this process (HcclCommInitAll) make
 * mismatched AllReduces; each one's file must show the op "failed" with HCCL_E_PARA.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <hccl/hccl.h>

typedef struct {
    HcclComm comm;
    int32_t device;
    HcclResult res;
} rank_t;

static float g_buf[2][64];

static void *run_rank(void *arg)
{
    rank_t *r = arg;
    aclrtStream stream;

    if (aclrtSetDevice(r->device) != ACL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS) {
        r->res = HCCL_E_RUNTIME;
        return NULL;
    }
    /* Rank 1 passes another count: a mismatch, which fails the op on both ranks. */
    r->res = HcclAllReduce(g_buf[r->device], g_buf[r->device], r->device == 0 ? 8 : 16, HCCL_DATA_TYPE_FP32,
                           HCCL_REDUCE_SUM, r->comm, stream);
    if (r->res == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS)
        HcclGetCommAsyncError(r->comm, &r->res);
    aclrtDestroyStream(stream);
    return NULL;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 1 << 16);

    assert_non_null(f);
    assert_non_null(text);
    assert_true(fread(text, 1, (1 << 16) - 1, f) > 0);
    fclose(f);
    return text;
}

static void test_failed_op_is_failed(void **state)
{
    char dir[] = "/tmp/hc-trace-XXXXXX", prefix[64], path[80];
    int32_t devices[2] = {0, 1};
    HcclComm comms[2];
    rank_t ranks[2];
    pthread_t threads[2];

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(prefix, sizeof(prefix), "%s/trace", dir);
    setenv("HOSTCCL_TRACE_DUMP", prefix, 1);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(HcclCommInitAll(2, devices, comms), HCCL_SUCCESS);
    for (int i = 0; i < 2; i++) {
        ranks[i] = (rank_t){.comm = comms[i], .device = i};
        assert_int_equal(pthread_create(&threads[i], NULL, run_rank, &ranks[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < 2; i++) {
        char *json;

        assert_int_equal(ranks[i].res, HCCL_E_PARA);
        snprintf(path, sizeof(path), "%s.rank%d", prefix, i);
        json = read_file(path);
        assert_non_null(strstr(json, "\"result\": \"HCCL_E_PARA\", \"ops\": ["));
        /* The op's own entry in the recorder: the first and only op. */
        assert_non_null(strstr(json, "{\"seq\": 1, \"op\": \"allreduce count="));
        assert_non_null(strstr(json, "\"state\": \"failed\", \"result\": \"HCCL_E_PARA\""));
        assert_null(strstr(json, "\"state\": \"running\""));
        free(json);
        unlink(path);
        assert_int_equal(HcclCommDestroy(comms[i]), HCCL_SUCCESS);
    }
    rmdir(dir);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_op_is_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
