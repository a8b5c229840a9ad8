/* The configuration table: defaults, valid and invalid values, booleans, strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hc_comm.h"
#include "hc_config.h"

static void test_defaults(void **state)
{
    (void)state;
    unsetenv("HCCL_CONNECT_TIMEOUT");
    unsetenv("HCCL_BUFFSIZE");
    assert_int_equal(hc_config_int(HC_CFG_CONNECT_TIMEOUT), 120);
    assert_int_equal(hc_config_int(HC_CFG_BUFFSIZE), 200);
    assert_int_equal(hc_config_int(HC_CFG_EXEC_TIMEOUT), 1836);
    assert_null(hc_config_str(HC_CFG_IF_IP));
    assert_string_equal(hc_config_str(HC_CFG_TRANSPORT), "auto");
}

static void test_valid_and_invalid(void **state)
{
    (void)state;
    setenv("HCCL_CONNECT_TIMEOUT", "7", 1);
    assert_int_equal(hc_config_int(HC_CFG_CONNECT_TIMEOUT), 7);
    setenv("HCCL_CONNECT_TIMEOUT", "7s", 1); /* not a number: default, with one warning */
    assert_int_equal(hc_config_int(HC_CFG_CONNECT_TIMEOUT), 120);
    setenv("HCCL_CONNECT_TIMEOUT", "0", 1); /* below the minimum */
    assert_int_equal(hc_config_int(HC_CFG_CONNECT_TIMEOUT), 120);
    setenv("HCCL_IF_BASE_PORT", "70000", 1); /* above the maximum */
    assert_int_equal(hc_config_int(HC_CFG_IF_BASE_PORT), 0);
    unsetenv("HCCL_CONNECT_TIMEOUT");
    unsetenv("HCCL_IF_BASE_PORT");
}

static void test_booleans(void **state)
{
    static const char *const yes[] = {"1", "true", "TRUE", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "Off"};

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        setenv("HOSTCCL_CMA", yes[i], 1);
        assert_int_equal(hc_config_int(HC_CFG_CMA), 1);
    }
    for (size_t i = 0; i < 4; i++) {
        setenv("HOSTCCL_CMA", no[i], 1);
        assert_int_equal(hc_config_int(HC_CFG_CMA), 0);
    }
    setenv("HOSTCCL_CMA", "maybe", 1);
    assert_int_equal(hc_config_int(HC_CFG_CMA), 1); /* the default */
    unsetenv("HOSTCCL_CMA");
}

/* HCCL_DETERMINISTIC takes CANN's words in any case (and the numbers); unset or invalid: -1. */
static void test_deterministic_levels(void **state)
{
    static const struct {
        const char *text;
        int level;
    } cases[] = {{"false", 0}, {"FALSE", 0}, {"0", 0}, {"true", 1}, {"True", 1}, {"1", 1},
                 {"strict", 2}, {"STRICT", 2}, {"2", 2}, {"maybe", -1}, {"3", -1}};

    (void)state;
    unsetenv("HCCL_DETERMINISTIC");
    assert_int_equal(hc_comm_env_deterministic(), -1);
    assert_int_equal(hc_comm_global_deterministic(), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("HCCL_DETERMINISTIC", cases[i].text, 1);
        assert_int_equal(hc_comm_env_deterministic(), cases[i].level);
    }
    unsetenv("HCCL_DETERMINISTIC");
}

static void test_table_complete(void **state)
{
    (void)state;
    for (int id = 0; id < HC_CFG_COUNT; id++) {
        const hc_config_row_t *row = hc_config_row((hc_config_id_t)id);
        assert_non_null(row->name);
        assert_non_null(row->help);
        assert_non_null(row->default_value);
    }
    assert_null(hc_config_row(HC_CFG_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_valid_and_invalid),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_deterministic_levels),
        cmocka_unit_test(test_table_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
