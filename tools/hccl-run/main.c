/* hccl-run: the local launcher (DESIGN.md 4, "Launch without MPI"; docs/hccl-run.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "hccl_run.h"

/* A fresh 128-bit token per job: only the ranks learn it, so no other local process can read
 * or write the job's store, and a rank of an older job cannot wander into this one. */
static int make_token(uint8_t token_p[HC_STORE_TOKEN_BYTES])
{
    size_t got = 0;

    while (got < HC_STORE_TOKEN_BYTES) {
        ssize_t n = getrandom(token_p + got, HC_STORE_TOKEN_BYTES - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "hccl-run: getrandom failed: %s\n", strerror(errno));
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/* Serve the store on loopback only: the ranks are local, and nothing else needs to reach it. */
static int start_store(hc_run_job_t *job, char *addr_text, size_t addr_len, char token_hex[HC_STORE_TOKEN_HEX_BYTES])
{
    uint8_t token[HC_STORE_TOKEN_BYTES];
    hc_sockaddr_t loopback;

    if (make_token(token) != 0 || hc_sockaddr_parse("127.0.0.1:0", &loopback) != HCCL_SUCCESS)
        return -1;
    if (hc_store_server_create(&loopback, token, &job->store) != HCCL_SUCCESS)
        return -1; /* the store has said why */
    hc_sockaddr_str(hc_store_server_addr(job->store), addr_text, addr_len);
    hc_store_token_format(token, token_hex);
    return 0;
}

/*
 * Two pipes per rank with --tag-output and one store connection per rank at the rendezvous: a
 * large job needs more descriptors than the usual soft limit of 1024. Raise ours to the hard limit;
 * the ranks get the original back (spawn.c), as a program started directly would have it.
 */
static void raise_fd_limit(hc_run_job_t *job)
{
    struct rlimit raised;

    if (getrlimit(RLIMIT_NOFILE, &job->saved_nofile) != 0 || job->saved_nofile.rlim_cur == job->saved_nofile.rlim_max)
        return;
    raised = job->saved_nofile;
    raised.rlim_cur = raised.rlim_max;
    job->nofile_raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
}

static int job_init(hc_run_job_t *job, const hc_run_args_t *args)
{
    memset(job, 0, sizeof(*job));
    job->args = *args;
    job->signal_fd = -1;
    job->exit_code = -1;
    job->phase = HC_RUN_PHASE_RUNNING;
    raise_fd_limit(job);
    job->ranks = calloc(args->nranks, sizeof(*job->ranks));
    if (job->ranks == NULL) {
        fprintf(stderr, "hccl-run: out of memory for %u ranks\n", args->nranks);
        return -1;
    }
    for (uint32_t i = 0; i < args->nranks; i++) {
        job->ranks[i].rank = i;
        hc_run_stream_init(&job->ranks[i].out, i, STDOUT_FILENO);
        hc_run_stream_init(&job->ranks[i].err, i, STDERR_FILENO);
    }
    return 0;
}

static void job_destroy(hc_run_job_t *job)
{
    hc_store_server_destroy(job->store);
    if (job->signal_fd >= 0)
        close(job->signal_fd);
    free(job->ranks);
}

int main(int argc, char **argv)
{
    char addr_text[HC_SOCKADDR_STR_BYTES], token_hex[HC_STORE_TOKEN_HEX_BYTES];
    hc_run_args_t args;
    hc_run_job_t job;
    int rc = hc_run_args_parse(argc, argv, &args), code;

    if (rc != 0)
        return rc < 0 ? HC_RUN_EXIT_USAGE : 0;
    if (job_init(&job, &args) != 0)
        return HC_RUN_EXIT_INTERNAL;
    if (hc_run_signals_block(&job) != 0 || start_store(&job, addr_text, sizeof(addr_text), token_hex) != 0) {
        job_destroy(&job);
        return HC_RUN_EXIT_INTERNAL;
    }
    /* A rank that could not start stops the ones that did, through the same path as a failure. */
    if (hc_run_ranks_spawn(&job, addr_text, token_hex) != 0)
        hc_run_job_stop(&job, HC_RUN_EXIT_INTERNAL);
    code = hc_run_job_supervise(&job);
    job_destroy(&job);
    return code;
}
