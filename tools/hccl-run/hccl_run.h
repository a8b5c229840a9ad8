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

#define HC_RUN_MAX_EXPORTS 64u

typedef struct {
    uint32_t nranks;
    int tag_output;    /* prefix every output line with "[R] " */
    int64_t timeout_s; /* 0: none */
    int keep_going;    /* a failed rank does not stop the others (the first failure is still the status) */
    int bind_none;     /* --bind-to none: leave the ranks' affinity as hccl-run's */
    char **argv;       /* the program and its arguments, NULL-terminated */
    const char *hosts;      /* --hosts LIST, NULL: every rank on this host (remote.c) */
    const char *agent;      /* --agent TEMPLATE, NULL: ssh */
    const char *store_addr; /* --store-addr IP, NULL: chosen like HCCL_IF_IP / HCCL_SOCKET_IFNAME */
    const char *exports[HC_RUN_MAX_EXPORTS]; /* -x NAME[=VALUE]: also passed to the other hosts */
    uint32_t nexports;
    const char *node_spec;  /* --node SPEC: this hccl-run serves one host of a --hosts job (remote.c) */
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

/* One process hccl-run supervises: a rank it started itself, or the agent that runs the ranks of
 * another host (a node: its hccl-run --node answers for `count` ranks from `rank` on). */
typedef struct {
    uint32_t rank;    /* global rank (a node: its first) */
    uint32_t count;   /* ranks this process stands for: 1, or a node's */
    const char *host; /* a node's host; NULL for a rank */
    int ctl_fd;       /* a node's control pipe (signals to forward; closing it stops the node); else -1 */
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
    hc_run_rank_t *ranks;          /* nprocs entries: ranks of this host, nodes of the others */
    uint32_t nprocs;
    uint32_t rank_base;            /* global rank of this host's first rank (a node's) */
    uint32_t world;                /* ranks in the whole job */
    int ctl_in;                    /* a node: the control pipe from the head (stdin); else -1 */
    char *hosts_buf;               /* --hosts, cut into the host names that entries point to */
    char **node_argv;              /* a node: the program and arguments decoded from its spec */
    char *node_spec_buf;           /* a node: the decoded spec that node_argv points into */
    uint32_t live;                 /* processes started and not reaped */
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

/* spawn.c: fork and exec every rank of this host (entries without a host) with its environment.
 * Returns 0, or -1 after a failure to start some rank (logged); ranks already started are running
 * and counted in job->live. */
int hc_run_ranks_spawn(hc_run_job_t *job, const char *store_addr, const char *token_hex);

/* remote.c: --hosts. hc_run_hosts_plan fills job->ranks with this host's ranks and one node per
 * other host (0, or -1 after a usage error it printed); hc_run_nodes_spawn starts the agents
 * (0, or -1 after a failure it printed); hc_run_node_setup turns this process into the node that
 * --node SPEC describes (0, or -1 after printing why). hc_run_hosts_remote: some host is not this
 * one, so the store must listen where other hosts reach it. */
int hc_run_hosts_plan(hc_run_job_t *job);
int hc_run_hosts_remote(const hc_run_job_t *job);
int hc_run_nodes_spawn(hc_run_job_t *job, const char *store_addr, const char *token_hex);
int hc_run_node_setup(hc_run_job_t *job, char *store_addr, size_t addr_len, char *token_hex);
void hc_run_node_signal(hc_run_rank_t *node, int signo);

/* The control byte that tells a node to stop its ranks (SIGTERM, then SIGKILL) as part of stopping
 * the job; any other byte is a signal number to forward. */
#define HC_RUN_NODE_STOP 0

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
