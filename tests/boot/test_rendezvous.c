/*
 * The root info's rendezvous listener faces anyone who can reach it (issue 12, item 7):
 *  - it binds loopback when the launcher says every rank is on this host, and where HCCL_IF_IP says;
 *  - clients that have not presented the token cannot stall it (a partial message does not block the
 *    server), are dropped when they do not complete their hello in time, and are capped (a newcomer
 *    displaces the oldest);
 *  - the token appears neither in the communicator's default name nor in any log line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <hccl/hccl.h>

#include "boot_proto.h"
#include "capture.h"
#include "hc_log.h"
#include "hc_time.h"

static void set_launch(const char *world, const char *local_world)
{
    setenv("RANK", "0", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", world, 1);
    setenv("LOCAL_WORLD_SIZE", local_world, 1);
}

static void clear_launch(void)
{
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("LOCAL_WORLD_SIZE");
    unsetenv("HCCL_IF_IP");
}

static void root_addr(const HcclRootInfo *info, hc_sockaddr_t *addr)
{
    hc_root_wire_t wire;

    assert_int_equal(hc_boot_root_decode(info, &wire, addr), HCCL_SUCCESS);
}

static int is_loopback(const hc_sockaddr_t *addr)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->ss;

    return addr->ss.ss_family == AF_INET && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
}

static int have_non_loopback_v4(void)
{
    struct ifaddrs *list, *ifa;
    int found = 0;

    if (getifaddrs(&list) != 0)
        return 0;
    for (ifa = list; ifa != NULL; ifa = ifa->ifa_next)
        found |= ifa->ifa_addr != NULL && ifa->ifa_addr->sa_family == AF_INET && (ifa->ifa_flags & IFF_UP) &&
                 !(ifa->ifa_flags & IFF_LOOPBACK);
    freeifaddrs(list);
    return found;
}

static void test_bind_where_the_job_needs(void **state)
{
    HcclRootInfo info;
    hc_sockaddr_t addr;

    (void)state;
    set_launch("4", "4"); /* hccl-run: every rank on this host */
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    root_addr(&info, &addr);
    assert_true(is_loopback(&addr));
    if (have_non_loopback_v4()) {
        set_launch("4", "2"); /* two hosts */
        assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
        root_addr(&info, &addr);
        assert_false(is_loopback(&addr));
        setenv("HCCL_IF_IP", "127.0.0.1", 1); /* the user's choice wins */
        assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
        root_addr(&info, &addr);
        assert_true(is_loopback(&addr));
    }
    clear_launch();
}

/* A connected TCP socket to addr. */
static int connect_to(const hc_sockaddr_t *addr)
{
    int fd = -1;

    assert_int_equal(hc_sock_connect(addr, hc_now_ns() + 10 * HC_NS_PER_S, &fd), HCCL_SUCCESS);
    return fd;
}

typedef struct {
    const HcclRootInfo *info;
    uint32_t rank;
    HcclResult res;
} join_t;

static void *join(void *arg)
{
    join_t *j = arg;
    HcclComm comm;

    aclrtSetDevice((int32_t)j->rank);
    j->res = HcclCommInitRootInfo(2, j->info, j->rank, &comm);
    if (j->res == HCCL_SUCCESS)
        j->res = HcclCommDestroy(comm);
    return NULL;
}

/* Two ranks join while 40 clients sit on a partial header and 300 more on nothing: they must not
 * be held up (each partial client used to stall the server for 2 s: 80 s here). */
#define PARTIAL 40
#define IDLE 300

static void test_slow_clients_do_not_stall(void **state)
{
    int fds[PARTIAL + IDLE];
    HcclRootInfo info;
    hc_sockaddr_t addr;
    pthread_t threads[2];
    join_t joins[2];
    int64_t start;
    double took;

    (void)state;
    set_launch("2", "2");
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    clear_launch();
    root_addr(&info, &addr);
    for (int k = 0; k < PARTIAL + IDLE; k++) {
        fds[k] = connect_to(&addr);
        if (k < PARTIAL)
            assert_int_equal(send(fds[k], "H", 1, MSG_NOSIGNAL), 1);
    }
    start = hc_now_ns();
    for (uint32_t r = 0; r < 2; r++) {
        joins[r] = (join_t){.info = &info, .rank = r};
        assert_int_equal(pthread_create(&threads[r], NULL, join, &joins[r]), 0);
    }
    for (uint32_t r = 0; r < 2; r++) {
        pthread_join(threads[r], NULL);
        assert_int_equal(joins[r].res, HCCL_SUCCESS);
    }
    took = (double)(hc_now_ns() - start) / 1e9;
    print_message("two ranks joined in %.3f s beside %d stalled clients\n", took, PARTIAL + IDLE);
    assert_true(took < 5.0); /* a few ms unloaded; 80 s before the fix */
    for (int k = 0; k < PARTIAL + IDLE; k++)
        close(fds[k]);
}

/* A client that never says hello is dropped after about 2 s (HELLO_BOUND_NS). */
static void test_preauth_timeout(void **state)
{
    HcclRootInfo info;
    hc_sockaddr_t addr;
    struct pollfd pfd;
    char byte;
    int64_t start;
    double took;

    (void)state;
    set_launch("2", "2");
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    clear_launch();
    root_addr(&info, &addr);
    pfd = (struct pollfd){.fd = connect_to(&addr), .events = POLLIN};
    start = hc_now_ns();
    assert_int_equal(poll(&pfd, 1, 20000), 1); /* the server closes it */
    assert_true(recv(pfd.fd, &byte, 1, 0) <= 0);
    took = (double)(hc_now_ns() - start) / 1e9;
    print_message("an idle client was dropped after %.3f s\n", took);
    assert_true(took >= 1.5 && took < 10.0);
    close(pfd.fd);
}

/* At most 128 clients without the token: the oldest make room for newcomers. */
static void test_preauth_cap(void **state)
{
    static const uint8_t token[HC_TOKEN_BYTES] = "0123456789abcdef";
    hc_boot_server_t *server;
    hc_sockaddr_t any, addr;
    int listen_fd, fds[200], closed = 0;

    (void)state;
    assert_int_equal(hc_sockaddr_parse("127.0.0.1:0", &any), HCCL_SUCCESS);
    assert_int_equal(hc_sock_listen(&any, 1024, &listen_fd, &addr), HCCL_SUCCESS);
    assert_int_equal(hc_boot_server_new(listen_fd, token, -1, &server), HCCL_SUCCESS);
    for (int k = 0; k < 200; k++) {
        fds[k] = connect_to(&addr);
        hc_boot_server_step(server, 0);
    }
    for (int k = 0; k < 10; k++)
        hc_boot_server_step(server, 10);
    assert_true(hc_boot_server_preauth(server) <= 128);
    for (int k = 0; k < 200; k++) {
        struct pollfd pfd = {.fd = fds[k], .events = POLLIN};
        char byte;
        if (poll(&pfd, 1, 0) == 1 && recv(fds[k], &byte, 1, MSG_DONTWAIT) == 0)
            closed += k < 72 ? 1 : 1000; /* only the oldest may have been closed */
        close(fds[k]);
    }
    assert_int_equal(closed, 72);
    hc_boot_server_free(server);
}

/* Every window of 4 bytes of the token, as hex, in text: 0 if none. */
static int has_token_bytes(const char *text, const uint8_t token[HC_TOKEN_BYTES])
{
    for (int k = 0; k + 4 <= HC_TOKEN_BYTES; k++) {
        char hex[9];
        snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", token[k], token[k + 1], token[k + 2], token[k + 3]);
        if (strstr(text, hex) != NULL)
            return 1;
    }
    return 0;
}

static void test_token_not_in_name_or_logs(void **state)
{
    uint8_t token[HC_TOKEN_BYTES];
    char name[COMM_NAME_MAX_LENGTH];
    HcclRootInfo info;
    HcclComm comm;
    capture_t cap;
    char *log;

    (void)state;
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "0", 1);
    hc_log_reload();
    capture_begin(&cap);
    assert_int_equal(HcclGetRootInfo(&info), HCCL_SUCCESS);
    assert_int_equal(HcclCommInitRootInfo(1, &info, 0, &comm), HCCL_SUCCESS);
    assert_int_equal(HcclGetCommName(comm, name), HCCL_SUCCESS);
    assert_int_equal(HcclCommDestroy(comm), HCCL_SUCCESS);
    log = capture_end(&cap);
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "2", 1);
    hc_log_reload();
    assert_int_equal(hc_boot_root_token(&info, token), HCCL_SUCCESS);
    assert_true(strncmp(name, "hccl_", 5) == 0);
    assert_false(has_token_bytes(name, token));
    assert_non_null(strstr(log, name)); /* the log did name the communicator */
    assert_false(has_token_bytes(log, token));
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_where_the_job_needs),
        cmocka_unit_test(test_slow_clients_do_not_stall),
        cmocka_unit_test(test_preauth_timeout),
        cmocka_unit_test(test_preauth_cap),
        cmocka_unit_test(test_token_not_in_name_or_logs),
    };

    setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
    clear_launch();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
