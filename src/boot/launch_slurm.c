/*
 * The slurm-local way of hc_launch.h: a Slurm step on one node without PMIx (plain `srun -n 4
 * prog`) still gets HcclHostBroadcastRootInfo. Rank 0 serves a rendezvous store of its own
 * (store_server.c, on loopback, with a random token) from a thread, and tells the other ranks its
 * address and token through an abstract unix socket named for the user, job and step:
 *
 *     "\0hostccl/slurm/<uid>/<SLURM_JOB_ID>.<SLURM_STEP_ID>"
 *
 * Abstract sockets live in the kernel, not the file system, and vanish with the process, so a
 * killed rank 0 leaves nothing behind and a later step cannot find a stale address. Both ends
 * check the other's uid (SO_PEERCRED): another user can neither learn the token nor pose as rank
 * 0. Tasks of one step on one node share the network namespace, where abstract names live.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_launch.h"
#include "hc_store.h"
#include "hc_time.h"

#define ANSWER_BYTES (HC_SOCKADDR_STR_BYTES + HC_STORE_TOKEN_HEX_BYTES + 2)

typedef struct {
    hc_store_endpoint_t ep;     /* the store, as every rank uses it */
    HcclResult state;           /* of finding (rank 0: starting) it */
    hc_store_server_t *server;  /* rank 0 */
    int unix_fd;                /* rank 0: where the others ask */
    int stop_pipe[2];
    pthread_t thread;
    int thread_started;
} local_store_t;

static local_store_t store = {.unix_fd = -1, .stop_pipe = {-1, -1}};
static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;

static int slurm_local_fits(const hc_launch_t *job)
{
    return strcmp(job->launcher, "slurm") == 0 && getenv("SLURM_JOB_ID") != NULL &&
           getenv("SLURM_STEP_ID") != NULL && job->local_size == job->size;
}

static socklen_t socket_name(struct sockaddr_un *addr)
{
    int n;

    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "hostccl/slurm/%u/%.24s.%.24s", (unsigned)getuid(),
                 getenv("SLURM_JOB_ID"), getenv("SLURM_STEP_ID"));
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int peer_is_us(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

/* Rank 0's thread: tell each rank that asks (and is ours) the store's address and token. */
static void answer(int listen_fd)
{
    char line[ANSWER_BYTES], hex[HC_STORE_TOKEN_HEX_BYTES];
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    if (peer_is_us(fd)) {
        struct timeval bound = {.tv_sec = 2};
        hc_store_token_format(store.ep.token, hex);
        snprintf(line, sizeof(line), "%s %s\n", store.ep.addr_text, hex);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
        if (write(fd, line, strlen(line)) < 0)
            HC_DEBUG("slurm-local store: a rank left before its answer: %s", strerror(errno));
    } else {
        HC_WARN("slurm-local store: refused a process of another user on %s", "its socket");
    }
    close(fd);
}

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd pfds[3] = {{.fd = store.stop_pipe[0], .events = POLLIN},
                                 {.fd = hc_store_server_fd(store.server), .events = POLLIN},
                                 {.fd = store.unix_fd, .events = POLLIN}};
        if (poll(pfds, 3, hc_deadline_ms_left(hc_store_server_deadline(store.server))) < 0 && errno != EINTR)
            break;
        if (pfds[0].revents != 0)
            break;
        hc_store_server_progress(store.server);
        if (pfds[2].revents != 0)
            answer(store.unix_fd);
    }
    return NULL;
}

/* Rank 0, once: the store, the socket, the thread. */
static HcclResult start_serving(void)
{
    struct sockaddr_un name;
    socklen_t name_len = socket_name(&name);
    hc_sockaddr_t loopback;

    if (getrandom(store.ep.token, sizeof(store.ep.token), 0) != (ssize_t)sizeof(store.ep.token)) {
        HC_ERROR("getrandom failed: %s", strerror(errno));
        return HCCL_E_SYSCALL;
    }
    HC_CHECK(hc_sockaddr_parse("127.0.0.1:0", &loopback));
    HC_CHECK(hc_store_server_create(&loopback, store.ep.token, &store.server));
    store.ep.addr = *hc_store_server_addr(store.server);
    hc_sockaddr_str(&store.ep.addr, store.ep.addr_text, sizeof(store.ep.addr_text));
    store.unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (store.unix_fd < 0 || bind(store.unix_fd, (struct sockaddr *)&name, name_len) != 0 ||
        listen(store.unix_fd, 256) != 0) {
        HC_ERROR("slurm-local store: cannot listen on @%s: %s%s", name.sun_path + 1, strerror(errno),
                 errno == EADDRINUSE ? " (another rank 0 of this step, or another process, holds it)" : "");
        return HCCL_E_SYSCALL;
    }
    if (pipe2(store.stop_pipe, O_CLOEXEC) != 0 || pthread_create(&store.thread, NULL, serve, NULL) != 0) {
        HC_ERROR("slurm-local store: cannot start its thread: %s", strerror(errno));
        return HCCL_E_SYSCALL;
    }
    store.thread_started = 1;
    HC_INFO("slurm-local store: serving %s for step %s.%s", store.ep.addr_text, getenv("SLURM_JOB_ID"),
            getenv("SLURM_STEP_ID"));
    return HCCL_SUCCESS;
}

/* One try at asking rank 0: 0 done, 1 not there yet, -1 failed (logged). */
static int ask_once(const struct sockaddr_un *name, socklen_t name_len)
{
    char line[ANSWER_BYTES] = "", addr[HC_SOCKADDR_STR_BYTES], hex[HC_STORE_TOKEN_HEX_BYTES];
    struct timeval bound = {.tv_sec = 5};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ssize_t n = 0, got;

    if (fd < 0 || connect(fd, (const struct sockaddr *)name, name_len) != 0) {
        int again = fd >= 0 && (errno == ECONNREFUSED || errno == ENOENT || errno == EAGAIN);
        if (fd >= 0)
            close(fd);
        return again ? 1 : -1;
    }
    if (!peer_is_us(fd)) {
        HC_ERROR("slurm-local store: @%s belongs to another user: not rank 0 of this step", name->sun_path + 1);
        close(fd);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
    while ((size_t)n < sizeof(line) - 1 && (got = read(fd, line + n, sizeof(line) - 1 - (size_t)n)) > 0)
        n += got;
    close(fd);
    line[n] = '\0';
    if (sscanf(line, "%63s %32s", addr, hex) != 2 || hc_sockaddr_parse(addr, &store.ep.addr) != HCCL_SUCCESS ||
        hc_store_token_parse(hex, store.ep.token) != 0) {
        HC_ERROR("slurm-local store: rank 0 answered \"%.80s\", not an address and a token", line);
        return -1;
    }
    snprintf(store.ep.addr_text, sizeof(store.ep.addr_text), "%s", addr);
    return 0;
}

/* Ranks but 0, once: where rank 0's store is, asking until HCCL_CONNECT_TIMEOUT. */
static HcclResult find_store(void)
{
    struct sockaddr_un name;
    socklen_t name_len = socket_name(&name);
    int64_t timeout_s = hc_config_int(HC_CFG_CONNECT_TIMEOUT), deadline = hc_deadline_after_s(timeout_s);
    useconds_t pause_us = 1000;

    for (;;) {
        int rc = ask_once(&name, name_len);
        if (rc == 0)
            return HCCL_SUCCESS;
        if (rc < 0)
            return HCCL_E_TCP_CONNECT;
        if (hc_deadline_passed(deadline)) {
            HC_ERROR("slurm-local store: rank 0 of step %s.%s did not serve @%s within HCCL_CONNECT_TIMEOUT=%lld s: "
                     "every rank must call HcclHostBroadcastRootInfo", getenv("SLURM_JOB_ID"), getenv("SLURM_STEP_ID"),
                     name.sun_path + 1, (long long)timeout_s);
            return HCCL_E_TIMEOUT;
        }
        usleep(pause_us);
        pause_us = pause_us < 100000 ? pause_us * 2 : pause_us;
    }
}

static HcclResult ready(const hc_launch_t *job)
{
    HcclResult res;

    pthread_mutex_lock(&store_lock);
    if (store.state == HCCL_SUCCESS && store.ep.addr.len == 0)
        store.state = job->rank == 0 ? start_serving() : find_store();
    res = store.state;
    pthread_mutex_unlock(&store_lock);
    return res;
}

static HcclResult slurm_local_bcast(const hc_launch_t *job, const char *key, void *buf, size_t len)
{
    uint8_t received[HC_STORE_MAX_VALUE];
    size_t got = 0;
    int64_t timeout_s = hc_config_int(HC_CFG_CONNECT_TIMEOUT);
    HcclResult res;

    HC_CHECK(ready(job));
    if (job->rank == 0)
        return hc_store_set_at(&store.ep, key, buf, len);
    res = hc_store_get_at(&store.ep, key, received, sizeof(received), &got, hc_deadline_after_s(timeout_s));
    if (res == HCCL_E_TIMEOUT)
        HC_ERROR("\"%s\" did not arrive from rank 0 within HCCL_CONNECT_TIMEOUT=%lld s; every rank must call "
                 "HcclHostBroadcastRootInfo the same number of times", key, (long long)timeout_s);
    HC_CHECK(res);
    if (got != len) {
        HC_ERROR("\"%s\" from rank 0's store is %zu bytes, not %zu", key, got, len);
        return HCCL_E_INTERNAL;
    }
    memcpy(buf, received, len);
    return HCCL_SUCCESS;
}

/* At unload: stop serving (rank 0). The others may still be asking; their waits are bounded. */
__attribute__((destructor)) static void slurm_local_stop(void)
{
    if (store.thread_started && write(store.stop_pipe[1], "x", 1) == 1)
        pthread_join(store.thread, NULL);
    if (store.unix_fd >= 0)
        close(store.unix_fd);
    for (int i = 0; i < 2; i++)
        if (store.stop_pipe[i] >= 0)
            close(store.stop_pipe[i]);
    hc_store_server_destroy(store.server);
}

const hc_launch_bcast_ops_t hc_launch_bcast_slurm_local = {
    .name = "slurm-local",
    .fits = slurm_local_fits,
    .bcast = slurm_local_bcast,
};
