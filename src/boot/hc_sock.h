/*
 * TCP sockets for the bootstrap and the rendezvous store: every call has a deadline
 * (CLOCK_MONOTONIC ns from hc_time.h, 0 = none) and logs its own failures with the peer address.
 */
#ifndef HC_SOCK_H
#define HC_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <hccl/hccl_types.h>

typedef struct {
    struct sockaddr_storage ss;
    socklen_t len;
} hc_sockaddr_t;

#define HC_SOCKADDR_STR_BYTES 64

/* "1.2.3.4:5" or "[::1]:5" into buf; returns buf. */
const char *hc_sockaddr_str(const hc_sockaddr_t *addr, char *buf, size_t len);

/* Parse "host:port" / "[v6]:port" (numeric addresses only). Returns HCCL_E_PARA when malformed. */
HcclResult hc_sockaddr_parse(const char *text, hc_sockaddr_t *addr_p);

/* Set the port of addr. */
void hc_sockaddr_set_port(hc_sockaddr_t *addr, uint16_t port);

/*
 * The address the rendezvous listener binds to: HCCL_IF_IP, else the first up interface matching
 * HCCL_SOCKET_IFNAME (prefix list, "=" exact, "^" exclude), else loopback when local_only (every
 * rank of the job is on this host: nothing else should be able to reach the listener), else the
 * first up non-loopback interface, else loopback. The port is 0.
 */
HcclResult hc_sock_pick_addr(hc_sockaddr_t *addr_p, int local_only);

/* Listen on addr (port 0: ephemeral); *bound_p receives the actual address. Close-on-exec. */
HcclResult hc_sock_listen(const hc_sockaddr_t *addr, int backlog, int *fd_p, hc_sockaddr_t *bound_p);
/* The same for a port of a range being tried: a port in use is HCCL_E_UNAVAIL without a log line
 * (the caller tries the next one and logs if none is free). */
HcclResult hc_sock_listen_free(const hc_sockaddr_t *addr, int backlog, int *fd_p, hc_sockaddr_t *bound_p);

/* Accept one connection before the deadline: HCCL_E_TIMEOUT when none came. */
HcclResult hc_sock_accept(int listen_fd, int64_t deadline_ns, int *fd_p);

/* Connect to addr, retrying refused/unreachable attempts until the deadline (the peer may not be
 * listening yet). TCP_NODELAY is set. HCCL_E_TIMEOUT names the address when it never answered. */
HcclResult hc_sock_connect(const hc_sockaddr_t *addr, int64_t deadline_ns, int *fd_p);

/* The same, asking worth_it(ctx) after each refused attempt whether to go on: when it says no
 * (the peer is known to be gone), HCCL_E_REMOTE at once, not logged. */
HcclResult hc_sock_connect_while(const hc_sockaddr_t *addr, int64_t deadline_ns, int (*worth_it)(void *ctx),
                                 void *ctx, int *fd_p);

/* Send/receive exactly len bytes before the deadline. A peer that closes gives HCCL_E_TCP_TRANSFER,
 * a deadline HCCL_E_TIMEOUT. These two log at debug level only: whether a closed connection is an
 * error, and whose it is, is known to the caller, which logs it with the rank. */
HcclResult hc_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns);
HcclResult hc_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns);

/* Close fd if >= 0 and set it to -1. */
void hc_sock_close(int *fd);

#endif /* HC_SOCK_H */
