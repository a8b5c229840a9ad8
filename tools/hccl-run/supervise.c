/*
 * The launcher's event loop: one poll over the signalfd, the store and the ranks' output pipes,
 * woken early only by deadlines (the job's --timeout, the SIGTERM-to-SIGKILL grace, the store's
 * waits). Signals never interrupt anything: they are blocked and read from the signalfd as events,
 * so there is no handler and no async-signal-safety to reason about.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hc_time.h"
#include "hccl_run.h"

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof(forwarded_signals) / sizeof(forwarded_signals[0]))

int hc_run_signals_block(hc_run_job_t *job)
{
    struct sigaction ignore = {.sa_handler = SIG_IGN};
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaddset(&set, forwarded_signals[i]);
    /* Block before the first fork, so that no SIGCHLD can be missed: it stays pending for the
     * signalfd. The ranks get the original mask back before exec. */
    if (sigprocmask(SIG_BLOCK, &set, &job->saved_mask) != 0) {
        fprintf(stderr, "hccl-run: sigprocmask failed: %s\n", strerror(errno));
        return -1;
    }
    job->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (job->signal_fd < 0) {
        fprintf(stderr, "hccl-run: signalfd failed: %s\n", strerror(errno));
        return -1;
    }
    /* A closed stdout must not kill the launcher (and with it, through PDEATHSIG, every rank);
     * output.c notices EPIPE instead. The ranks get the original disposition back. */
    sigaction(SIGPIPE, &ignore, &job->saved_sigpipe);
    return 0;
}

/* Signal every running process: a rank directly, a node through its control pipe (remote.c). */
static void signal_ranks(hc_run_job_t *job, int signo)
{
    for (uint32_t i = 0; i < job->nprocs; i++) {
        if (!job->ranks[i].running)
            continue;
        if (job->ranks[i].host != NULL)
            hc_run_node_signal(&job->ranks[i], signo);
        else
            kill(job->ranks[i].pid, signo);
    }
}

void hc_run_job_stop(hc_run_job_t *job, int exit_code)
{
    if (job->exit_code < 0)
        job->exit_code = exit_code;
    if (job->phase != HC_RUN_PHASE_RUNNING)
        return;
    /* Nodes are told to stop (they then SIGTERM their ranks without reporting them as failures),
     * ranks here get SIGTERM. */
    for (uint32_t i = 0; i < job->nprocs; i++) {
        if (!job->ranks[i].running)
            continue;
        if (job->ranks[i].host != NULL)
            hc_run_node_signal(&job->ranks[i], HC_RUN_NODE_STOP);
        else
            kill(job->ranks[i].pid, SIGTERM);
    }
    job->phase = HC_RUN_PHASE_TERMINATING;
    job->phase_deadline_ns = hc_now_ns() + HC_RUN_KILL_GRACE_NS;
}

/* The running ranks as a list of ranges ("0-2,5"), cut short with "..." when long. Entries are in
 * rank order; a node's entry stands for its whole range. */
static void format_running(const hc_run_job_t *job, char *buf, size_t len)
{
    size_t used = 0;
    uint32_t i = 0, n = job->nprocs;

    buf[0] = '\0';
    while (i < n) {
        uint32_t first, last;
        int w;
        if (!job->ranks[i].running) {
            i++;
            continue;
        }
        first = job->ranks[i].rank;
        while (i + 1 < n && job->ranks[i + 1].running)
            i++;
        last = job->ranks[i].rank + job->ranks[i].count - 1;
        w = first == last ? snprintf(buf + used, len - used, "%s%u", used ? "," : "", first)
                          : snprintf(buf + used, len - used, "%s%u-%u", used ? "," : "", first, last);
        if (w < 0 || (size_t)w >= len - used) {
            snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
            return;
        }
        used += (size_t)w;
        i++;
    }
}

/* Say how a rank failed, in one write: the ranks share our stderr (without --tag-output), and a
 * line written in pieces can be cut by their output. */
static void report_exit(const hc_run_job_t *job, const hc_run_rank_t *r, int status, int code)
{
    char line[256];
    int n;

    if (r->host != NULL)
        n = snprintf(line, sizeof(line), "hccl-run: host %s (ranks %u-%u, agent pid %d) exited with status %d%s\n",
                     r->host, r->rank, r->rank + r->count - 1, (int)r->pid, code,
                     job->live > 0 && !job->args.keep_going ? "; stopping the other ranks" : "");
    else if (WIFEXITED(status))
        n = snprintf(line, sizeof(line), "hccl-run: rank %u (pid %d) exited with status %d%s\n", r->rank,
                     (int)r->pid, code, job->live > 0 && !job->args.keep_going ? "; stopping the other ranks" : "");
    else
        n = snprintf(line, sizeof(line), "hccl-run: rank %u (pid %d) was killed by signal %d (%s)%s\n", r->rank,
                     (int)r->pid, WTERMSIG(status), strsignal(WTERMSIG(status)),
                     job->live > 0 && !job->args.keep_going ? "; stopping the other ranks" : "");
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
        return; /* nowhere left to say it */
}

/* Tell the ranks through the store that rank r has ended: one waiting for something only r would
 * have set (rank 0's root info) then fails at once instead of at HCCL_CONNECT_TIMEOUT. */
static void record_exit(hc_run_job_t *job, const hc_run_rank_t *r, int status)
{
    char key[HC_STORE_EXIT_KEY_BYTES], how[96];
    uint32_t count = r->host != NULL ? r->count : 1; /* an agent's end is the end of its host's ranks */

    if (job->store == NULL) /* a node of a multi-host job: the head serves the store */
        return;
    if (WIFEXITED(status))
        snprintf(how, sizeof(how), "(pid %d) exited with status %d", (int)r->pid, WEXITSTATUS(status));
    else
        snprintf(how, sizeof(how), "(pid %d) was killed by signal %d", (int)r->pid, WTERMSIG(status));
    for (uint32_t k = 0; k < count; k++) {
        hc_store_exit_key(r->rank + k, key);
        if (hc_store_server_put(job->store, key, how, strlen(how) + 1) != HCCL_SUCCESS)
            fprintf(stderr, "hccl-run: cannot record in the store that rank %u ended\n", r->rank + k);
    }
}

/* A rank ended: record how, pass its last output on, and stop the job if it failed. */
static void on_rank_exit(hc_run_job_t *job, hc_run_rank_t *r, int status)
{
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

    r->running = 0;
    job->live--;
    record_exit(job, r, status);
    hc_run_stream_close(&r->out);
    hc_run_stream_close(&r->err);
    if (r->ctl_fd >= 0) {
        close(r->ctl_fd);
        r->ctl_fd = -1;
    }
    if (code == 0 || job->phase != HC_RUN_PHASE_RUNNING)
        return;
    report_exit(job, r, status, code);
    if (job->args.keep_going) {
        if (job->exit_code < 0)
            job->exit_code = code;
        return;
    }
    hc_run_job_stop(job, code);
}

static void reap_ranks(hc_run_job_t *job)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (uint32_t i = 0; i < job->nprocs; i++) {
            if (job->ranks[i].running && job->ranks[i].pid == pid) {
                on_rank_exit(job, &job->ranks[i], status);
                break;
            }
        }
    }
}

/*
 * Forward a signal to every rank. A signal the kernel sent (SI_KERNEL: the terminal's Ctrl-C,
 * Ctrl-\ or hang-up) went to the whole foreground process group, which holds this host's ranks
 * too: they have it already, and forwarding would deliver it twice. Nodes run in process groups of
 * their own (remote.c), so they always get it from here.
 */
static void forward_signal(hc_run_job_t *job, const struct signalfd_siginfo *info)
{
    for (uint32_t i = 0; i < job->nprocs; i++) {
        hc_run_rank_t *r = &job->ranks[i];
        if (!r->running || (info->ssi_code == SI_KERNEL && r->host == NULL))
            continue;
        if (r->host != NULL)
            hc_run_node_signal(r, (int)info->ssi_signo);
        else
            kill(r->pid, (int)info->ssi_signo);
    }
}

/*
 * A node reads its control pipe from the head: each byte is a signal to forward to its ranks; end
 * of file means the head is gone or gave up on the job, and the ranks are killed at once.
 */
static void read_control(hc_run_job_t *job)
{
    unsigned char sig[64];
    ssize_t n = read(job->ctl_in, sig, sizeof(sig));

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(job->ctl_in);
        job->ctl_in = -1;
        if (job->exit_code < 0)
            job->exit_code = 128 + SIGKILL;
        signal_ranks(job, SIGKILL);
        job->phase = HC_RUN_PHASE_KILLING;
        job->phase_deadline_ns = hc_now_ns() + HC_RUN_KILL_GRACE_NS;
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (sig[i] == HC_RUN_NODE_STOP)
            hc_run_job_stop(job, 128 + SIGTERM);
        for (size_t k = 0; k < N_FORWARDED; k++)
            if (sig[i] == forwarded_signals[k])
                signal_ranks(job, sig[i]);
    }
}

static void read_signals(hc_run_job_t *job)
{
    struct signalfd_siginfo info;

    while (read(job->signal_fd, &info, sizeof(info)) == (ssize_t)sizeof(info)) {
        if (info.ssi_signo == SIGCHLD)
            reap_ranks(job);
        else
            forward_signal(job, &info);
    }
    /* SIGCHLD signals coalesce; reaping once more costs nothing and misses nothing. */
    reap_ranks(job);
}

static void check_deadlines(hc_run_job_t *job)
{
    char running[256];

    if (job->phase == HC_RUN_PHASE_RUNNING && hc_deadline_passed(job->timeout_deadline_ns)) {
        format_running(job, running, sizeof(running));
        fprintf(stderr, "hccl-run: timeout after %lld s; ranks still running: %s\n", (long long)job->args.timeout_s,
                running);
        hc_run_job_stop(job, HC_RUN_EXIT_TIMEOUT);
    } else if (job->phase == HC_RUN_PHASE_TERMINATING && hc_deadline_passed(job->phase_deadline_ns)) {
        format_running(job, running, sizeof(running));
        fprintf(stderr, "hccl-run: ranks %s did not exit after SIGTERM; sending SIGKILL\n", running);
        signal_ranks(job, SIGKILL);
        job->phase = HC_RUN_PHASE_KILLING;
        job->phase_deadline_ns = hc_now_ns() + HC_RUN_KILL_GRACE_NS;
    }
}

/* The poll timeout: time to the earliest of our deadlines and the store's. */
static int next_timeout_ms(const hc_run_job_t *job)
{
    int64_t deadlines[3] = {job->phase == HC_RUN_PHASE_RUNNING ? job->timeout_deadline_ns : 0,
                            job->phase != HC_RUN_PHASE_RUNNING ? job->phase_deadline_ns : 0,
                            job->store != NULL ? hc_store_server_deadline(job->store) : 0};
    int64_t earliest = 0;

    for (int i = 0; i < 3; i++) {
        if (deadlines[i] != 0 && (earliest == 0 || deadlines[i] < earliest))
            earliest = deadlines[i];
    }
    return hc_deadline_ms_left(earliest);
}

/* Fill pfds with the signalfd, the store (a node: its control pipe) and every open output stream
 * (listed in streams). */
static nfds_t build_poll_set(hc_run_job_t *job, struct pollfd *pfds, hc_run_stream_t **streams)
{
    nfds_t n = 2;

    pfds[0] = (struct pollfd){.fd = job->signal_fd, .events = POLLIN};
    pfds[1] = (struct pollfd){.fd = job->store != NULL ? hc_store_server_fd(job->store) : job->ctl_in,
                              .events = POLLIN};
    for (uint32_t i = 0; i < job->nprocs; i++) {
        hc_run_stream_t *pair[2] = {&job->ranks[i].out, &job->ranks[i].err};
        for (int k = 0; k < 2; k++) {
            if (pair[k]->fd < 0)
                continue;
            streams[n] = pair[k];
            pfds[n++] = (struct pollfd){.fd = pair[k]->fd, .events = POLLIN};
        }
    }
    return n;
}

/* One turn of the loop: 0 go on, -1 poll failed. */
static int loop_once(hc_run_job_t *job, struct pollfd *pfds, hc_run_stream_t **streams)
{
    nfds_t n = build_poll_set(job, pfds, streams);
    int rc = poll(pfds, n, next_timeout_ms(job));

    if (rc < 0 && errno != EINTR) {
        fprintf(stderr, "hccl-run: poll failed: %s\n", strerror(errno));
        return -1;
    }
    /* Output before exits: a rank's last lines are read before its exit is reported. */
    for (nfds_t i = 2; rc > 0 && i < n; i++) {
        if (pfds[i].revents != 0)
            hc_run_stream_read(streams[i]);
    }
    if (job->store != NULL)
        hc_store_server_progress(job->store);
    else if (rc > 0 && pfds[1].revents != 0 && job->ctl_in >= 0)
        read_control(job);
    if (rc > 0 && pfds[0].revents != 0)
        read_signals(job);
    check_deadlines(job);
    return 0;
}

int hc_run_job_supervise(hc_run_job_t *job)
{
    size_t cap = 2 + 2 * (size_t)job->nprocs;
    struct pollfd *pfds = calloc(cap, sizeof(*pfds));
    hc_run_stream_t **streams = calloc(cap, sizeof(*streams));

    if (pfds == NULL || streams == NULL) {
        fprintf(stderr, "hccl-run: out of memory\n");
        hc_run_job_stop(job, HC_RUN_EXIT_INTERNAL);
        signal_ranks(job, SIGKILL);
    }
    if (job->args.timeout_s > 0)
        job->timeout_deadline_ns = hc_deadline_after_s(job->args.timeout_s);
    while (job->live > 0 && pfds != NULL && streams != NULL) {
        if (loop_once(job, pfds, streams) != 0) {
            hc_run_job_stop(job, HC_RUN_EXIT_INTERNAL);
            signal_ranks(job, SIGKILL);
            break;
        }
        if (job->phase == HC_RUN_PHASE_KILLING && hc_deadline_passed(job->phase_deadline_ns)) {
            fprintf(stderr, "hccl-run: %u ranks still not reaped after SIGKILL; giving up on them\n", job->live);
            break;
        }
    }
    free(streams);
    free(pfds);
    return job->exit_code >= 0 ? job->exit_code : 0;
}
