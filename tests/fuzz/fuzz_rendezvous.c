/*
 * Fuzz target: what a rendezvous client sends the root (DESIGN.md 4). The input is the bytes of one
 * message as they arrive on the root's socket: a 16-byte hc_boot_hdr_t (zero-padded when the input
 * is shorter) and everything after it as the payload.
 *
 * The server's socket loop is not driven here: its state carries from one client to the next (the
 * first hello fixes nRanks, a failed rendezvous ends the server), its token is random per root, and
 * nothing stops a server before its connect timeout, so one server per input would pile up threads.
 * Instead the target drives hc_boot_msg_check, the pure check the server runs on every message
 * before it looks at it (rendezvous_server.c), and compares its verdict with a model written from
 * boot_proto.h. It also drives hc_boot_format_ranks, which turns rank numbers into the text of the
 * errors every rank prints, with the payload as the rank list.
 *
 * Properties: no crash; hc_boot_msg_check accepts exactly the messages the model accepts and refuses
 * the others with HCCL_E_PARA; the rank list is a terminated string inside its buffer that names the
 * given ranks in order (see check_rank_list for what is not checked yet).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot_proto.h"
#include "fuzz_target.h"
#include "hc_check.h"

#define MAX_RANKS_LISTED 1024u
#define MAX_LIST_BYTES 600u

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_logs_default_off();
    return 0;
}

/* The protocol as boot_proto.h states it, written independently of the server. */
static int model_accepts(const hc_boot_hdr_t *hdr, const uint8_t *payload, size_t len)
{
    hc_boot_hello_t hello;

    if (hdr->magic != HC_BOOT_MAGIC || hdr->version != HC_BOOT_VERSION || hdr->len != len)
        return 0;
    if (hdr->type == HC_BOOT_DONE)
        return len == 0;
    if (hdr->type == HC_BOOT_GATHER)
        return len <= HC_BOOT_MAX_GATHER;
    if (hdr->type != HC_BOOT_HELLO || len != sizeof(hello))
        return 0;
    memcpy(&hello, payload, sizeof(hello));
    return hello.nranks >= 1 && hello.nranks <= HC_BOOT_MAX_RANKS && hello.rank < hello.nranks &&
           memchr(hello.self.hostname, '\0', sizeof(hello.self.hostname)) != NULL;
}

/* Expand "1, 3-5" back into ranks; returns how many, or -1 when the text is not such a list. Runs
 * follow uint32_t arithmetic, as the formatter's do. */
static long parse_rank_list(const char *text, uint32_t *ranks, size_t cap)
{
    size_t n = 0;
    const char *p = text;

    while (*p != '\0') {
        char *end;
        unsigned long first = strtoul(p, &end, 10), last;
        if (end == p)
            return -1;
        last = first;
        p = end;
        if (*p == '-') {
            last = strtoul(p + 1, &end, 10);
            if (end == p + 1)
                return -1;
            p = end;
        }
        for (uint32_t r = (uint32_t)first;; r++) {
            if (n == cap)
                return -1;
            ranks[n++] = r;
            if (r == (uint32_t)last)
                break;
        }
        if (*p == ',' && p[1] == ' ')
            p += 2;
        else if (*p != '\0')
            return -1;
    }
    return (long)n;
}

/*
 * The text must name the given ranks, in order, with nothing invented. A list cut short ends in
 * " ..." and its last item may itself be cut, so only the items before it are compared.
 *
 * CHECK_CUT_MARKED: a list that leaves ranks out must say so with " ...". This target found that
 * hc_boot_format_ranks wrote the marker past the terminator when the text ended early (so "ranks
 * 1, 3, 5 of 9 did not join" could silently leave out rank 7); fixed in root_info.c.
 */
#define CHECK_CUT_MARKED 1

static void check_rank_list(const uint8_t *bytes, size_t len, uint32_t list_bytes)
{
    uint32_t n = (uint32_t)(len / sizeof(uint32_t)), ranks[MAX_RANKS_LISTED], parsed[MAX_RANKS_LISTED + 1];
    char *buf = malloc(list_bytes); /* exactly list_bytes, so that the sanitizer sees any overrun */
    size_t text_len;
    long count;
    int cut;

    hc_assert(buf != NULL);
    if (n > MAX_RANKS_LISTED)
        n = MAX_RANKS_LISTED;
    memcpy(ranks, bytes, (size_t)n * sizeof(uint32_t));
    hc_boot_format_ranks(ranks, n, buf, list_bytes);
    hc_assert(memchr(buf, '\0', list_bytes) != NULL);
    text_len = strlen(buf);
    cut = text_len >= 4 && strcmp(buf + text_len - 4, " ...") == 0;
    if (cut) {
        char *last_separator;
        buf[text_len - 4] = '\0';
        last_separator = strstr(buf, ", ") != NULL ? strrchr(buf, ',') : NULL;
        if (last_separator != NULL)
            *last_separator = '\0';
        else
            buf[0] = '\0'; /* the only item may be cut: nothing to compare */
    }
    count = parse_rank_list(buf, parsed, MAX_RANKS_LISTED + 1);
    hc_assert(count >= 0 && (uint32_t)count <= n);
    hc_assert(memcmp(parsed, ranks, (size_t)count * sizeof(uint32_t)) == 0);
    if (CHECK_CUT_MARKED && !cut)
        hc_assert((uint32_t)count == n);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hc_boot_hdr_t hdr;
    size_t len = size > sizeof(hdr) ? size - sizeof(hdr) : 0;
    uint8_t *payload = malloc(len > 0 ? len : 1); /* own copy, exactly len bytes */
    HcclResult res;

    hc_assert(payload != NULL);
    memset(&hdr, 0, sizeof(hdr));
    memcpy(&hdr, data, size < sizeof(hdr) ? size : sizeof(hdr));
    memcpy(payload, data + (size - len), len);
    res = hc_boot_msg_check(&hdr, payload, len);
    hc_assert(res == HCCL_SUCCESS || res == HCCL_E_PARA);
    hc_assert((res == HCCL_SUCCESS) == model_accepts(&hdr, payload, len));
    /* The header's status field picks the text buffer: callers pass at least 6 bytes (boot_proto.h). */
    check_rank_list(payload, len, 6 + hdr.status % MAX_LIST_BYTES);
    free(payload);
    return 0;
}
