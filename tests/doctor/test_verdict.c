/*
 * hccl-doctor's verdicts on made-up measurements: which pairs are DEGRADED or DOWN, which pairs
 * are compared with which, expectations, the environment checks and the exit status.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "doctor.h"

#define N 4

typedef struct {
    doctor_t doc;
    doc_info_t infos[N];
    int8_t cma[N * N];
    doc_pair_t pairs[N * N];
    doc_transport_t tr[N * N];
    doc_link_t links[N * N];
} fixture_t;

/* Four healthy ranks on one host, each on its own CPU: 10 GB/s, 1 us everywhere. */
static fixture_t *healthy(void)
{
    fixture_t *f = calloc(1, sizeof(*f));

    f->doc = (doctor_t){.fraction = 0.5, .size = N, .infos = f->infos, .cma = f->cma, .pairs = f->pairs,
                        .bw_bytes = 1 << 22, .lat_iters = 10};
    for (uint32_t r = 0; r < N; r++) {
        f->infos[r] = (doc_info_t){.rank = r, .pid = 100 + (int32_t)r, .version = 100, .cpus_online = N,
                                   .cpus_allowed = 1, .memfd_ok = 1, .mtu = 1500, .loadavg1 = 0.5};
        snprintf(f->infos[r].hostname, sizeof(f->infos[r].hostname), "host");
        snprintf(f->infos[r].host_id, sizeof(f->infos[r].host_id), "id");
        snprintf(f->infos[r].lib_build, sizeof(f->infos[r].lib_build), "abc");
        f->infos[r].cpu_mask[0] = (uint8_t)(1u << r);
        for (uint32_t b = 0; b < N; b++)
            f->cma[r * N + b] = 1;
    }
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++) {
            f->pairs[a * N + b] = (doc_pair_t){.measured = 1, .lat_us = 1.0, .bw_ab = 10.0, .bw_ba = 10.0};
            doc_transport_probe_ops.describe(f->infos, f->cma, N, a, b, &f->tr[a * N + b]);
        }
    return f;
}

static doc_link_status_t status(fixture_t *f, uint32_t a, uint32_t b)
{
    return f->links[a * N + b].status;
}

static void all_ok_exit_zero(void **state)
{
    fixture_t *f = healthy();
    doc_check_t checks[DOC_MAX_CHECKS];
    uint32_t n;

    (void)state;
    doc_classify(&f->doc, f->tr, f->links);
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++)
            assert_int_equal(status(f, a, b), LINK_OK);
    assert_string_equal(f->tr[0 * N + 1].kind, "shm");
    assert_true(f->tr[0 * N + 1].cma);
    n = doc_env_checks(&f->doc, checks);
    assert_int_equal(doc_report(&f->doc, f->tr, f->links, checks, n, NULL), 0);
    free(f);
}

/* One slow pair among six: only it, and the exit status says so. */
static void slow_pair_degraded(void **state)
{
    fixture_t *f = healthy();
    doc_check_t checks[DOC_MAX_CHECKS];

    (void)state;
    f->pairs[1 * N + 2].bw_ba = 4.0; /* 0.4 of the median, one direction is enough */
    f->pairs[0 * N + 3].lat_us = 2.5; /* 2.5x the median latency */
    f->pairs[0 * N + 1].bw_ab = 6.0;  /* 0.6 of the median: noise, not a fault */
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 1, 2), LINK_DEGRADED);
    assert_non_null(strstr(f->links[1 * N + 2].reason, "bandwidth 4.00 GB/s < 0.50 x the median 10.00"));
    assert_int_equal(status(f, 0, 3), LINK_DEGRADED);
    assert_non_null(strstr(f->links[0 * N + 3].reason, "latency 2.5 us"));
    assert_int_equal(status(f, 0, 1), LINK_OK);
    assert_int_equal(status(f, 0, 2), LINK_OK);
    assert_int_equal(status(f, 1, 3), LINK_OK);
    assert_int_equal(status(f, 2, 3), LINK_OK);
    assert_int_equal(doc_report(&f->doc, f->tr, f->links, checks, doc_env_checks(&f->doc, checks), NULL), 1);
    free(f);
}

static void down_pair(void **state)
{
    fixture_t *f = healthy();

    (void)state;
    f->pairs[0 * N + 3].down = 1;
    snprintf(f->pairs[0 * N + 3].why, sizeof(f->pairs[0].why), "no answer within 2.0 s");
    f->pairs[0 * N + 3].bw_ab = 0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 0, 3), LINK_DOWN);
    assert_string_equal(f->links[0 * N + 3].reason, "no answer within 2.0 s");
    /* A DOWN pair is not part of anyone's reference: the others stay OK. */
    assert_int_equal(status(f, 1, 2), LINK_OK);
    free(f);
}

/* Ranks 0 and 2 share CPU 0, ranks 1 and 3 CPU 1: those two pairs are slow by nature and are
 * compared only with each other, never with the pairs that run in parallel. */
static void shared_cpu_pairs_are_their_own_class(void **state)
{
    fixture_t *f = healthy();

    (void)state;
    f->infos[2].cpu_mask[0] = 1u << 0;
    f->infos[3].cpu_mask[0] = 1u << 1;
    f->pairs[0 * N + 2].lat_us = 20.0;
    f->pairs[1 * N + 3].lat_us = 25.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 0, 2), LINK_OK);
    assert_int_equal(status(f, 1, 3), LINK_OK);
    assert_int_not_equal(f->links[0 * N + 2].cls, f->links[0 * N + 1].cls);
    /* Their latency is the scheduler's and is not judged; their bandwidth is, and within a class of
     * two the reference is the better one: 4 GB/s is under half of 10. */
    f->pairs[1 * N + 3].lat_us = 900.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 1, 3), LINK_OK);
    f->pairs[1 * N + 3].bw_ab = 4.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 1, 3), LINK_DEGRADED);
    assert_non_null(strstr(f->links[1 * N + 3].reason, "the best 10.00 of 2 comparable pairs"));
    free(f);
}

static void expectations(void **state)
{
    fixture_t *f = healthy();

    (void)state;
    f->doc.expect_bw = 12.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 0, 1), LINK_DEGRADED);
    assert_non_null(strstr(f->links[0 * N + 1].reason, "< expected 12.00"));
    f->doc.expect_bw = 0;
    f->doc.expect_lat = 0.5;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 2, 3), LINK_DEGRADED);
    free(f);
}

static const doc_check_t *find(const doc_check_t *c, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(c[i].name, name) == 0)
            return &c[i];
    fail_msg("no check named %s", name);
    return NULL;
}

static void environment(void **state)
{
    fixture_t *f = healthy();
    doc_check_t c[DOC_MAX_CHECKS];
    uint32_t n;

    (void)state;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "library")->level, CHECK_OK);
    assert_int_equal(find(c, n, "cross-memory attach")->level, CHECK_OK);
    assert_int_equal(find(c, n, "CPU binding")->level, CHECK_OK);
    assert_string_equal(find(c, n, "clock")->text, "one host, one clock");
    /* A rank with another library version fails the job; another build of the same is a warning. */
    f->infos[3].version = 200;
    snprintf(f->infos[2].lib_build, sizeof(f->infos[2].lib_build), "def");
    f->cma[1 * N + 2] = 0;
    f->infos[0].ptrace_scope = 1;
    f->infos[1].cpus_online = f->infos[2].cpus_online = 2;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "library")->level, CHECK_FAIL);
    assert_non_null(strstr(find(c, n, "library")->text, "rank 3 (host host) runs libhccl 0.2.0, rank 0 runs 0.1.0"));
    assert_non_null(strstr(find(c, n, "library")->text, "rank 2 (host host) runs another build"));
    assert_int_equal(find(c, n, "cross-memory attach")->level, CHECK_WARN);
    assert_non_null(strstr(find(c, n, "cross-memory attach")->text, "only ancestors may attach"));
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(doc_report(&f->doc, f->tr, f->links, c, n, NULL), 1); /* a FAIL alone is enough */
    /* Four ranks on two CPUs, two of them sharing one. */
    for (uint32_t r = 0; r < N; r++)
        f->infos[r].cpus_online = 2;
    f->infos[2].cpu_mask[0] = 1u << 0;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "CPU binding")->level, CHECK_WARN);
    assert_non_null(strstr(find(c, n, "CPU binding")->text, "oversubscribed"));
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_ok_exit_zero),
        cmocka_unit_test(slow_pair_degraded),
        cmocka_unit_test(down_pair),
        cmocka_unit_test(shared_cpu_pairs_are_their_own_class),
        cmocka_unit_test(expectations),
        cmocka_unit_test(environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
