/* Root info encoding, host identity, and the framing shared by both ends of the rendezvous. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot_proto.h"
#include "hc_sha256.h"
#include "hc_check.h"
#include "hc_sha256.h"
#include "hc_config.h"
#include "hc_sock.h"

HcclResult hc_boot_send_msg(int fd, hc_boot_type_t type, uint32_t status, const void *payload, uint32_t len,
                            int64_t deadline_ns)
{
    hc_boot_hdr_t hdr = {.magic = HC_BOOT_MAGIC, .version = HC_BOOT_VERSION, .type = (uint16_t)type,
                         .status = status, .len = len};

    HC_CHECK(hc_sock_send_all(fd, &hdr, sizeof(hdr), deadline_ns));
    if (len > 0)
        HC_CHECK(hc_sock_send_all(fd, payload, len, deadline_ns));
    return HCCL_SUCCESS;
}

HcclResult hc_boot_recv_hdr(int fd, hc_boot_hdr_t *hdr_p, int64_t deadline_ns)
{
    HC_CHECK(hc_sock_recv_all(fd, hdr_p, sizeof(*hdr_p), deadline_ns));
    if (hdr_p->magic != HC_BOOT_MAGIC || hdr_p->version != HC_BOOT_VERSION)
        return HCCL_E_PARA;
    return HCCL_SUCCESS;
}

void hc_boot_format_ranks(const uint32_t *ranks, uint32_t n, char *buf, size_t len)
{
    size_t used = 0;
    uint32_t i;

    buf[0] = '\0';
    for (i = 0; i < n && used + 16 < len; i++) {
        uint32_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        if (j > i + 1)
            used += (size_t)snprintf(buf + used, len - used, "%s%u-%u", i ? ", " : "", ranks[i], ranks[j]);
        else
            j = i, used += (size_t)snprintf(buf + used, len - used, "%s%u", i ? ", " : "", ranks[i]);
        i = j;
    }
    /* Ranks left out, or the last one cut by snprintf: say so right after the text, or over its
     * end when it filled the buffer. */
    if (i < n || used >= len)
        snprintf(buf + (used + 5 <= len ? used : len - 5), 5, " ...");
}

/* Read a hex UUID like "6c2b...-..." into 16 bytes. */
static int parse_boot_id(const char *text, uint8_t out[16])
{
    size_t n = 0;

    for (const char *p = text; *p != '\0' && n < 32; p++) {
        int v;
        if (*p == '-' || *p == '\n')
            continue;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else
            return -1;
        out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | v : v << 4);
        n++;
    }
    return n == 32 ? 0 : -1;
}

static uint64_t ns_inode(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

HcclResult hc_boot_self(int32_t device, hc_peer_t *self_p)
{
    char text[64] = "";
    uint64_t netns, pidns;
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;

    if (fd >= 0)
        close(fd);
    memset(self_p, 0, sizeof(*self_p));
    if (n <= 0 || parse_boot_id(text, self_p->host_id) != 0) {
        HC_ERROR("cannot read the boot id from /proc/sys/kernel/random/boot_id: %s",
                 n < 0 ? strerror(errno) : "malformed");
        return HCCL_E_SYSCALL;
    }
    /* Ranks in different network namespaces are different hosts (that is how the multi-host
     * tests run on one machine); different pid namespaces cannot see each other's /proc. */
    netns = ns_inode("/proc/self/ns/net");
    pidns = ns_inode("/proc/self/ns/pid");
    memcpy(self_p->host_id + 16, &netns, sizeof(netns));
    memcpy(self_p->host_id + 24, &pidns, sizeof(pidns));
    if (gethostname(self_p->hostname, sizeof(self_p->hostname) - 1) != 0)
        snprintf(self_p->hostname, sizeof(self_p->hostname), "unknown");
    self_p->pid = (int32_t)getpid();
    self_p->device = device;
    return HCCL_SUCCESS;
}

static void wire_from_addr(const hc_sockaddr_t *addr, hc_root_wire_t *wire)
{
    wire->family = addr->ss.ss_family;
    if (addr->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->ss;
        wire->port = ntohs(in->sin_port);
        memcpy(wire->addr, &in->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;
        wire->port = ntohs(in6->sin6_port);
        memcpy(wire->addr, &in6->sin6_addr, 16);
    }
}

static void addr_from_wire(const hc_root_wire_t *wire, hc_sockaddr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    if (wire->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&addr->ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(wire->port);
        memcpy(&in->sin_addr, wire->addr, 4);
        addr->len = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&addr->ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(wire->port);
        memcpy(&in6->sin6_addr, wire->addr, 16);
        addr->len = sizeof(*in6);
    }
}

/* n random bytes (getrandom may return fewer, or be interrupted, before the pool is ready). */
static HcclResult random_bytes(uint8_t *out, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int err = errno;
            HC_ERROR("getrandom failed: %s", strerror(err));
            return HCCL_E_SYSCALL;
        }
        got += (size_t)r;
    }
    return HCCL_SUCCESS;
}

HcclResult hc_boot_root_create(HcclRootInfo *info, int local_only)
{
    hc_root_wire_t wire;
    hc_sockaddr_t addr, bound;
    hc_peer_t self;
    int64_t port = hc_config_int(HC_CFG_IF_BASE_PORT);
    int fd = -1;
    HcclResult res;

    memset(&wire, 0, sizeof(wire));
    wire.magic = HC_ROOT_MAGIC;
    wire.version = HC_BOOT_VERSION;
    HC_CHECK(random_bytes(wire.token, sizeof(wire.token)));
    HC_CHECK(random_bytes(wire.comm_id, sizeof(wire.comm_id)));
    HC_CHECK(hc_boot_self(-1, &self));
    memcpy(wire.root_host_id, self.host_id, sizeof(wire.root_host_id));
    HC_CHECK(hc_sock_pick_addr(&addr, local_only));
    hc_sockaddr_set_port(&addr, (uint16_t)port);
    HC_CHECK(hc_sock_listen(&addr, 1024, &fd, &bound));
    wire_from_addr(&bound, &wire);
    wire.root_pid = (int32_t)getpid();
    if (gethostname(wire.root_host, sizeof(wire.root_host) - 1) != 0)
        snprintf(wire.root_host, sizeof(wire.root_host), "unknown");
    res = hc_boot_server_start(fd, wire.token);
    if (res != HCCL_SUCCESS) {
        close(fd);
        return res;
    }
    memset(info, 0, sizeof(*info));
    memcpy(info->internal, &wire, sizeof(wire));
    return HCCL_SUCCESS;
}

HcclResult hc_boot_root_decode(const HcclRootInfo *info, hc_root_wire_t *wire_p, hc_sockaddr_t *addr_p)
{
    memcpy(wire_p, info->internal, sizeof(*wire_p));
    if (wire_p->magic != HC_ROOT_MAGIC) {
        HC_ERROR("the root info is not a hostccl root info (magic 0x%08x): pass the bytes HcclGetRootInfo "
                 "made, unchanged, to every rank",
                 wire_p->magic);
        return HCCL_E_PARA;
    }
    if (wire_p->version != HC_BOOT_VERSION) {
        HC_ERROR("the root info has version %u, this hostccl speaks version %u: use the same hostccl on every "
                 "rank",
                 wire_p->version, HC_BOOT_VERSION);
        return HCCL_E_PARA;
    }
    if (wire_p->family != AF_INET && wire_p->family != AF_INET6) {
        HC_ERROR("the root info names address family %u: it is corrupted", wire_p->family);
        return HCCL_E_PARA;
    }
    wire_p->root_host[sizeof(wire_p->root_host) - 1] = '\0';
    addr_from_wire(wire_p, addr_p);
    return HCCL_SUCCESS;
}

HcclResult hc_boot_root_token(const HcclRootInfo *info, uint8_t token[HC_TOKEN_BYTES])
{
    hc_root_wire_t wire;
    hc_sockaddr_t addr;

    HC_CHECK(hc_boot_root_decode(info, &wire, &addr));
    memcpy(token, wire.token, HC_TOKEN_BYTES);
    return HCCL_SUCCESS;
}

/* A root info every rank builds from the same token (a rank table) needs the same communicator id
 * on every rank, and one that does not give the token away (it names the communicator in logs). */
static void derive_comm_id(const uint8_t token[HC_TOKEN_BYTES], uint8_t id[8])
{
    static const char what[] = "hostccl communicator id";
    uint8_t digest[HC_SHA256_BYTES];
    hc_sha256_t ctx;

    hc_sha256_init(&ctx);
    hc_sha256_update(&ctx, what, sizeof(what));
    hc_sha256_update(&ctx, token, HC_TOKEN_BYTES);
    hc_sha256_final(&ctx, digest);
    memcpy(id, digest, 8);
}

HcclResult hc_boot_root_at(const hc_sockaddr_t *addr, const uint8_t token[HC_TOKEN_BYTES], int serve,
                           const char *root_host, HcclRootInfo *info)
{
    hc_root_wire_t wire;
    hc_sockaddr_t bound = *addr;
    int fd = -1;
    HcclResult res;

    memset(&wire, 0, sizeof(wire));
    wire.magic = HC_ROOT_MAGIC;
    wire.version = HC_BOOT_VERSION;
    memcpy(wire.token, token, HC_TOKEN_BYTES);
    derive_comm_id(token, wire.comm_id);
    snprintf(wire.root_host, sizeof(wire.root_host), "%s", root_host);
    if (serve) {
        HC_CHECK(hc_sock_listen(addr, 1024, &fd, &bound));
        res = hc_boot_server_start(fd, wire.token);
        if (res != HCCL_SUCCESS) {
            close(fd);
            return res;
        }
        wire.root_pid = (int32_t)getpid();
    }
    wire_from_addr(&bound, &wire);
    memset(info, 0, sizeof(*info));
    memcpy(info->internal, &wire, sizeof(wire));
    return HCCL_SUCCESS;
}

void hc_boot_root_name(const HcclRootInfo *info, char *name, size_t len)
{
    hc_root_wire_t wire;

    memcpy(&wire, info->internal, sizeof(wire));
    snprintf(name, len, "hccl_%02x%02x%02x%02x%02x%02x", wire.comm_id[0], wire.comm_id[1], wire.comm_id[2],
             wire.comm_id[3], wire.comm_id[4], wire.comm_id[5]);
}
