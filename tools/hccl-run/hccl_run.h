/*
 * hccl-run: start N local ranks of a program, serve them a rendezvous store, forward signals and
 * output, and turn the ranks' fates into one exit status (docs/hccl-run.md).
 *
 * The launcher is one thread and one poll loop (supervise.c): store clients, the ranks' output
 * pipes (with --tag-output) and a signalfd that carries SIGCHLD and the signals to forward. A
 * single thread means fork() in spawn.c needs no care about locks held by other threads.
 */
#ifndef HCCL_RUN_H
#define HCCL_RUN_H

#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "hc_store.h"

#define HC_RUN_MAX_RANKS 4096u

/* Exit statuses of hccl-run itself, after timeout(1): 124 the job ran out of time, 125 the
 * launcher failed; 2 is a usage error. A rank's own status is passed through otherwise. */
#define HC_RUN_EXIT_USAGE 2
#define HC_RUN_EXIT_TIMEOUT 124
#define HC_RUN_EXIT_INTERNAL 125

/* After SIGTERM, ranks get this long to exit before SIGKILL; after SIGKILL, this long to be
 * reaped before hccl-run gives up waiting (a process stuck in the kernel cannot be helped). */
#define HC_RUN_KILL_GRACE_NS (2 * 1000000000LL)

typedef struct {
    uint32_t nranks;
    int tag_output;    /* prefix every output line with "[R] " */
    int64_t timeout_s; /* 0: none */
    int keep_going;    /* a failed rank does not stop the others (the first failure is still the status) */
    int bind_none;     /* --bind-to none: leave the ranks' affinity as hccl-run's */
    char **argv;       /* the program and its arguments, NULL-terminated */
} hc_run_args_t;

/* One output stream of one rank (stdout or stderr), forwarded line by line with a prefix. */
typedef struct {
    int fd;           /* read end of the rank's pipe; -1 when closed or not piped */
    int out_fd;       /* where lines go: STDOUT_FILENO or STDERR_FILENO */
    char prefix[16];  /* "[R] " */
    char *buf;        /* the current incomplete line */
    size_t len;
    int mid_line;     /* part of the current line was already written (it outgrew buf) */
} hc_run_stream_t;

typedef struct {
    uint32_t rank;
    pid_t pid;        /* 0 before it starts and after it is reaped */
    int running;
    hc_run_stream_t out;
    hc_run_stream_t err;
} hc_run_rank_t;

typedef enum {
    HC_RUN_PHASE_RUNNING,     /* waiting for the ranks to finish */
    HC_RUN_PHASE_TERMINATING, /* SIGTERM sent, SIGKILL at phase_deadline_ns */
    HC_RUN_PHASE_KILLING      /* SIGKILL sent, give up waiting at phase_deadline_ns */
} hc_run_phase_t;

typedef struct {
    hc_run_args_t args;
    hc_run_rank_t *ranks;
    uint32_t live;                 /* ranks started and not reaped */
    hc_store_server_t *store;
    int signal_fd;
    sigset_t saved_mask;           /* the mask hccl-run was started with, restored in the ranks */
    struct sigaction saved_sigpipe;
    struct rlimit saved_nofile;    /* the descriptor limit hccl-run was started with, likewise */
    int nofile_raised;             /* saved_nofile needs restoring in the ranks */
    hc_run_phase_t phase;
    int64_t phase_deadline_ns;
    int64_t timeout_deadline_ns;   /* 0: none */
    int exit_code;                 /* -1 until something decides it */
} hc_run_job_t;

/* args.c: parse the command line. 0 run, 1 done (help or version printed), -1 usage error
 * (message and usage printed). */
int hc_run_args_parse(int argc, char **argv, hc_run_args_t *args_p);

/* bind.c: rank's share of the CPUs in `allowed` when nranks ranks split them (--bind-to share):
 * 0, or -1 when there is nothing to split (share left empty). */
int hc_run_share_cpus(const cpu_set_t *allowed, uint32_t rank, uint32_t nranks, cpu_set_t *share);

/* spawn.c: fork and exec every rank with its environment. Returns 0, or -1 after a failure to
 * start some rank (logged); ranks already started are running and counted in job->live. */
int hc_run_ranks_spawn(hc_run_job_t *job, const char *store_addr, const char *token_hex);

/* output.c: forwarding of one stream. */
void hc_run_stream_init(hc_run_stream_t *stream, uint32_t rank, int out_fd);
int hc_run_stream_open(hc_run_stream_t *stream, int fd);
void hc_run_stream_read(hc_run_stream_t *stream);
void hc_run_stream_close(hc_run_stream_t *stream);

/* supervise.c: signals and the event loop. */
int hc_run_signals_block(hc_run_job_t *job);
void hc_run_job_stop(hc_run_job_t *job, int exit_code);
int hc_run_job_supervise(hc_run_job_t *job);

#endif /* HCCL_RUN_H */
