/*
 * How two ranks of the job reach each other. The measurement itself always goes through libhccl
 * (a two-rank sub-communicator), so it measures whatever path the library takes; this file only
 * names that path for the report. Today the doctor works it out itself, from facts the ranks
 * exchanged: two ranks with the same host identity (boot id, network and pid namespaces) talk
 * through the intra-host engine's shared memory, and plain (malloc) buffers move in one copy when
 * cross-memory attach works in both directions (the probe the library itself makes). A rank pair
 * on different hosts would use the inter-host engine, which is not built yet.
 *
 * Another source can replace this one without touching the rest of the doctor: a library call
 * that reports, per peer of a communicator, the transport and interface it chose.
 */
#include <string.h>

#include "doctor.h"

static void probe_describe(const doc_info_t *infos, const int8_t *cma, uint32_t n, uint32_t a, uint32_t b,
                           doc_transport_t *out)
{
    memset(out, 0, sizeof(*out));
    out->same_host = strcmp(infos[a].host_id, infos[b].host_id) == 0;
    if (!out->same_host) {
        snprintf(out->kind, sizeof(out->kind), "tcp");
        snprintf(out->detail, sizeof(out->detail), "%s %s -> %s %s (needs the inter-host engine)", infos[a].ifname,
                 infos[a].ifaddr, infos[b].ifname, infos[b].ifaddr);
        return;
    }
    snprintf(out->kind, sizeof(out->kind), "shm");
    out->cma = cma[(uint64_t)a * n + b] == 1 && cma[(uint64_t)b * n + a] == 1;
    snprintf(out->detail, sizeof(out->detail), "shared memory; plain buffers: %s",
             out->cma ? "single copy (CMA)" : "two copies (CMA not allowed)");
}

const doc_transport_source_ops_t doc_transport_probe_ops = {
    .name = "probe",
    .describe = probe_describe,
};
