/*
 * hccl-doctor's verdicts on made-up measurements: which pairs are DEGRADED or DOWN, which pairs
 * are compared with which, expectations, the transports as the library names them, the
 * environment checks (inside a host and between hosts) and the exit status.
 */
#include <errno.h>
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
    char link_text[N * N * DOC_LINK_LEN];
    doc_listen_t listen[N];
    doc_reach_t reach[N];
} fixture_t;

static void describe_all(fixture_t *f)
{
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++)
            doc_transport_library_ops.describe(&f->doc, a, b, &f->tr[a * N + b]);
}

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
        snprintf(f->infos[r].ifname, sizeof(f->infos[r].ifname), "eth0");
        f->infos[r].cpu_mask[0] = (uint8_t)(1u << r);
        for (uint32_t b = 0; b < N; b++)
            f->cma[r * N + b] = 1;
    }
    /* No link texts: the library could not say, and the doctor's probe names the transports. */
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++)
            f->pairs[a * N + b] = (doc_pair_t){.measured = 1, .lat_us = 1.0, .bw_ab = 10.0, .bw_ba = 10.0};
    describe_all(f);
    return f;
}

static void set_link(fixture_t *f, uint32_t a, uint32_t b, const char *text)
{
    snprintf(&f->link_text[(a * N + b) * DOC_LINK_LEN], DOC_LINK_LEN, "%s", text);
}

/* Two hosts of two ranks on two machines (ranks 0-1 on h1, 2-3 on h2), as the library describes
 * them: shared memory inside each host, TCP between them; TCP pairs at 1 GB/s and 50 us. */
static fixture_t *two_hosts(void)
{
    fixture_t *f = healthy();
    const char *addr[N] = {"10.0.0.1:41000", "10.0.0.1:41001", "10.0.0.2:42000", "10.0.0.2:42001"};

    f->doc.link_text = f->link_text;
    for (uint32_t r = 0; r < N; r++) {
        snprintf(f->infos[r].hostname, sizeof(f->infos[r].hostname), "h%u", 1 + r / 2);
        snprintf(f->infos[r].host_id, sizeof(f->infos[r].host_id), "boot%u/n1/p1", 1 + r / 2);
        doc_addr_host(addr[r], f->infos[r].ifaddr, sizeof(f->infos[r].ifaddr));
        f->infos[r].if_from_library = 1;
        f->infos[r].cpu_mask[0] = (uint8_t)(1u << (r % 2)); /* each machine's CPUs 0 and 1 */
        f->infos[r].cpus_online = 2;
        for (uint32_t b = 0; b < N; b++) {
            char text[DOC_LINK_LEN];
            if (b == r)
                snprintf(text, sizeof(text), "self");
            else if (b / 2 == r / 2)
                snprintf(text, sizeof(text), "shm+cma");
            else
                snprintf(text, sizeof(text), "tcp %s x2", addr[b]);
            set_link(f, r, b, text);
            f->cma[r * N + b] = b / 2 == r / 2 ? 1 : -1;
        }
    }
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++)
            if (a / 2 != b / 2)
                f->pairs[a * N + b] = (doc_pair_t){.measured = 1, .lat_us = 50.0, .bw_ab = 1.0, .bw_ba = 1.0};
    describe_all(f);
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
    f->doc.expect_bw[KIND_SHM] = 12.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 0, 1), LINK_DEGRADED);
    assert_non_null(strstr(f->links[0 * N + 1].reason, "< expected 12.00"));
    f->doc.expect_bw[KIND_SHM] = 0;
    f->doc.expect_lat[KIND_SHM] = 0.5;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 2, 3), LINK_DEGRADED);
    /* An expectation for TCP says nothing about shared-memory links. */
    f->doc.expect_lat[KIND_SHM] = 0;
    f->doc.expect_lat[KIND_TCP] = 0.5;
    f->doc.expect_bw[KIND_TCP] = 100.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 2, 3), LINK_OK);
    free(f);
}

/* The library's link texts name the transport, the addresses and the sockets of every pair. */
static void library_transports(void **state)
{
    fixture_t *f = two_hosts();

    (void)state;
    assert_string_equal(f->tr[0 * N + 1].kind, "shm");
    assert_string_equal(f->tr[0 * N + 1].source, "library");
    assert_true(f->tr[0 * N + 1].cma);
    assert_string_equal(f->tr[1 * N + 2].kind, "tcp");
    assert_int_equal(f->tr[1 * N + 2].kind_id, KIND_TCP);
    assert_string_equal(f->tr[1 * N + 2].addr_a, "10.0.0.1:41001");
    assert_string_equal(f->tr[1 * N + 2].addr_b, "10.0.0.2:42000");
    assert_int_equal(f->tr[1 * N + 2].nsocks, 2);
    assert_string_equal(f->tr[1 * N + 2].detail, "eth0 10.0.0.1:41001 <-> eth0 10.0.0.2:42000 x2");
    /* The library's word wins over the host identity: TCP between ranks of one host. */
    set_link(f, 0, 1, "tcp 10.0.0.1:41001 x3");
    set_link(f, 1, 0, "tcp 10.0.0.1:41000 x3");
    describe_all(f);
    assert_string_equal(f->tr[0 * N + 1].kind, "tcp");
    assert_int_equal(f->tr[0 * N + 1].nsocks, 3);
    /* The two sides disagree: said, not guessed. */
    set_link(f, 1, 0, "shm");
    describe_all(f);
    assert_non_null(strstr(f->tr[0 * N + 1].detail, "rank 1 says \"shm\""));
    /* Where the library cannot say, the doctor's probe answers. */
    set_link(f, 2, 3, "");
    describe_all(f);
    assert_string_equal(f->tr[2 * N + 3].source, "probe");
    assert_string_equal(f->tr[2 * N + 3].kind, "shm");
    free(f);
}

/* TCP links are compared with TCP links only: 50x slower than shared memory is their nature, and a
 * TCP pair 10x slower than the other TCP pairs is DEGRADED. Ranks on different machines never
 * share a CPU, whatever their CPU numbers. */
static void tcp_class(void **state)
{
    fixture_t *f = two_hosts();

    (void)state;
    doc_classify(&f->doc, f->tr, f->links);
    for (uint32_t a = 0; a < N; a++)
        for (uint32_t b = a + 1; b < N; b++)
            assert_int_equal(status(f, a, b), LINK_OK);
    assert_int_equal(f->links[0 * N + 2].cls, f->links[1 * N + 2].cls); /* CPU 0 and CPU 0 of two machines */
    assert_int_not_equal(f->links[0 * N + 2].cls, f->links[0 * N + 1].cls);
    f->pairs[1 * N + 3].bw_ab = 0.1;
    f->pairs[0 * N + 2].lat_us = 500.0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 1, 3), LINK_DEGRADED);
    assert_non_null(strstr(f->links[1 * N + 3].reason, "0.10 GB/s < 0.50 x the median 1.00 of 4 comparable pairs"));
    assert_int_equal(status(f, 0, 2), LINK_DEGRADED);
    assert_int_equal(status(f, 0, 3), LINK_OK);
    assert_int_equal(status(f, 1, 2), LINK_OK);
    assert_int_equal(status(f, 0, 1), LINK_OK);
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

/* Checks between hosts: interfaces, MTU, closed ports, clock, library versions. */
static void between_hosts(void **state)
{
    fixture_t *f = two_hosts();
    doc_check_t c[DOC_MAX_CHECKS];
    const doc_check_t *fw;
    uint32_t n;

    (void)state;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "MTU")->level, CHECK_OK);
    assert_int_equal(find(c, n, "interfaces")->level, CHECK_OK);
    assert_non_null(strstr(find(c, n, "interfaces")->text, "h2: eth0 10.0.0.2, MTU 1500"));
    assert_int_equal(find(c, n, "firewall")->level, CHECK_INFO); /* not run */
    assert_int_equal(find(c, n, "clock")->level, CHECK_OK);
    /* Host 2 with a smaller MTU, another HCCL_SOCKET_IFNAME on rank 3, a clock 0.3 s ahead. */
    f->infos[2].mtu = f->infos[3].mtu = 1400;
    snprintf(f->infos[3].env_ifname, sizeof(f->infos[3].env_ifname), "eth1");
    f->pairs[0 * N + 2].clock_measured = 1;
    f->pairs[0 * N + 2].clock_offset_us = 300000.0;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "MTU")->level, CHECK_WARN);
    assert_non_null(strstr(find(c, n, "MTU")->text, "h2 eth0 1400 (lower)"));
    assert_int_equal(find(c, n, "interfaces")->level, CHECK_WARN);
    assert_non_null(strstr(find(c, n, "interfaces")->text, "rank 3 on h2 has HCCL_SOCKET_IFNAME=\"eth1\""));
    assert_int_equal(find(c, n, "clock")->level, CHECK_WARN);
    assert_non_null(strstr(find(c, n, "clock")->text, "rank 2 (h2) +300000 us"));
    /* The port check: host 2's listener at 42000 (base 42000, ports 0 and 1 open); rank 0 could not
     * reach port 42001 (dropped), rank 1 was refused at 42000. */
    f->doc.listen = f->listen;
    f->doc.reach = f->reach;
    f->doc.port_wait_s = 2.0;
    for (uint32_t r = 0; r < N; r++)
        snprintf(f->infos[r].env_base_port, sizeof(f->infos[r].env_base_port), "42000");
    snprintf(f->listen[2].addr, sizeof(f->listen[2].addr), "10.0.0.2");
    f->listen[2].base = 42000;
    f->listen[2].open_mask = 3;
    f->reach[0] = (doc_reach_t){.tried = 2, .failed = 1, .nfail = 1, .fail = {{.to = 2, .mask = 2, .err = ETIMEDOUT}}};
    f->reach[1] = (doc_reach_t){.tried = 2, .failed = 1, .nfail = 1, .fail = {{.to = 2, .mask = 1, .err = ECONNREFUSED}}};
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "firewall")->level, CHECK_FAIL);
    assert_non_null(strstr(find(c, n, "firewall")->text, "rank 0 (h1) -> h2 10.0.0.2 port 42001: no answer (dropped) "
                                                        "within 2.0 s"));
    assert_non_null(strstr(find(c, n, "firewall")->text, "rank 1 (h1) -> h2 10.0.0.2 port 42000: refused"));
    assert_non_null(strstr(find(c, n, "firewall")->text, "ports 42000-42031"));
    /* Ranks that met the same closed ports are one line; the ports are ranges. */
    f->reach[1] = f->reach[0];
    f->reach[0].fail[0].mask = f->reach[1].fail[0].mask = 0xfffffff0u;
    n = doc_env_checks(&f->doc, c);
    fw = find(c, n, "firewall");
    assert_non_null(strstr(fw->text, "ranks 0-1 (h1) -> h2 10.0.0.2 ports 42004-42031: no answer"));
    assert_null(strstr(fw->text, "rank 1 "));
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(doc_report(&f->doc, f->tr, f->links, c, n, NULL), 1);
    f->reach[0].failed = f->reach[1].failed = 0;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "firewall")->level, CHECK_OK);
    /* Another library version on another host fails the job. */
    f->infos[3].version = 101;
    n = doc_env_checks(&f->doc, c);
    assert_int_equal(find(c, n, "library")->level, CHECK_FAIL);
    assert_non_null(strstr(find(c, n, "library")->text, "rank 3 (host h2) runs libhccl 0.1.1"));
    free(f);
}

/* A run that stopped early exits 1 and says so, whatever it measured before. */
static void stopped_run(void **state)
{
    fixture_t *f = healthy();
    doc_check_t c[DOC_MAX_CHECKS];
    uint32_t n;

    (void)state;
    n = doc_env_checks(&f->doc, c);
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(doc_report(&f->doc, f->tr, f->links, c, n, NULL), 0);
    snprintf(f->doc.stopped, sizeof(f->doc.stopped), "the barrier after a pair timed out");
    assert_int_equal(doc_report(&f->doc, f->tr, f->links, c, n, NULL), 1);
    f->pairs[2 * N + 3].measured = 0;
    doc_classify(&f->doc, f->tr, f->links);
    assert_int_equal(status(f, 2, 3), LINK_UNTESTED);
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
        cmocka_unit_test(library_transports),
        cmocka_unit_test(tcp_class),
        cmocka_unit_test(environment),
        cmocka_unit_test(between_hosts),
        cmocka_unit_test(stopped_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
