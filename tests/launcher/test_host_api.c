/*
 * hccl_host.h: HcclHostGetLaunchInfo under each launcher's variables, the argument and
 * configuration errors of HcclHostBroadcastRootInfo, and HcclHostGetVersion. The multi-rank
 * exchange itself runs under hccl-run (bcast_helper.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <hccl/hccl_host.h>

#include "hc_launch.h"
#include "hc_log.h"
#include "hc_time.h"
#include "store_fixture.h"

/* Every variable any launcher row reads: cleared before each case so that the environment the
 * test runs in (perhaps itself under Slurm or hccl-run) cannot leak in. */
static const char *const launch_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_NODEID", "HOSTCCL_STORE", "HOSTCCL_STORE_TOKEN", "SLURM_STEP_ID",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_ID", "HOSTCCL_RUN_OUTER", "PMIX_NAMESPACE",
    "PMIX_RANK",
};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(launch_vars) / sizeof(launch_vars[0]); i++)
        unsetenv(launch_vars[i]);
    return 0;
}

/* Set NAME=VALUE pairs, NULL-terminated. */
static void set_env(const char *first, ...)
{
    va_list ap;
    const char *name = first;

    va_start(ap, first);
    while (name != NULL) {
        setenv(name, va_arg(ap, const char *), 1);
        name = va_arg(ap, const char *);
    }
    va_end(ap);
}

static void expect_info(uint32_t rank, uint32_t size, uint32_t local_rank, uint32_t local_size, const char *launcher)
{
    HcclHostLaunchInfo info;

    memset(&info, 0xa5, sizeof(info));
    assert_int_equal(HcclHostGetLaunchInfo(&info), HCCL_SUCCESS);
    assert_int_equal(info.rank, rank);
    assert_int_equal(info.size, size);
    assert_int_equal(info.localRank, local_rank);
    assert_int_equal(info.localSize, local_size);
    assert_string_equal(info.launcher, launcher);
}

static void expect_para(void)
{
    HcclHostLaunchInfo info;

    memset(&info, 0x5a, sizeof(info));
    assert_int_equal(HcclHostGetLaunchInfo(&info), HCCL_E_PARA);
    /* Outputs are written only on success. */
    assert_int_equal(info.rank, 0x5a5a5a5au);
}

static void test_no_launcher(void **state)
{
    (void)state;
    expect_info(0, 1, 0, 1, "none");
    assert_int_equal(HcclHostGetLaunchInfo(NULL), HCCL_E_PTR);
}

static void test_hccl_run(void **state)
{
    (void)state;
    set_env("RANK", "2", "WORLD_SIZE", "4", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "2", NULL);
    expect_info(2, 4, 0, 2, "hccl-run");
}

static void test_openmpi(void **state)
{
    (void)state;
    set_env("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "8", "OMPI_COMM_WORLD_LOCAL_RANK", "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE", "4", NULL);
    expect_info(3, 8, 1, 4, "openmpi");
}

static void test_pmi(void **state)
{
    (void)state;
    set_env("PMI_RANK", "5", "PMI_SIZE", "6", "MPI_LOCALRANKID", "2", "MPI_LOCALNRANKS", "3", NULL);
    expect_info(5, 6, 2, 3, "pmi");
}

static void test_slurm(void **state)
{
    (void)state;
    set_env("SLURM_STEP_ID", "0", "SLURM_PROCID", "3", "SLURM_NTASKS", "4", "SLURM_LOCALID", "1",
            "SLURM_STEP_TASKS_PER_NODE", "2(x2)", "SLURM_NODEID", "1", NULL);
    expect_info(3, 4, 1, 2, "slurm");

    /* Without the step's list: the node's entry of SLURM_TASKS_PER_NODE. */
    unsetenv("SLURM_STEP_TASKS_PER_NODE");
    set_env("SLURM_PROCID", "6", "SLURM_NTASKS", "7", "SLURM_LOCALID", "0", "SLURM_TASKS_PER_NODE", "2(x3),1",
            "SLURM_NODEID", "3", NULL);
    expect_info(6, 7, 0, 1, "slurm");
    set_env("SLURM_PROCID", "3", "SLURM_LOCALID", "1", "SLURM_NODEID", "1", NULL);
    expect_info(3, 7, 1, 2, "slurm");

    set_env("SLURM_TASKS_PER_NODE", "2(x", NULL);
    expect_para();
    set_env("SLURM_TASKS_PER_NODE", "2(x3)", "SLURM_NODEID", "3", NULL);
    expect_para();
}

/* A batch script is not a task: SLURM_PROCID=0 and the allocation's SLURM_NTASKS, but no step. */
static void test_slurm_batch_script(void **state)
{
    (void)state;
    set_env("SLURM_JOB_ID", "2", "SLURM_PROCID", "0", "SLURM_NTASKS", "8", "SLURM_LOCALID", "0",
            "SLURM_NTASKS_PER_NODE", "8", "SLURM_TASKS_PER_NODE", "8", "SLURM_NODEID", "0", NULL);
    expect_info(0, 1, 0, 1, "none");
}

/* `srun -n 4` inside `salloc -n 8 --ntasks-per-node=8` (the variables measured on a real step): the
 * step's counts, not the allocation's. */
static void test_slurm_step_in_allocation(void **state)
{
    (void)state;
    set_env("SLURM_JOB_ID", "2", "SLURM_STEP_ID", "0", "SLURM_PROCID", "2", "SLURM_NTASKS", "4",
            "SLURM_STEP_NUM_TASKS", "4", "SLURM_NTASKS_PER_NODE", "8", "SLURM_STEP_TASKS_PER_NODE", "4",
            "SLURM_TASKS_PER_NODE", "4", "SLURM_LOCALID", "2", "SLURM_NODEID", "0", NULL);
    expect_info(2, 4, 2, 4, "slurm");
    /* An allocation's SLURM_NTASKS is never the step's size when the step says otherwise. */
    set_env("SLURM_NTASKS", "8", NULL);
    expect_info(2, 4, 2, 4, "slurm");
}

/* Launcher precedence (docs/multihost.md): the launcher that started the process wins. */
static void test_precedence(void **state)
{
    char digest[HC_LAUNCH_OUTER_BYTES];

    (void)state;
    /* srun -n 1 hccl-run -n 2 prog: hccl-run saw the step it runs in, so do its ranks. */
    set_env("SLURM_JOB_ID", "7", "SLURM_STEP_ID", "0", "SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_LOCALID", "0",
            "SLURM_STEP_TASKS_PER_NODE", "1", NULL);
    hc_launch_outer_digest(digest);
    set_env("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2", "HOSTCCL_RUN_OUTER", digest,
            NULL);
    expect_info(1, 2, 1, 2, "hccl-run");

    /* hccl-run -n 1 srun -n 4 prog: hccl-run saw no step; srun's tasks have one. Slurm started them. */
    clear_env(NULL);
    hc_launch_outer_digest(digest);
    set_env("RANK", "0", "WORLD_SIZE", "1", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "1", "HOSTCCL_RUN_OUTER", digest,
            NULL);
    expect_info(0, 1, 0, 1, "hccl-run");
    set_env("SLURM_JOB_ID", "7", "SLURM_STEP_ID", "1", "SLURM_PROCID", "3", "SLURM_NTASKS", "4", "SLURM_LOCALID", "3",
            "SLURM_STEP_TASKS_PER_NODE", "4", NULL);
    expect_info(3, 4, 3, 4, "slurm");

    /* ... and the store hccl-run gave its own rank is not this job's: with no other way, say so. */
    set_env("HOSTCCL_STORE", "127.0.0.1:9", "HOSTCCL_STORE_TOKEN", "00112233445566778899aabbccddeeff",
            "SLURM_STEP_TASKS_PER_NODE", "2(x2)", "SLURM_NODEID", "1", "SLURM_LOCALID", "1", NULL);
    expect_info(3, 4, 1, 2, "slurm");
    assert_int_equal(HcclHostBroadcastRootInfo(&(HcclRootInfo){{0}}), HCCL_E_NOT_SUPPORT);
    assert_non_null(strstr(hc_log_last_error(), "no way to reach the other 3 ranks (launcher slurm)"));

    /* RANK without HOSTCCL_RUN_OUTER (torchrun sets it too) keeps its place before Slurm's. */
    unsetenv("HOSTCCL_RUN_OUTER");
    expect_info(0, 1, 0, 1, "hccl-run");
}

static void test_missing_local_vars(void **state)
{
    (void)state;
    set_env("PMI_RANK", "1", "PMI_SIZE", "3", NULL);
    expect_info(1, 3, 1, 3, "pmi");
}

static void test_malformed(void **state)
{
    static const char *const bad_numbers[] = {"abc", "-1", "", " 1", "1x", "+2", "4294967296", "99999999999999999999"};

    (void)state;
    for (size_t i = 0; i < sizeof(bad_numbers) / sizeof(bad_numbers[0]); i++) {
        set_env("RANK", bad_numbers[i], "WORLD_SIZE", "4", NULL);
        expect_para();
        set_env("RANK", "0", "WORLD_SIZE", bad_numbers[i], NULL);
        expect_para();
    }
    set_env("RANK", "4", "WORLD_SIZE", "4", NULL);
    expect_para();
    set_env("RANK", "0", "WORLD_SIZE", "0", NULL);
    expect_para();
    set_env("RANK", "1", "WORLD_SIZE", "4", "LOCAL_RANK", "3", "LOCAL_WORLD_SIZE", "2", NULL);
    expect_para();
    set_env("LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "5", NULL);
    expect_para();
    set_env("LOCAL_WORLD_SIZE", "x", NULL);
    expect_para();
    unsetenv("WORLD_SIZE");
    set_env("LOCAL_WORLD_SIZE", "2", NULL);
    expect_para();
}

static void test_version(void **state)
{
    uint32_t version = 0;

    (void)state;
    assert_int_equal(HcclHostGetVersion(&version), HCCL_SUCCESS);
    assert_int_equal(version, HOSTCCL_VERSION_MAJOR * 10000 + HOSTCCL_VERSION_MINOR * 100 + HOSTCCL_VERSION_PATCH);
    assert_int_equal(HcclHostGetVersion(NULL), HCCL_E_PTR);
    /* The failure above is this thread's last error line, readable through the extension. */
    assert_non_null(strstr(HcclHostGetRecentErrMsg(), "HcclHostGetVersion: version is NULL"));
}

static void test_broadcast_errors(void **state)
{
    HcclRootInfo info, copy;

    (void)state;
    memset(&info, 0x42, sizeof(info));
    copy = info;
    assert_int_equal(HcclHostBroadcastRootInfo(NULL), HCCL_E_PTR);

    /* One rank: nothing to exchange, and no store needed. */
    assert_int_equal(HcclHostBroadcastRootInfo(&info), HCCL_SUCCESS);
    assert_memory_equal(&info, &copy, sizeof(info));

    /* Several ranks and no store: say how to get one. */
    set_env("RANK", "1", "WORLD_SIZE", "2", NULL);
    assert_int_equal(HcclHostBroadcastRootInfo(&info), HCCL_E_NOT_SUPPORT);

    set_env("RANK", "x", NULL);
    assert_int_equal(HcclHostBroadcastRootInfo(&info), HCCL_E_PARA);
    assert_memory_equal(&info, &copy, sizeof(info));
}

/* A rank waiting for a root info that never comes fails at HCCL_CONNECT_TIMEOUT, output untouched. */
static void test_broadcast_timeout(void **state)
{
    HcclRootInfo info, copy;
    int64_t start;

    (void)state;
    assert_int_equal(store_fixture_start(), 0);
    set_env("RANK", "1", "WORLD_SIZE", "2", "HCCL_CONNECT_TIMEOUT", "1", NULL);
    memset(&info, 0x17, sizeof(info));
    copy = info;
    start = hc_now_ns();
    assert_int_equal(HcclHostBroadcastRootInfo(&info), HCCL_E_TIMEOUT);
    assert_true(hc_now_ns() - start >= HC_NS_PER_S);
    assert_true(hc_now_ns() - start < 10 * HC_NS_PER_S);
    assert_memory_equal(&info, &copy, sizeof(info));
    unsetenv("HCCL_CONNECT_TIMEOUT");
    store_fixture_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_launcher, clear_env),
        cmocka_unit_test_setup(test_hccl_run, clear_env),
        cmocka_unit_test_setup(test_openmpi, clear_env),
        cmocka_unit_test_setup(test_pmi, clear_env),
        cmocka_unit_test_setup(test_slurm, clear_env),
        cmocka_unit_test_setup(test_slurm_batch_script, clear_env),
        cmocka_unit_test_setup(test_slurm_step_in_allocation, clear_env),
        cmocka_unit_test_setup(test_precedence, clear_env),
        cmocka_unit_test_setup(test_missing_local_vars, clear_env),
        cmocka_unit_test_setup(test_malformed, clear_env),
        cmocka_unit_test_setup(test_version, clear_env),
        cmocka_unit_test_setup(test_broadcast_errors, clear_env),
        cmocka_unit_test_setup(test_broadcast_timeout, clear_env),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
