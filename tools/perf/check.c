/*
 * Filling the inputs and verifying the results of one run, element by element, against the
 * collective's expectation (values.c says what the values are; collectives.c where they go).
 */
#include <inttypes.h>
#include <string.h>

#include "perf.h"

/* Mismatches printed per rank and size before the rest are only counted. */
#define MAX_REPORTED_MISMATCHES 5

/* Every byte of the receive buffer before a run: no correct result leaves it in place, because
 * the values are re-salted for every size. */
#define POISON_BYTE 0xa5

void hc_perf_fill(const hc_perf_run_t *run, const hc_perf_layout_t *layout)
{
    const hc_perf_dtype_t *dtype = run->opts->dtype;
    char *send = run->send_buf;

    for (uint64_t i = 0; i < layout->send_elems; i++)
        dtype->store(send + i * dtype->size, run->coll->input(run, i));
    if (!layout->in_place)
        memset(run->recv_buf, POISON_BYTE, layout->recv_elems * dtype->size);
    for (uint32_t r = 0; r < run->nranks; r++) {
        run->counts[r] = run->count;
        run->displs[r] = r * run->count;
    }
}

/* Integers compare bit for bit (after the same wrap the library applies); floating values compare
 * as numbers, so that a -0 where +0 was expected is not called wrong. */
static int element_matches(const hc_perf_dtype_t *dtype, const void *elem, double expected)
{
    unsigned char want[8];

    if (dtype->is_float)
        return dtype->load(elem) == expected;
    dtype->store(want, expected);
    return memcmp(elem, want, dtype->size) == 0;
}

uint64_t hc_perf_verify(const hc_perf_run_t *run, const hc_perf_layout_t *layout, const char *tool, uint64_t bytes)
{
    const hc_perf_dtype_t *dtype = run->opts->dtype;
    const char *result = layout->in_place ? run->send_buf : run->recv_buf;
    uint64_t wrong = 0;

    for (uint64_t i = 0; i < layout->check_elems; i++) {
        double expected = run->coll->expected(run, i);
        const char *elem = result + i * dtype->size;
        if (element_matches(dtype, elem, expected))
            continue;
        if (wrong++ < MAX_REPORTED_MISMATCHES)
            fprintf(stderr, "%s: rank %u: data_size %" PRIu64 ": element %" PRIu64 " is %.17g, expected %.17g\n",
                    tool, run->rank, bytes, i, dtype->load(elem), expected);
    }
    if (wrong > MAX_REPORTED_MISMATCHES)
        fprintf(stderr, "%s: rank %u: data_size %" PRIu64 ": %" PRIu64 " of %" PRIu64 " elements are wrong\n", tool,
                run->rank, bytes, wrong, layout->check_elems);
    return wrong;
}
