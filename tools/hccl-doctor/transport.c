/*
 * How two ranks of the job reach each other. The measurement itself always goes through libhccl
 * (a two-rank sub-communicator), so it measures whatever path the library takes; this file names
 * that path for the report, behind an ops table with two sources:
 *
 *   library  what the library itself says: every rank asks HcclHostGetLinkInfo about every peer on
 *            the job's communicator and the rows are gathered, so pair (a, b) has a's view of b
 *            ("tcp 10.0.0.2:41234 x2": b's listening address) and b's view of a;
 *   probe    the doctor's own reasoning, where the library cannot say (HCCL_E_NOT_SUPPORT): ranks
 *            with the same host identity (boot id, network and pid namespaces) use shared memory,
 *            others TCP; cross-memory attach as the doctor's own process_vm_readv probe found it.
 */
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

const char *doc_link_text(const doctor_t *doc, uint32_t a, uint32_t b)
{
    if (doc->link_text == NULL)
        return "";
    return &doc->link_text[((uint64_t)a * doc->size + b) * DOC_LINK_LEN];
}

/* "10.0.0.2:41234" -> "10.0.0.2"; "[fe80::1]:41234" -> "fe80::1". */
void doc_addr_host(const char *addr, char *host, size_t len)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon != NULL ? (size_t)(colon - addr) : strlen(addr);

    if (addr[0] == '[' && n >= 2 && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    snprintf(host, len, "%.*s", (int)n, addr);
}

/* Parse "tcp ADDR:PORT xN"; 0 on success. */
static int parse_tcp(const char *text, char *addr, size_t len, uint32_t *nsocks_p)
{
    char word[DOC_ADDR_LEN];
    unsigned n = 0;

    if (sscanf(text, "tcp %63s x%u", word, &n) != 2)
        return -1;
    snprintf(addr, len, "%s", word);
    *nsocks_p = n;
    return 0;
}

/* This rank's listening address as the library of a peer on another host names it, or NULL. */
const char *doc_my_lib_addr(const doctor_t *doc, char *buf, size_t len)
{
    uint32_t nsocks;

    for (uint32_t p = 0; p < doc->size; p++)
        if (p != doc->rank && parse_tcp(doc_link_text(doc, p, doc->rank), buf, len, &nsocks) == 0)
            return buf;
    return NULL;
}

static doc_kind_t kind_of(const char *kind)
{
    return strcmp(kind, "shm") == 0 ? KIND_SHM : strcmp(kind, "tcp") == 0 ? KIND_TCP : KIND_OTHER;
}

static void probe_describe(const doctor_t *doc, uint32_t a, uint32_t b, doc_transport_t *out)
{
    const doc_info_t *infos = doc->infos;
    uint32_t n = doc->size;

    memset(out, 0, sizeof(*out));
    out->source = "probe";
    out->same_host = strcmp(infos[a].host_id, infos[b].host_id) == 0;
    if (!out->same_host) {
        snprintf(out->kind, sizeof(out->kind), "tcp");
        out->kind_id = KIND_TCP;
        snprintf(out->addr_a, sizeof(out->addr_a), "%s", infos[a].ifaddr);
        snprintf(out->addr_b, sizeof(out->addr_b), "%s", infos[b].ifaddr);
        snprintf(out->detail, sizeof(out->detail), "%s %s <-> %s %s", infos[a].ifname, infos[a].ifaddr,
                 infos[b].ifname, infos[b].ifaddr);
        return;
    }
    snprintf(out->kind, sizeof(out->kind), "shm");
    out->kind_id = KIND_SHM;
    out->cma = doc->cma[(uint64_t)a * n + b] == 1 && doc->cma[(uint64_t)b * n + a] == 1;
    snprintf(out->detail, sizeof(out->detail), "shared memory; plain buffers: %s",
             out->cma ? "CMA allowed" : "two copies (CMA not allowed)");
}

const doc_transport_source_ops_t doc_transport_probe_ops = {
    .name = "probe",
    .describe = probe_describe,
};

/* Both views agree on shm: say whether plain buffers take one copy both ways ("shm+cma": those of
 * huge pages; "shm+cma malloc": ordinary malloc buffers too, in the larger operations). */
static void library_shm(const char *ab, const char *ba, doc_transport_t *out)
{
    int malloc_too = strcmp(ab, "shm+cma malloc") == 0 && strcmp(ba, "shm+cma malloc") == 0;

    out->cma = malloc_too || (strncmp(ab, "shm+cma", 7) == 0 && strncmp(ba, "shm+cma", 7) == 0);
    snprintf(out->detail, sizeof(out->detail), "shared memory; plain buffers: %s",
             malloc_too  ? "1 copy (CMA) when large"
             : out->cma ? "1 copy on huge pages"
                        : "two copies (CMA not allowed)");
}

/* Both views are TCP: each side's interface (this doctor's) and listening address (the library's). */
static void library_tcp(const doctor_t *doc, uint32_t a, uint32_t b, const char *ab, const char *ba,
                        doc_transport_t *out)
{
    uint32_t nab = 0, nba = 0;

    (void)parse_tcp(ab, out->addr_b, sizeof(out->addr_b), &nab);
    (void)parse_tcp(ba, out->addr_a, sizeof(out->addr_a), &nba);
    out->nsocks = nab;
    snprintf(out->detail, sizeof(out->detail), "%s %s <-> %s %s x%u", doc->infos[a].ifname, out->addr_a,
             doc->infos[b].ifname, out->addr_b, nab);
    if (nab != nba)
        snprintf(out->detail + strlen(out->detail), sizeof(out->detail) - strlen(out->detail),
                 " (rank %u says x%u)", b, nba);
}

static void library_describe(const doctor_t *doc, uint32_t a, uint32_t b, doc_transport_t *out)
{
    const char *ab = doc_link_text(doc, a, b), *ba = doc_link_text(doc, b, a);
    char word_ab[16] = "", word_ba[16] = "";

    if (ab[0] == '\0' || ba[0] == '\0') {
        probe_describe(doc, a, b, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    out->source = "library";
    out->same_host = strcmp(doc->infos[a].host_id, doc->infos[b].host_id) == 0;
    sscanf(ab, "%15[a-z]", word_ab);
    sscanf(ba, "%15[a-z]", word_ba);
    /* "shm+cma" is shm; the first word names the transport. */
    snprintf(out->kind, sizeof(out->kind), "%s", word_ab);
    out->kind_id = kind_of(out->kind);
    if (strcmp(word_ab, word_ba) != 0)
        snprintf(out->detail, sizeof(out->detail), "rank %u says \"%s\", rank %u says \"%s\"", a, ab, b, ba);
    else if (out->kind_id == KIND_SHM)
        library_shm(ab, ba, out);
    else if (out->kind_id == KIND_TCP)
        library_tcp(doc, a, b, ab, ba, out);
    else
        snprintf(out->detail, sizeof(out->detail), "%s", ab);
}

const doc_transport_source_ops_t doc_transport_library_ops = {
    .name = "library",
    .describe = library_describe,
};
