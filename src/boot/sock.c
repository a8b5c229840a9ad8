/* TCP helpers with deadlines. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_check.h"
#include "hc_config.h"
#include "hc_sock.h"
#include "hc_time.h"

/* Pause between connection attempts to a listener that is not up yet. */
#define CONNECT_RETRY_NS (20 * HC_NS_PER_MS)

const char *hc_sockaddr_str(const hc_sockaddr_t *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (addr->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
    } else if (addr->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "<family %d>", addr->ss.ss_family);
    }
    return buf;
}

HcclResult hc_sockaddr_parse(const char *text, hc_sockaddr_t *addr_p)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon;
    char *end;
    unsigned long port;
    size_t host_len;
    hc_sockaddr_t addr;

    memset(&addr, 0, sizeof(addr));
    colon = text != NULL ? strrchr(text, ':') : NULL;
    if (colon == NULL || colon == text)
        return HCCL_E_PARA;
    host_len = (size_t)(colon - text);
    if (host_len >= sizeof(host))
        return HCCL_E_PARA;
    memcpy(host, text, host_len);
    host[host_len] = '\0';
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || port > 65535)
        return HCCL_E_PARA;
    if (host[0] == '[' && host_len > 2 && host[host_len - 1] == ']') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&addr.ss;
        host[host_len - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
            return HCCL_E_PARA;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        addr.len = sizeof(*in6);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&addr.ss;
        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
            return HCCL_E_PARA;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        addr.len = sizeof(*in);
    }
    *addr_p = addr;
    return HCCL_SUCCESS;
}

void hc_sockaddr_set_port(hc_sockaddr_t *addr, uint16_t port)
{
    if (addr->ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&addr->ss)->sin_port = htons(port);
    else if (addr->ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&addr->ss)->sin6_port = htons(port);
}

/* Does interface `name` pass HCCL_SOCKET_IFNAME? Syntax (NCCL's NCCL_SOCKET_IFNAME, which HCCL
 * follows): comma-separated prefixes; a leading '=' makes them exact names, a leading '^' selects
 * every interface except the listed ones ('^=' combines both). */
static int ifname_matches(const char *spec, const char *name)
{
    int exclude = 0, exact = 0, hit = 0;
    char list[256];
    char *save = NULL;

    if (spec[0] == '^') {
        exclude = 1;
        spec++;
    }
    if (spec[0] == '=') {
        exact = 1;
        spec++;
    }
    snprintf(list, sizeof(list), "%s", spec);
    for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (exact ? strcmp(name, tok) == 0 : strncmp(name, tok, strlen(tok)) == 0) {
            hit = 1;
            break;
        }
    }
    return exclude ? !hit : hit;
}

static int usable_ifaddr(const struct ifaddrs *ifa)
{
    return ifa->ifa_addr != NULL && (ifa->ifa_flags & IFF_UP) &&
           (ifa->ifa_addr->sa_family == AF_INET || ifa->ifa_addr->sa_family == AF_INET6);
}

static void copy_ifaddr(const struct ifaddrs *ifa, hc_sockaddr_t *addr_p)
{
    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->len = ifa->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    memcpy(&addr_p->ss, ifa->ifa_addr, addr_p->len);
    hc_sockaddr_set_port(addr_p, 0);
}

/* First usable interface address passing `filter`: IPv4 before IPv6, link-local v6 skipped. */
static int find_ifaddr(const struct ifaddrs *list, const char *spec, int allow_loopback, hc_sockaddr_t *addr_p)
{
    for (int family_pass = 0; family_pass < 2; family_pass++) {
        int family = family_pass == 0 ? AF_INET : AF_INET6;
        for (const struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
            if (!usable_ifaddr(ifa) || ifa->ifa_addr->sa_family != family)
                continue;
            if (!allow_loopback && (ifa->ifa_flags & IFF_LOOPBACK))
                continue;
            if (family == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
                continue;
            if (spec != NULL && !ifname_matches(spec, ifa->ifa_name))
                continue;
            copy_ifaddr(ifa, addr_p);
            return 1;
        }
    }
    return 0;
}

HcclResult hc_sock_pick_addr(hc_sockaddr_t *addr_p, int local_only)
{
    const char *if_ip = hc_config_str(HC_CFG_IF_IP);
    const char *ifname = hc_config_str(HC_CFG_SOCKET_IFNAME);
    struct ifaddrs *list = NULL;
    int found;

    if (if_ip != NULL) {
        char text[INET6_ADDRSTRLEN + 8];
        snprintf(text, sizeof(text), strchr(if_ip, ':') != NULL ? "[%s]:0" : "%s:0", if_ip);
        if (hc_sockaddr_parse(text, addr_p) != HCCL_SUCCESS) {
            HC_ERROR("HCCL_IF_IP=\"%s\" is not a numeric IPv4 or IPv6 address", if_ip);
            return HCCL_E_PARA;
        }
        return HCCL_SUCCESS;
    }
    if (getifaddrs(&list) != 0) {
        HC_ERROR("getifaddrs failed: %s", strerror(errno));
        return hc_result_from_errno(errno);
    }
    if (ifname != NULL) {
        found = find_ifaddr(list, ifname, 1, addr_p);
        if (!found) {
            freeifaddrs(list);
            HC_ERROR("no up interface matches HCCL_SOCKET_IFNAME=\"%s\"", ifname);
            return HCCL_E_NOT_FOUND;
        }
    } else if (local_only) {
        found = hc_sockaddr_parse("127.0.0.1:0", addr_p) == HCCL_SUCCESS;
    } else {
        found = find_ifaddr(list, NULL, 0, addr_p) || find_ifaddr(list, NULL, 1, addr_p);
    }
    freeifaddrs(list);
    if (!found) {
        HC_ERROR("no usable network interface (not even loopback) is up");
        return HCCL_E_NOT_FOUND;
    }
    return HCCL_SUCCESS;
}

static HcclResult listen_on(const hc_sockaddr_t *addr, int backlog, int *fd_p, hc_sockaddr_t *bound_p, int log_busy)
{
    char text[HC_SOCKADDR_STR_BYTES];
    int one = 1, err;
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    hc_sockaddr_t bound;

    if (fd < 0) {
        HC_ERROR("socket failed: %s", strerror(errno));
        return hc_result_from_errno(errno);
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, backlog) != 0) {
        err = errno;
        if (err != EADDRINUSE || log_busy)
            HC_ERROR("cannot listen on %s: %s%s", hc_sockaddr_str(addr, text, sizeof(text)), strerror(err),
                     err == EADDRINUSE ? " (choose another HCCL_IF_BASE_PORT)" : "");
        close(fd);
        return err == EADDRINUSE ? HCCL_E_UNAVAIL : hc_result_from_errno(err);
    }
    bound.len = sizeof(bound.ss);
    if (getsockname(fd, (struct sockaddr *)&bound.ss, &bound.len) != 0) {
        err = errno;
        HC_ERROR("getsockname failed: %s", strerror(err));
        close(fd);
        return hc_result_from_errno(err);
    }
    *fd_p = fd;
    if (bound_p != NULL)
        *bound_p = bound;
    return HCCL_SUCCESS;
}

HcclResult hc_sock_listen(const hc_sockaddr_t *addr, int backlog, int *fd_p, hc_sockaddr_t *bound_p)
{
    return listen_on(addr, backlog, fd_p, bound_p, 1);
}

HcclResult hc_sock_listen_free(const hc_sockaddr_t *addr, int backlog, int *fd_p, hc_sockaddr_t *bound_p)
{
    return listen_on(addr, backlog, fd_p, bound_p, 0);
}

/* Wait for `events` on fd before the deadline: 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    struct pollfd pfd = {.fd = fd, .events = events};

    for (;;) {
        int rc = poll(&pfd, 1, hc_deadline_ms_left(deadline_ns));
        if (rc > 0)
            return 1;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

HcclResult hc_sock_accept(int listen_fd, int64_t deadline_ns, int *fd_p)
{
    for (;;) {
        int rc = wait_fd(listen_fd, POLLIN, deadline_ns);
        int fd;
        if (rc == 0)
            return HCCL_E_TIMEOUT;
        if (rc < 0) {
            HC_ERROR("poll on listener failed: %s", strerror(errno));
            return hc_result_from_errno(errno);
        }
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            *fd_p = fd;
            return HCCL_SUCCESS;
        }
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
            HC_ERROR("accept failed: %s", strerror(errno));
            return hc_result_from_errno(errno);
        }
    }
}

/* One non-blocking connect attempt bounded by the deadline: 0 connected, else errno. */
static int connect_once(int fd, const hc_sockaddr_t *addr, int64_t deadline_ns)
{
    int err = 0;
    socklen_t err_len = sizeof(err);

    if (connect(fd, (const struct sockaddr *)&addr->ss, addr->len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    if (wait_fd(fd, POLLOUT, deadline_ns) <= 0)
        return ETIMEDOUT;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0)
        return errno;
    return err;
}

HcclResult hc_sock_connect(const hc_sockaddr_t *addr, int64_t deadline_ns, int *fd_p)
{
    return hc_sock_connect_while(addr, deadline_ns, NULL, NULL, fd_p);
}

HcclResult hc_sock_connect_while(const hc_sockaddr_t *addr, int64_t deadline_ns, int (*worth_it)(void *ctx),
                                 void *ctx, int *fd_p)
{
    char text[HC_SOCKADDR_STR_BYTES];
    int last_err = 0;

    do {
        int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            HC_ERROR("socket failed: %s", strerror(errno));
            return hc_result_from_errno(errno);
        }
        last_err = connect_once(fd, addr, deadline_ns);
        if (last_err == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            *fd_p = fd;
            return HCCL_SUCCESS;
        }
        close(fd);
        if (last_err != ECONNREFUSED && last_err != ETIMEDOUT && last_err != EHOSTUNREACH &&
            last_err != ENETUNREACH && last_err != EAGAIN && last_err != ECONNRESET)
            break;
        if (worth_it != NULL && !worth_it(ctx))
            return HCCL_E_REMOTE; /* the caller knows why and says so */
        if (!hc_deadline_passed(deadline_ns)) {
            struct timespec pause = {.tv_sec = 0, .tv_nsec = CONNECT_RETRY_NS};
            nanosleep(&pause, NULL);
        }
    } while (!hc_deadline_passed(deadline_ns));
    HC_ERROR("cannot connect to %s: %s", hc_sockaddr_str(addr, text, sizeof(text)), strerror(last_err));
    return last_err == ECONNREFUSED || last_err == ETIMEDOUT ? HCCL_E_TIMEOUT : hc_result_from_errno(last_err);
}

HcclResult hc_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline_ns);
            if (rc == 0)
                return HCCL_E_TIMEOUT;
            if (rc > 0)
                continue;
        }
        HC_DEBUG("send on fd %d failed: %s", fd, strerror(errno));
        return HCCL_E_TCP_TRANSFER;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            HC_DEBUG("peer on fd %d closed the connection", fd);
            return HCCL_E_TCP_TRANSFER;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline_ns);
            if (rc == 0)
                return HCCL_E_TIMEOUT;
            if (rc > 0)
                continue;
        }
        HC_DEBUG("recv on fd %d failed: %s", fd, strerror(errno));
        return HCCL_E_TCP_TRANSFER;
    }
    return HCCL_SUCCESS;
}

void hc_sock_close(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}
