/* Prints docs/env.md from the configuration table, so the documentation cannot drift from the
 * code (tests/unit compares the committed file with this output). */
#include <stdio.h>

#include "hc_config.h"

int main(void)
{
    printf("# Environment variables\n\n");
    printf("Generated from `src/core/config.c` by `tools/hc_env_doc`; do not edit by hand.\n");
    printf("Precedence: `HcclCommConfig` field > environment variable > default.\n\n");
    printf("| variable | type | default | meaning |\n|---|---|---|---|\n");
    for (int id = 0; id < HC_CFG_COUNT; id++) {
        const hc_config_row_t *row = hc_config_row((hc_config_id_t)id);
        const char *type = row->type == HC_CFG_TYPE_INT ? "integer" : row->type == HC_CFG_TYPE_BOOL ? "boolean" : "string";
        printf("| `%s` | %s | `%s` | %s |\n", row->name, type, row->default_value[0] ? row->default_value : "(unset)",
               row->help);
    }
    return 0;
}
