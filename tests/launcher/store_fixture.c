/* The store fixture: a server thread running the same poll-and-progress loop hccl-run runs. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "hc_time.h"
#include "store_fixture.h"

const uint8_t store_fixture_token[HC_STORE_TOKEN_BYTES] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                                           0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
const char store_fixture_token_hex[] = "00112233445566778899aabbccddeeff";

static hc_store_server_t *server;
static pthread_t thread;
static int stop_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static size_t parked;

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pfds[2] = {{.fd = hc_store_server_fd(server), .events = POLLIN},
                                 {.fd = stop_fd, .events = POLLIN}};
        if (poll(pfds, 2, hc_deadline_ms_left(hc_store_server_deadline(server))) < 0 && errno != EINTR)
            break;
        if (pfds[1].revents != 0)
            break;
        hc_store_server_progress(server);
        pthread_mutex_lock(&lock);
        parked = hc_store_server_waiting(server);
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int store_fixture_start(void)
{
    char addr[HC_SOCKADDR_STR_BYTES];
    hc_sockaddr_t loopback;

    if (hc_sockaddr_parse("127.0.0.1:0", &loopback) != HCCL_SUCCESS ||
        hc_store_server_create(&loopback, store_fixture_token, &server) != HCCL_SUCCESS)
        return -1;
    stop_fd = eventfd(0, EFD_CLOEXEC);
    parked = 0;
    hc_sockaddr_str(hc_store_server_addr(server), addr, sizeof(addr));
    setenv("HOSTCCL_STORE", addr, 1);
    setenv("HOSTCCL_STORE_TOKEN", store_fixture_token_hex, 1);
    return stop_fd >= 0 && pthread_create(&thread, NULL, serve, NULL) == 0 ? 0 : -1;
}

void store_fixture_stop(void)
{
    uint64_t one = 1;

    if (write(stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        abort();
    pthread_join(thread, NULL);
    close(stop_fd);
    stop_fd = -1;
    hc_store_server_destroy(server);
    server = NULL;
    unsetenv("HOSTCCL_STORE");
    unsetenv("HOSTCCL_STORE_TOKEN");
}

const hc_sockaddr_t *store_fixture_addr(void)
{
    return hc_store_server_addr(server);
}

int store_fixture_wait_parked(size_t n, int timeout_ms)
{
    struct timespec until;
    int rc = 0, reached;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&lock);
    while (parked < n && rc == 0)
        rc = pthread_cond_timedwait(&changed, &lock, &until);
    reached = parked >= n;
    pthread_mutex_unlock(&lock);
    return reached ? 0 : -1;
}
