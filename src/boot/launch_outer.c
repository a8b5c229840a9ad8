/*
 * Which launcher started this process, when several left their variables (docs/multihost.md,
 * "Launcher precedence"). hccl-run gives each rank HOSTCCL_RUN_OUTER, a digest of the other
 * launchers' variables as hccl-run itself saw them. A rank that sees the same values was started
 * by hccl-run (inside, say, an srun step: `srun -n 1 hccl-run -n 4 prog`); one that sees others was
 * started by a launcher that hccl-run ran (`hccl-run -n 1 srun -n 4 prog`), whose variables win.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_launch.h"

/* What another launcher sets for each process it starts, differently for each. */
static const char *const inner_vars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                                         "PMIX_NAMESPACE", "PMIX_RANK", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                         "SLURM_PROCID"};

void hc_launch_outer_digest(char out[HC_LAUNCH_OUTER_BYTES])
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */

    for (size_t i = 0; i < sizeof(inner_vars) / sizeof(inner_vars[0]); i++) {
        const char *v = getenv(inner_vars[i]);
        const char *parts[3] = {inner_vars[i], "=", v != NULL ? v : "\x01"};
        for (int k = 0; k < 3; k++)
            for (const char *p = parts[k]; *p != '\0'; p++)
                h = (h ^ (uint8_t)*p) * 1099511628211ull;
        h = (h ^ ';') * 1099511628211ull;
    }
    snprintf(out, HC_LAUNCH_OUTER_BYTES, "%016llx", (unsigned long long)h);
}
