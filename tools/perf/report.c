/*
 * The perf tools' table and JSON report.
 *
 * The table keeps hccl_test's four columns, in its order and with its names, so scripts written for
 * hccl_test's output (split on '|', column 3 is check_result) keep working; bus_bandwidth(GB/s)
 * comes last for the same reason.
 */
#include <errno.h>
#include <string.h>

#include "perf.h"

const char *hc_perf_check_name(hc_perf_check_t check)
{
    switch (check) {
    case HC_PERF_CHECK_SUCCESS:
        return "success";
    case HC_PERF_CHECK_FAILED:
        return "failed";
    default:
        return "NULL";
    }
}

void hc_perf_print_header(FILE *out)
{
    fprintf(out, "%-17s | %-14s | %-20s | %-12s | %s\n", "data_size(Bytes)", "aveg_time(us)", "alg_bandwidth(GB/s)",
            "check_result", "bus_bandwidth(GB/s)");
}

void hc_perf_print_row(FILE *out, const hc_perf_row_t *row)
{
    fprintf(out, "%-17llu | %-14.2f | %-20.5f | %-12s | %.5f\n", (unsigned long long)row->data_bytes,
            row->avg_time_us, row->alg_bw_gbs, hc_perf_check_name(row->check), row->bus_bw_gbs);
    fflush(out);
}

static void write_json_rows(FILE *out, const hc_perf_row_t *rows, size_t nrows)
{
    for (size_t i = 0; i < nrows; i++) {
        fprintf(out,
                "    {\"data_size\": %llu, \"aveg_time_us\": %.3f, \"alg_bandwidth_gbs\": %.6f, "
                "\"bus_bandwidth_gbs\": %.6f, \"check_result\": \"%s\"}%s\n",
                (unsigned long long)rows[i].data_bytes, rows[i].avg_time_us, rows[i].alg_bw_gbs, rows[i].bus_bw_gbs,
                hc_perf_check_name(rows[i].check), i + 1 < nrows ? "," : "");
    }
}

/* Every string written here is one of the tools' own names (dtype, op, collective), which need
 * no JSON escaping; every number is finite because the driver never divides by a zero time. */
int hc_perf_write_json(const char *path, const hc_perf_report_t *report, const hc_perf_row_t *rows, size_t nrows)
{
    const hc_perf_opts_t *opts = report->opts;
    FILE *out = fopen(path, "w");
    int write_error;

    if (out == NULL) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(out,
            "{\n  \"tool\": \"%s\",\n  \"collective\": \"%s\",\n  \"ranks\": %u,\n  \"datatype\": \"%s\",\n"
            "  \"op\": \"%s\",\n  \"root\": %u,\n  \"iters\": %u,\n  \"warmup_iters\": %u,\n  \"check\": %d,\n"
            "  \"bus_factor\": %.6f,\n  \"rows\": [\n",
            report->tool, report->coll->name, report->nranks, opts->dtype->name,
            report->coll->reduces ? hc_perf_op_name(opts->op) : "none", opts->root, opts->iters, opts->warmup_iters,
            opts->check, report->coll->bus_factor(report->nranks));
    write_json_rows(out, rows, nrows);
    fprintf(out, "  ]\n}\n");
    write_error = ferror(out);
    if (fclose(out) != 0 || write_error) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
