/* The flight recorder and the failure report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hc_check.h"
#include "hc_comm.h"
#include "hc_config.h"
#include "hc_time.h"
#include "hc_trace.h"

#define REPORT_OPS 8          /* recent ops printed in the log (all go to the JSON) */
#define ENGINE_VIEW_BYTES 8192

static const char *const state_names[] = {"queued", "running", "done", "failed"};

HcclResult hc_trace_init(hc_trace_t *trace, uint32_t cap)
{
    trace->cap = cap;
    trace->mask = cap > 0 && (cap & (cap - 1)) == 0 ? cap - 1 : UINT32_MAX;
    trace->ring = cap > 0 ? calloc(cap, sizeof(*trace->ring)) : NULL;
    if (cap > 0 && trace->ring == NULL) {
        HC_ERROR("out of memory for a flight recorder of %u ops", cap);
        return HCCL_E_MEMORY;
    }
    return HCCL_SUCCESS;
}

void hc_trace_fini(hc_trace_t *trace)
{
    free(trace->ring);
    trace->ring = NULL;
}

/* The recorder is on every op's path: times come from the coarse clock (hc_coarse_now_ns: a few ns
 * to read, a few ms of resolution, plenty for "queued 30 s ago"), and a power-of-two ring is indexed
 * with a mask (three 64-bit divisions per op otherwise).
 *
 * An entry belongs to its op until the op ends (done or failed): the launching thread (under
 * exec_lock) takes an entry only when its previous op has ended, and leaves an op unrecorded
 * otherwise, so a burst deeper than the ring keeps its oldest unfinished ops, the ones a hang report
 * needs, rather than its newest. Only the thread running an op moves its entry on, so plain
 * release stores do (a compare-and-swap per state was two atomic read-modify-writes per op). */
static hc_trace_entry_t *entry_of(hc_trace_t *trace, uint64_t seq)
{
    return &trace->ring[trace->mask != UINT32_MAX ? seq & trace->mask : seq % trace->cap];
}

static int ended(uint64_t tag)
{
    return (tag & 3) == HC_TRACE_DONE || (tag & 3) == HC_TRACE_FAILED;
}

void hc_trace_queued(hc_trace_t *trace, const hc_op_t *op, const void *stream)
{
    hc_trace_entry_t *e;

    if (trace->cap == 0)
        return;
    e = entry_of(trace, op->seq);
    if (e->seq != 0 && !ended(atomic_load_explicit(&e->tag, memory_order_acquire)))
        return; /* its op is still queued or running: this one goes unrecorded */
    e->seq = op->seq;
    e->sig = op->sig;
    e->stream = stream;
    /* Run as it is launched (op->run_ns set): queued and running at one time, in one write. */
    e->t_queued = op->run_ns != 0 ? op->run_ns : hc_coarse_now_ns();
    atomic_store_explicit(&e->result, HCCL_SUCCESS, memory_order_relaxed);
    atomic_store_explicit(&e->t_start, op->run_ns, memory_order_relaxed);
    atomic_store_explicit(&e->t_end, 0, memory_order_relaxed);
    atomic_store_explicit(&e->tag, op->seq << 2 | (op->run_ns != 0 ? HC_TRACE_RUNNING : HC_TRACE_QUEUED),
                          memory_order_release);
}

static void set_state(hc_trace_t *trace, uint64_t seq, hc_trace_state_t state, HcclResult result, int64_t now)
{
    hc_trace_entry_t *e;
    uint64_t tag;

    if (trace->cap == 0)
        return;
    e = entry_of(trace, seq);
    tag = atomic_load_explicit(&e->tag, memory_order_acquire);
    if (tag >> 2 != seq || ended(tag))
        return; /* unrecorded, or already ended (and perhaps taken by a later op since) */
    atomic_store_explicit(&e->result, result, memory_order_relaxed);
    atomic_store_explicit(state == HC_TRACE_RUNNING ? &e->t_start : &e->t_end, now != 0 ? now : hc_coarse_now_ns(),
                          memory_order_relaxed);
    atomic_store_explicit(&e->tag, seq << 2 | state, memory_order_release);
}

void hc_trace_state(hc_trace_t *trace, uint64_t seq, hc_trace_state_t state, HcclResult result)
{
    set_state(trace, seq, state, result, 0);
}

void hc_trace_running(hc_trace_t *trace, const hc_op_t *op)
{
    set_state(trace, op->seq, HC_TRACE_RUNNING, HCCL_SUCCESS, op->run_ns);
}

int hc_trace_worth_diagnosis(HcclResult res)
{
    return res == HCCL_E_TIMEOUT || res == HCCL_E_PARA || res == HCCL_E_REMOTE;
}

/* Entries in sequence order, oldest first, into out (cap entries); returns how many. `lock`: the
 * communicator's exec_lock, under which entries are written. */
static uint32_t snapshot(hc_trace_t *trace, hc_issue_lock_t *lock, hc_trace_view_t *out)
{
    uint32_t n = 0;

    hc_issue_lock(lock);
    for (uint32_t i = 0; i < trace->cap; i++) {
        hc_trace_entry_t *e = &trace->ring[i];
        uint64_t tag = atomic_load(&e->tag);
        if (e->seq == 0 || tag >> 2 != e->seq)
            continue;
        out[n++] = (hc_trace_view_t){.seq = e->seq, .sig = e->sig, .state = (hc_trace_state_t)(tag & 3),
                                     .result = (HcclResult)atomic_load(&e->result), .t_queued = e->t_queued,
                                     .t_start = atomic_load(&e->t_start), .t_end = atomic_load(&e->t_end),
                                     .stream = e->stream};
    }
    hc_issue_unlock(lock);
    for (uint32_t i = 1; i < n; i++) { /* insertion sort: the ring is nearly ordered */
        hc_trace_view_t e = out[i];
        uint32_t j = i;
        while (j > 0 && out[j - 1].seq > e.seq) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = e;
    }
    return n;
}

static double ms_between(int64_t from, int64_t to)
{
    return from == 0 || to == 0 ? -1.0 : (double)(to - from) / 1e6;
}

static void json_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if ((unsigned char)*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void write_json(const hc_comm_t *comm, const hc_op_t *op, HcclResult res, const hc_trace_view_t *ops,
                       uint32_t n, const char *engine_view)
{
    const char *path = hc_config_str(HC_CFG_TRACE_DUMP);
    int64_t now = hc_coarse_now_ns();
    char sig[160], file[4096];
    FILE *f;

    if (path == NULL)
        return;
    /* One file per rank: FILE gets ".rank<R>" appended so that ranks do not overwrite each other. */
    snprintf(file, sizeof(file), "%s.rank%u", path, comm->rank);
    f = fopen(file, "w");
    if (f == NULL) {
        HC_WARN("cannot write the flight recorder to %s: %s", file, strerror(errno));
        return;
    }
    fprintf(f, "{\"comm\": ");
    json_string(f, comm->name);
    fprintf(f, ", \"rank\": %u, \"nranks\": %u, \"failed_seq\": %llu, \"failed_op\": ", comm->rank, comm->nranks,
            (unsigned long long)op->seq);
    json_string(f, hc_op_sig_format(&op->sig, sig, sizeof(sig)));
    fprintf(f, ", \"result\": \"%s\", \"ops\": [", hc_result_name(res));
    for (uint32_t i = 0; i < n; i++) {
        fprintf(f, "%s\n  {\"seq\": %llu, \"op\": ", i ? "," : "", (unsigned long long)ops[i].seq);
        json_string(f, hc_op_sig_format(&ops[i].sig, sig, sizeof(sig)));
        fprintf(f, ", \"state\": \"%s\", \"result\": \"%s\", \"queued_ms_ago\": %.3f, \"run_ms\": %.3f, "
                   "\"stream\": \"%p\"}",
                state_names[ops[i].state], hc_result_name(ops[i].result), ms_between(ops[i].t_queued, now),
                ms_between(ops[i].t_start, ops[i].t_end != 0 ? ops[i].t_end : now), ops[i].stream);
    }
    fprintf(f, "],\n \"ranks\": ");
    json_string(f, engine_view);
    fprintf(f, "}\n");
    fclose(f);
    HC_INFO("flight recorder written to %s", file);
}

void hc_trace_report(hc_comm_t *comm, const hc_op_t *op, HcclResult res)
{
    hc_trace_view_t *ops = comm->trace.cap ? calloc(comm->trace.cap, sizeof(*ops)) : NULL;
    char *engine_view = calloc(1, ENGINE_VIEW_BYTES);
    int64_t now = hc_coarse_now_ns();
    uint32_t n = ops != NULL ? snapshot(&comm->trace, &comm->exec_lock, ops) : 0;
    char sig[160];

    const hc_engine_ops_t *eops = comm->engine != NULL ? comm->engine->ops : NULL;
    /* Every rank's view goes to its own JSON file; the log gets it from one rank only. */
    int log_view = eops == NULL || eops->report_turn == NULL || eops->report_turn(comm->engine, op);

    if (engine_view != NULL && eops != NULL && eops->describe != NULL)
        eops->describe(comm->engine, op, engine_view, ENGINE_VIEW_BYTES);
    if (log_view)
        HC_ERROR("diagnosis of %s #%llu (%s):\n%s", hc_op_sig_format(&op->sig, sig, sizeof(sig)),
                 hc_op_number(op), hc_result_name(res), engine_view != NULL ? engine_view : "");
    for (uint32_t i = n > REPORT_OPS ? n - REPORT_OPS : 0; i < n; i++)
        HC_INFO("recent op #%llu %s: %s, %s, queued %.3f ms ago", (unsigned long long)ops[i].seq,
                hc_op_sig_format(&ops[i].sig, sig, sizeof(sig)), state_names[ops[i].state],
                hc_result_name(ops[i].result), ms_between(ops[i].t_queued, now));
    write_json(comm, op, res, ops, n, engine_view != NULL ? engine_view : "");
    free(ops);
    free(engine_view);
}
