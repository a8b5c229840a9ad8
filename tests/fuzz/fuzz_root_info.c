/*
 * Fuzz target: the root info (DESIGN.md 4). HcclRootInfo is 4108 opaque bytes that a program moves
 * between its processes however it likes (MPI_Bcast, a file, the store), so every rank decodes
 * bytes it cannot trust. The input is those bytes, cut or zero-padded to 4108.
 *
 * Properties: decoding never crashes and either refuses the bytes with HCCL_E_PARA or yields a root
 * description that is usable as it stands: our magic and version, a family of AF_INET or AF_INET6, a
 * terminated host name, a socket address that says the same as the wire fields, and the same token
 * hc_boot_root_token reads.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#include "boot_proto.h"
#include "fuzz_target.h"
#include "hc_check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_logs_default_off();
    return 0;
}

/* The socket address must name the same endpoint as the wire fields it was made from. */
static void check_address(const hc_root_wire_t *wire, const hc_sockaddr_t *addr)
{
    char text[HC_SOCKADDR_STR_BYTES];

    hc_assert(addr->ss.ss_family == wire->family);
    if (wire->family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->ss;
        hc_assert(addr->len == sizeof(*in));
        hc_assert(ntohs(in->sin_port) == wire->port);
        hc_assert(memcmp(&in->sin_addr, wire->addr, 4) == 0);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;
        hc_assert(addr->len == sizeof(*in6));
        hc_assert(ntohs(in6->sin6_port) == wire->port);
        hc_assert(memcmp(&in6->sin6_addr, wire->addr, 16) == 0);
    }
    /* The address is printed in every "cannot reach the root" message. */
    hc_sockaddr_str(addr, text, sizeof(text));
    hc_assert(memchr(text, '\0', sizeof(text)) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    HcclRootInfo info;
    hc_root_wire_t wire;
    hc_sockaddr_t addr;
    uint8_t token[HC_TOKEN_BYTES];
    HcclResult res;

    memset(&info, 0, sizeof(info));
    memcpy(info.internal, data, size < sizeof(info.internal) ? size : sizeof(info.internal));
    res = hc_boot_root_decode(&info, &wire, &addr);
    hc_assert(hc_boot_root_token(&info, token) == res);
    if (res != HCCL_SUCCESS) {
        hc_assert(res == HCCL_E_PARA);
        return 0;
    }
    hc_assert(wire.magic == HC_ROOT_MAGIC && wire.version == HC_BOOT_VERSION);
    hc_assert(wire.family == AF_INET || wire.family == AF_INET6);
    hc_assert(memchr(wire.root_host, '\0', sizeof(wire.root_host)) != NULL);
    /* Everything before the host name is taken as it was sent: decoding checks, it does not repair. */
    hc_assert(memcmp(&wire, info.internal, offsetof(hc_root_wire_t, root_host)) == 0);
    hc_assert(memcmp(token, wire.token, HC_TOKEN_BYTES) == 0);
    check_address(&wire, &addr);
    return 0;
}
