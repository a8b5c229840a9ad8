/* The configuration table: defaults, valid and invalid values, booleans, strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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
        setenv("HCCL_DETERMINISTIC", yes[i], 1);
        assert_int_equal(hc_config_int(HC_CFG_DETERMINISTIC), 1);
    }
    for (size_t i = 0; i < 4; i++) {
        setenv("HCCL_DETERMINISTIC", no[i], 1);
        assert_int_equal(hc_config_int(HC_CFG_DETERMINISTIC), 0);
    }
    setenv("HCCL_DETERMINISTIC", "maybe", 1);
    assert_int_equal(hc_config_int(HC_CFG_DETERMINISTIC), 0);
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
        cmocka_unit_test(test_table_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
