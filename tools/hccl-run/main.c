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

/*
 * Where the store listens: on loopback when every rank runs here (nothing else needs to reach it);
 * with ranks on other hosts, where they reach us: --store-addr, else the address the root info
 * would take (HCCL_IF_IP, HCCL_SOCKET_IFNAME, the first interface up).
 */
static int store_listen_addr(const hc_run_job_t *job, hc_sockaddr_t *addr_p)
{
    char text[HC_SOCKADDR_STR_BYTES + 8];

    if (!hc_run_hosts_remote(job))
        return hc_sockaddr_parse("127.0.0.1:0", addr_p) == HCCL_SUCCESS ? 0 : -1;
    if (job->args.store_addr == NULL)
        return hc_sock_pick_addr(addr_p, 0) == HCCL_SUCCESS ? 0 : -1;
    snprintf(text, sizeof(text), strchr(job->args.store_addr, ':') != NULL ? "[%s]:0" : "%s:0",
             job->args.store_addr);
    if (hc_sockaddr_parse(text, addr_p) != HCCL_SUCCESS) {
        fprintf(stderr, "hccl-run: --store-addr \"%s\" is not a numeric IP address\n", job->args.store_addr);
        return -1;
    }
    return 0;
}

static int start_store(hc_run_job_t *job, char *addr_text, size_t addr_len, char token_hex[HC_STORE_TOKEN_HEX_BYTES])
{
    uint8_t token[HC_STORE_TOKEN_BYTES];
    hc_sockaddr_t listen_addr;

    if (make_token(token) != 0 || store_listen_addr(job, &listen_addr) != 0)
        return -1;
    if (hc_store_server_create(&listen_addr, token, &job->store) != HCCL_SUCCESS)
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

/* Every rank on this host, numbered 0..N-1. */
static int plan_local(hc_run_job_t *job)
{
    job->world = job->args.nranks;
    job->nprocs = job->args.nranks;
    job->ranks = calloc(job->nprocs, sizeof(*job->ranks));
    if (job->ranks == NULL) {
        fprintf(stderr, "hccl-run: out of memory for %u ranks\n", job->nprocs);
        return -1;
    }
    for (uint32_t i = 0; i < job->nprocs; i++) {
        job->ranks[i].rank = i;
        job->ranks[i].count = 1;
        job->ranks[i].ctl_fd = -1;
        hc_run_stream_init(&job->ranks[i].out, i, STDOUT_FILENO);
        hc_run_stream_init(&job->ranks[i].err, i, STDERR_FILENO);
    }
    return 0;
}

static void job_init(hc_run_job_t *job, const hc_run_args_t *args)
{
    memset(job, 0, sizeof(*job));
    job->args = *args;
    job->signal_fd = -1;
    job->ctl_in = -1;
    job->exit_code = -1;
    job->phase = HC_RUN_PHASE_RUNNING;
    raise_fd_limit(job);
}

static void job_destroy(hc_run_job_t *job)
{
    hc_store_server_destroy(job->store);
    if (job->signal_fd >= 0)
        close(job->signal_fd);
    for (uint32_t i = 0; i < job->nprocs; i++)
        if (job->ranks[i].ctl_fd >= 0)
            close(job->ranks[i].ctl_fd);
    free(job->ranks);
    free(job->hosts_buf);
    free(job->node_argv);
    free(job->node_spec_buf);
}

/* hccl-run --node: run this host's share of a --hosts job (remote.c). */
static int run_node(hc_run_job_t *job)
{
    char addr_text[HC_SOCKADDR_STR_BYTES], token_hex[HC_STORE_TOKEN_HEX_BYTES];
    int code;

    if (hc_run_node_setup(job, addr_text, sizeof(addr_text), token_hex) != 0 || hc_run_signals_block(job) != 0) {
        job_destroy(job);
        return HC_RUN_EXIT_INTERNAL;
    }
    if (hc_run_ranks_spawn(job, addr_text, token_hex) != 0)
        hc_run_job_stop(job, HC_RUN_EXIT_INTERNAL);
    code = hc_run_job_supervise(job);
    job_destroy(job);
    return code;
}

int main(int argc, char **argv)
{
    char addr_text[HC_SOCKADDR_STR_BYTES], token_hex[HC_STORE_TOKEN_HEX_BYTES];
    hc_run_args_t args;
    hc_run_job_t job;
    int rc = hc_run_args_parse(argc, argv, &args), code;

    if (rc != 0)
        return rc < 0 ? HC_RUN_EXIT_USAGE : 0;
    job_init(&job, &args);
    if (args.node_spec != NULL)
        return run_node(&job);
    if ((args.hosts != NULL ? hc_run_hosts_plan(&job) : plan_local(&job)) != 0) {
        job_destroy(&job);
        return args.hosts != NULL ? HC_RUN_EXIT_USAGE : HC_RUN_EXIT_INTERNAL;
    }
    if (hc_run_signals_block(&job) != 0 || start_store(&job, addr_text, sizeof(addr_text), token_hex) != 0) {
        job_destroy(&job);
        return HC_RUN_EXIT_INTERNAL;
    }
    /* A rank or node that could not start stops the ones that did, through the same path as a
     * failure. */
    if (hc_run_ranks_spawn(&job, addr_text, token_hex) != 0 || hc_run_nodes_spawn(&job, addr_text, token_hex) != 0)
        hc_run_job_stop(&job, HC_RUN_EXIT_INTERNAL);
    code = hc_run_job_supervise(&job);
    job_destroy(&job);
    return code;
}
