/*
 * HcclCommConfig across header versions, the process-wide determinism setting, the configuration
 * queries, and the hccl_comm.h calls that look communicators up by name or report state.
 *
 * A config built with an older header is read only up to the size it records: the test places a
 * version-5 (300-byte) config at the very end of a page that is followed by an inaccessible one,
 * so reading past its end crashes the test instead of passing silently.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include <hccl/hccl.h>

#include "hc_comm.h"

/* The layout fixes what programs built against CANN's header pass: offsets are CANN's. */
_Static_assert(sizeof(HcclCommConfig) == 2248, "HcclCommConfig v11 is 2248 bytes");
_Static_assert(offsetof(HcclCommConfig, hcclWorldRankID) == 300, "v6 starts after the 300-byte v5 layout");
_Static_assert(offsetof(HcclCommConfig, hcclExecTimeOut) == 316, "hcclExecTimeOut");
_Static_assert(offsetof(HcclCommConfig, hcclAlgo) == 320, "hcclAlgo");
_Static_assert(offsetof(HcclCommConfig, hcclBufferName) == 2098, "hcclBufferName");
_Static_assert(offsetof(HcclCommConfig, hcclSymWinMaxMemSizePerRank) == 2232, "hcclSymWinMaxMemSizePerRank");
_Static_assert(offsetof(HcclCommConfig, hcclChannelSqDepth) == 2240, "hcclChannelSqDepth");
_Static_assert(HCCL_DATA_TYPE_HIF8 == 14 && HCCL_DATA_TYPE_FP8E8M0 == 17, "CANN's data type values");
_Static_assert(HCCL_E_OOM == 24 && HCCL_E_IN_STATUS == 1041 && HCCL_E_RESERVED == 1042, "CANN's result values");

/* What hostccl's own headers (and CANN's up to version 5) laid out: 300 bytes. */
typedef struct {
    char reserved[24];
    uint32_t hcclBufferSize;
    uint32_t hcclDeterministic;
    char hcclCommName[128];
    char hcclUdi[128];
    uint32_t hcclOpExpansionMode;
    uint32_t hcclRdmaTrafficClass;
    uint32_t hcclRdmaServiceLevel;
} config_v5_t;
_Static_assert(sizeof(config_v5_t) == 300, "the version-5 layout is 300 bytes");

typedef struct {
    size_t size;
    uint32_t magic;
    uint32_t version;
    uint64_t reserved;
} header_t;

/* Create a one-rank communicator from config; the result code. */
static HcclResult init_with(const void *config, HcclComm *comm)
{
    HcclRootInfo info;

    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    return HcclCommInitRootInfoConfig(1, &info, 0, config, comm);
}

static hc_comm_t *peek(HcclComm handle)
{
    hc_comm_t *comm;

    assert_int_equal(hc_comm_acquire(handle, "test", &comm), HCCL_SUCCESS);
    hc_comm_release(comm); /* the registry keeps it alive until destroyed */
    return comm;
}

static void test_old_layout_is_not_read_past_its_end(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    config_v5_t *old = (config_v5_t *)(void *)(two + page - sizeof(config_v5_t));
    header_t header = {.size = sizeof(config_v5_t), .magic = HCCL_COMM_CONFIG_MAGIC_WORD, .version = 5};
    HcclComm comm;
    hc_comm_t *c;

    (void)state;
    assert_true(two != MAP_FAILED);
    assert_int_equal(mprotect(two + page, page, PROT_NONE), 0);
    memset(old, 0, sizeof(*old));
    memcpy(old->reserved, &header, sizeof(header));
    old->hcclBufferSize = 3;
    old->hcclDeterministic = 2;
    strcpy(old->hcclCommName, "old_layout");
    assert_int_equal(init_with(old, &comm), HCCL_SUCCESS);
    c = peek(comm);
    assert_int_equal(c->settings.buffer_bytes, 3u << 20);
    assert_int_equal(c->settings.deterministic, 2);
    assert_string_equal(c->name, "old_layout");
    /* Fields of later versions keep their defaults. */
    assert_int_equal(c->settings.sym_win_max_gb, HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
    munmap(two, 2 * page);
}

static void test_current_layout_fields(void **state)
{
    HcclCommConfig config;
    char algo[HCCL_COMM_ALGO_MAX_LENGTH];
    HcclConfigTypeOpExpansionMode mode = HCCL_OP_EXPANSION_MODE_INVALID;
    HcclComm comm;
    hc_comm_t *c;

    (void)state;
    HcclCommConfigInit(&config);
    assert_int_equal(((header_t *)(void *)&config)->size, sizeof(HcclCommConfig));
    assert_int_equal(((header_t *)(void *)&config)->version, 11);
    assert_int_equal(config.hcclChannelSqDepth, HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET);
    config.hcclExecTimeOut = 7;
    config.hcclWorldRankID = 12;
    config.hcclJobID = 99;
    config.hcclSymWinMaxMemSizePerRank = 2;
    strcpy(config.hcclAlgo, "level0:NA;level1:ring");
    strcpy(config.hcclCommName, "v11");
    assert_int_equal(init_with(&config, &comm), HCCL_SUCCESS);
    c = peek(comm);
    assert_int_equal(c->settings.exec_timeout_s, 7);
    assert_int_equal(c->settings.world_rank_id, 12);
    assert_int_equal(c->settings.job_id, 99);
    assert_int_equal(c->settings.sym_win_max_gb, 2);
    assert_int_equal(HcclConfigGetInfo(comm, HCCL_CONFIG_TYPE_HCCL_ALGO, sizeof(algo), algo), HCCL_SUCCESS);
    assert_string_equal(algo, "level0:NA;level1:ring");
    assert_int_equal(HcclConfigGetInfo(comm, HCCL_CONFIG_TYPE_HCCL_ALGO, 100, algo), HCCL_E_PARA);
    assert_int_equal(HcclConfigGetInfo(comm, HCCL_CONFIG_TYPE_OP_EXPANSION_MODE, sizeof(mode), &mode), HCCL_SUCCESS);
    assert_int_equal(mode, HCCL_OP_EXPANSION_MODE_HOST);
    assert_int_equal(HcclConfigGetInfo(comm, HCCL_CONFIG_TYPE_OP_EXPANSION_MODE, 8, &mode), HCCL_E_PARA);
    assert_int_equal(HcclConfigGetInfo(comm, (HcclConfigType)5, sizeof(mode), &mode), HCCL_E_PARA);
    assert_int_equal(HcclConfigGetInfo(comm, HCCL_CONFIG_TYPE_OP_EXPANSION_MODE, sizeof(mode), NULL), HCCL_E_PTR);
    assert_int_equal(HcclConfigGetInfo(NULL, HCCL_CONFIG_TYPE_OP_EXPANSION_MODE, sizeof(mode), &mode), HCCL_E_PTR);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
}

/* A config from a newer header (larger, later version) is read up to our size; a field is applied
 * only when the recorded version has it. */
static void test_versions_gate_fields(void **state)
{
    unsigned char newer[sizeof(HcclCommConfig) + 64];
    HcclCommConfig config;
    header_t *header = (header_t *)(void *)&config;
    HcclComm comm;

    (void)state;
    memset(newer, 0x5a, sizeof(newer));
    HcclCommConfigInit((HcclCommConfig *)(void *)newer);
    ((header_t *)(void *)newer)->size = sizeof(newer);
    ((header_t *)(void *)newer)->version = 12;
    assert_int_equal(init_with(newer, &comm), HCCL_SUCCESS);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);

    HcclCommConfigInit(&config);
    config.aclGraphZeroCopyEnable = 5; /* invalid, but a version-6 config has no such field */
    header->version = 6;
    assert_int_equal(init_with(&config, &comm), HCCL_SUCCESS);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
    header->version = 7;
    assert_int_equal(init_with(&config, &comm), HCCL_E_PARA);

    HcclCommConfigInit(&config);
    config.hcclExecTimeOut = 9;
    header->version = 7; /* the timeout came with version 8 */
    assert_int_equal(init_with(&config, &comm), HCCL_SUCCESS);
    assert_int_equal(peek(comm)->settings.exec_timeout_s, 1836);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
}

static void test_bad_configs(void **state)
{
    HcclCommConfig config;
    header_t *header = (header_t *)(void *)&config;
    HcclComm comm;

    (void)state;
    HcclCommConfigInit(&config);
    header->magic = 0;
    assert_int_equal(init_with(&config, &comm), HCCL_E_PARA);
    HcclCommConfigInit(&config);
    header->size = 16;
    assert_int_equal(init_with(&config, &comm), HCCL_E_PARA);
    HcclCommConfigInit(&config);
    config.hcclDeterministic = 3;
    assert_int_equal(init_with(&config, &comm), HCCL_E_PARA);
    HcclCommConfigInit(&config);
    config.hcclBufferSize = 0;
    assert_int_equal(init_with(&config, &comm), HCCL_E_PARA);
    HcclCommConfigInit(&config);
    memset(config.hcclAlgo, 'x', sizeof(config.hcclAlgo));
    assert_int_equal(init_with(&config, &comm), HCCL_E_PARA);
    HcclCommConfigInit(&config);
    config.hcclExecTimeOut = -5; /* ignored with a warning, as in CANN */
    assert_int_equal(init_with(&config, &comm), HCCL_SUCCESS);
    assert_int_equal(peek(comm)->settings.exec_timeout_s, 1836);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
}

/* HCCL_DETERMINISTIC wins over HcclSetConfig (CANN's rule); strict is level 2. */
static void test_deterministic_precedence(void **state)
{
    HcclConfigValue value = {.value = 2};
    HcclComm comm;

    (void)state;
    assert_int_equal(HcclGetCommConfigCapability(), 12);
    unsetenv("HCCL_DETERMINISTIC");
    assert_int_equal(HcclSetConfig(HCCL_DETERMINISTIC, value), HCCL_SUCCESS);
    value.value = -1;
    assert_int_equal(HcclGetConfig(HCCL_DETERMINISTIC, &value), HCCL_SUCCESS);
    assert_int_equal(value.value, 2);
    assert_int_equal(init_with(NULL, &comm), HCCL_E_PTR); /* Config with a NULL config */
    setenv("HCCL_DETERMINISTIC", "true", 1);
    value.value = 0;
    assert_int_equal(HcclSetConfig(HCCL_DETERMINISTIC, value), HCCL_SUCCESS); /* not applied */
    assert_int_equal(HcclGetConfig(HCCL_DETERMINISTIC, &value), HCCL_SUCCESS);
    assert_int_equal(value.value, 1);
    setenv("HCCL_DETERMINISTIC", "STRICT", 1);
    assert_int_equal(HcclGetConfig(HCCL_DETERMINISTIC, &value), HCCL_SUCCESS);
    assert_int_equal(value.value, 2);
    unsetenv("HCCL_DETERMINISTIC");
    assert_int_equal(HcclGetConfig(HCCL_DETERMINISTIC, &value), HCCL_SUCCESS);
    assert_int_equal(value.value, 2); /* HcclSetConfig's value again */
    value.value = 3;
    assert_int_equal(HcclSetConfig(HCCL_DETERMINISTIC, value), HCCL_E_PARA);
    value.value = 0;
    assert_int_equal(HcclSetConfig(HCCL_DETERMINISTIC, value), HCCL_SUCCESS);
}

static void test_lookups_by_name(void **state)
{
    HcclCommConfig config;
    HcclComm comm, found = NULL;
    HcclCommStatus status = HCCL_COMM_STATUS_INVALID;
    bool in_group = true;

    (void)state;
    HcclCommConfigInit(&config);
    strcpy(config.hcclCommName, "named_comm");
    assert_int_equal(init_with(&config, &comm), HCCL_SUCCESS);
    assert_int_equal(HcclCommGetHandleWithName("named_comm", &found), HCCL_SUCCESS);
    assert_ptr_equal(found, comm);
    assert_int_equal(HcclCommGetStatus("named_comm", &status), HCCL_SUCCESS);
    assert_int_equal(status, HCCL_COMM_STATUS_READY);
    assert_int_equal(HcclCommGetHandleWithName("other", &found), HCCL_E_PARA);
    assert_int_equal(HcclCommGetStatus("other", &status), HCCL_E_NOT_FOUND);
    assert_int_equal(HcclCommGetHandleWithName(NULL, &found), HCCL_E_PTR);
    assert_int_equal(HcclCommGetStatus("named_comm", NULL), HCCL_E_PTR);
    assert_int_equal(HcclGroupStatusGet(&in_group), HCCL_SUCCESS);
    assert_false(in_group);
    assert_int_equal(HcclGroupStart(), HCCL_SUCCESS);
    assert_int_equal(HcclGroupStatusGet(&in_group), HCCL_SUCCESS);
    assert_true(in_group);
    assert_int_equal(HcclGroupEnd(), HCCL_SUCCESS);
    assert_int_equal(HcclGroupStatusGet(&in_group), HCCL_SUCCESS);
    assert_false(in_group);
    assert_int_equal(HcclGroupStatusGet(NULL), HCCL_E_PTR);
    {
        uint32_t ranks[1] = {0};
        bool backup[1] = {true};

        assert_int_equal(HcclCommWorkingDevNicSet(comm, ranks, backup, 1), HCCL_E_NOT_SUPPORT);
        assert_int_equal(HcclCommWorkingDevNicSet(comm, NULL, backup, 1), HCCL_E_PTR);
        assert_int_equal(HcclCommWorkingDevNicSet(NULL, ranks, backup, 1), HCCL_E_PTR);
    }
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
    assert_int_equal(HcclCommGetHandleWithName("named_comm", &found), HCCL_E_PARA);
    assert_int_equal(HcclCommGetStatus("named_comm", &status), HCCL_E_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_layout_is_not_read_past_its_end),
        cmocka_unit_test(test_current_layout_fields),
        cmocka_unit_test(test_versions_gate_fields),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_deterministic_precedence),
        cmocka_unit_test(test_lookups_by_name),
    };

    unsetenv("HCCL_EXEC_TIMEOUT");
    unsetenv("HCCL_DETERMINISTIC");
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
