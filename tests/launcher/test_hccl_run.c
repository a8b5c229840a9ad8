/*
 * hccl-run's behaviour, observed from outside: environment, exit statuses, output tagging,
 * timeouts, signal forwarding, usage errors. Each case runs hccl-run with rank_helper (or
 * bcast_helper) and reads its output through pipes; every wait is on an event (output, the
 * launcher's exit through a pidfd) bounded by a deadline, never a sleep.
 *
 * usage: test_hccl_run HCCL_RUN RANK_HELPER BCAST_HELPER
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hc_time.h"

#define RUN_DEADLINE_NS (60 * HC_NS_PER_S)
#define HC_RUN_EXIT_INTERNAL_FOR_TEST 125 /* hccl-run failed itself (docs/hccl-run.md) */

static const char *hccl_run, *rank_helper, *bcast_helper;

typedef struct {
    int fd;
    char *text;
    size_t len;
} capture_t;

typedef struct {
    pid_t pid;
    int pidfd;
    capture_t out, err;
    int exited;
    int status;
    int64_t started_ns;
} proc_t;

/* ---- running hccl-run ------------------------------------------------------------------------- */

static _Noreturn void exec_child(const char *const *argv, const char *const *env, int out_w, int err_w)
{
    if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0)
        _exit(120);
    /* Only stdio reaches hccl-run, so any other descriptor a rank holds came from hccl-run. */
    syscall(SYS_close_range, 3u, ~0u, 0u);
    for (size_t i = 0; env != NULL && env[i] != NULL; i++)
        putenv((char *)env[i]);
    execv(argv[0], (char *const *)argv);
    _exit(121);
}

static void proc_start(proc_t *p, const char *const *argv, const char *const *env)
{
    int out[2], err[2];

    memset(p, 0, sizeof(*p));
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    assert_int_equal(pipe2(err, O_CLOEXEC), 0);
    p->started_ns = hc_now_ns();
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0)
        exec_child(argv, env, out[1], err[1]);
    close(out[1]);
    close(err[1]);
    p->out.fd = out[0];
    p->err.fd = err[0];
    p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    assert_true(p->pidfd >= 0);
}

static void capture_read(capture_t *c)
{
    char chunk[65536];
    ssize_t n = read(c->fd, chunk, sizeof(chunk));

    if (n <= 0) {
        if (n == 0 || errno != EINTR) {
            close(c->fd);
            c->fd = -1;
        }
        return;
    }
    c->text = realloc(c->text, c->len + (size_t)n + 1);
    memcpy(c->text + c->len, chunk, (size_t)n);
    c->len += (size_t)n;
    c->text[c->len] = '\0';
}

/* Wait for one event (output or exit) until the deadline: 0 something happened, -1 deadline. */
static int proc_pump(proc_t *p, int64_t deadline_ns)
{
    struct pollfd pfds[3] = {{.fd = p->out.fd, .events = POLLIN},
                             {.fd = p->err.fd, .events = POLLIN},
                             {.fd = p->exited ? -1 : p->pidfd, .events = POLLIN}};
    int rc = poll(pfds, 3, hc_deadline_ms_left(deadline_ns));

    if (rc <= 0)
        return rc == 0 ? -1 : 0;
    if (pfds[0].revents)
        capture_read(&p->out);
    if (pfds[1].revents)
        capture_read(&p->err);
    if (pfds[2].revents) {
        assert_int_equal(waitpid(p->pid, &p->status, 0), p->pid);
        p->exited = 1;
    }
    return 0;
}

static int count_of(const capture_t *c, const char *needle)
{
    int n = 0;

    for (const char *s = c->text; s != NULL && (s = strstr(s, needle)) != NULL; s += strlen(needle))
        n++;
    return n;
}

/* Wait until stdout holds `count` copies of needle (the ranks got somewhere). */
static void proc_wait_text(proc_t *p, const char *needle, int count)
{
    int64_t deadline = hc_now_ns() + RUN_DEADLINE_NS;

    while (count_of(&p->out, needle) < count) {
        if (p->out.fd < 0 || proc_pump(p, deadline) != 0)
            fail_msg("waited in vain for %d x \"%s\"; stdout:\n%s\nstderr:\n%s", count, needle,
                     p->out.text ? p->out.text : "", p->err.text ? p->err.text : "");
    }
}

/* Wait for hccl-run to exit and its pipes to close: its exit status as a shell reports it. The
 * pipes close only when no rank holds them, so a rank left behind fails here. */
static int proc_finish(proc_t *p)
{
    int64_t deadline = hc_now_ns() + RUN_DEADLINE_NS;

    while (!p->exited || p->out.fd >= 0 || p->err.fd >= 0) {
        if (proc_pump(p, deadline) != 0) {
            kill(p->pid, SIGKILL);
            fail_msg("hccl-run or one of its ranks is still running after 60 s; stderr:\n%s",
                     p->err.text ? p->err.text : "");
        }
    }
    close(p->pidfd);
    return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 128 + WTERMSIG(p->status);
}

static void proc_free(proc_t *p)
{
    free(p->out.text);
    free(p->err.text);
}

static double proc_seconds(const proc_t *p)
{
    return (double)(hc_now_ns() - p->started_ns) / 1e9;
}

/* Run hccl-run with `args` (NULL-terminated) to the end. */
static int run(proc_t *p, const char *const *env, ...)
{
    const char *argv[32] = {hccl_run};
    size_t n = 1;
    va_list ap;

    va_start(ap, env);
    for (const char *a = va_arg(ap, const char *); a != NULL && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    proc_start(p, argv, env);
    return proc_finish(p);
}

static const char *text(const capture_t *c)
{
    return c->text != NULL ? c->text : "";
}

/* ---- cases ------------------------------------------------------------------------------------ */

static void test_environment(void **state)
{
    char tokens[2][64] = {"", ""};
    proc_t p;

    (void)state;
    for (int run_no = 0; run_no < 2; run_no++) {
        assert_int_equal(run(&p, NULL, "-n", "3", rank_helper, "env", NULL), 0);
        for (int r = 0; r < 3; r++) {
            char want[96], *line, token[64], fds[64];
            unsigned port;
            snprintf(want, sizeof(want), "env rank=%d local_rank=%d world=3 local_world=3 store=127.0.0.1:", r, r);
            line = strstr(text(&p.out), want);
            assert_non_null(line);
            assert_int_equal(sscanf(line + strlen(want), "%u token=%63s fds=%63s", &port, token, fds), 3);
            assert_true(port > 0 && port < 65536);
            assert_int_equal(strlen(token), 32);
            assert_int_equal(strspn(token, "0123456789abcdef"), 32);
            if (r == 0)
                snprintf(tokens[run_no], sizeof(tokens[run_no]), "%s", token);
            assert_string_equal(token, tokens[run_no]);
            /* Neither the store's sockets nor any pipe end reach a rank. */
            assert_string_equal(fds, "-");
        }
        proc_free(&p);
    }
    /* A fresh token per job. */
    assert_string_not_equal(tokens[0], tokens[1]);
}

/* -x NAME=VALUE reaches every rank, this host's too (as mpirun -x): it replaces an inherited value,
 * the last one of a name wins, hccl-run's own variables stay hccl-run's, and -x NAME passes the
 * value here on unchanged. */
static void test_exports_reach_local_ranks(void **state)
{
    static const char *const env[] = {"HCRUN_T2=inherited", "HCRUN_T3=kept", NULL};
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, env, "-n", "2", "-x", "HCRUN_T1=first", "-x", "HCRUN_T2=given", "-x", "HCRUN_T1=last",
                         "-x", "RANK=99", "-x", "HCRUN_T3", "/bin/sh", "-c",
                         "echo \"x rank=$RANK t1=$HCRUN_T1 t2=$HCRUN_T2 t3=$HCRUN_T3\"", NULL),
                     0);
    for (int r = 0; r < 2; r++) {
        char want[96];
        snprintf(want, sizeof(want), "x rank=%d t1=last t2=given t3=kept\n", r);
        if (strstr(text(&p.out), want) == NULL)
            fail_msg("missing \"%s\" in:\n%s", want, text(&p.out));
    }
    proc_free(&p);
}

/* Rank 1 exits 7 while ranks 0 and 2 are blocked forever in read(): they are stopped at once. */
static void test_first_failure_stops_the_rest(void **state)
{
    proc_t p;
    int code;

    (void)state;
    code = run(&p, NULL, "-n", "3", rank_helper, "fail", "1", "7", NULL);
    assert_int_equal(code, 7);
    assert_true(proc_seconds(&p) < 10.0);
    assert_non_null(strstr(text(&p.err), "rank 1"));
    assert_non_null(strstr(text(&p.err), "exited with status 7"));
    /* Every rank was reaped by hccl-run before it exited. */
    for (int r = 0; r < 3; r++) {
        char want[16];
        int pid;
        const char *line;
        snprintf(want, sizeof(want), "pid %d ", r);
        line = strstr(text(&p.out), want);
        assert_non_null(line);
        pid = atoi(line + strlen(want));
        assert_int_equal(kill(pid, 0), -1);
        assert_int_equal(errno, ESRCH);
    }
    proc_free(&p);
}

/* hccl-run's report of a failed rank is one write: the ranks share its stderr, and a report written
 * in pieces can be cut by their lines. stderr is a SOCK_SEQPACKET socket here, which keeps the
 * boundaries of the writes. */
static void test_exit_report_is_one_write(void **state)
{
    const char *argv[] = {hccl_run, "-n", "3", rank_helper, "fail", "1", "7", NULL};
    char message[4096];
    int sv[2], found = 0, status;
    pid_t pid;
    ssize_t n;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(sv[1], STDERR_FILENO) < 0)
            _exit(120);
        execv(argv[0], (char *const *)argv);
        _exit(121);
    }
    close(sv[1]);
    while ((n = recv(sv[0], message, sizeof(message) - 1, 0)) > 0) {
        message[n] = '\0';
        if (strstr(message, "exited with status 7") == NULL)
            continue;
        found = 1;
        assert_non_null(strstr(message, "hccl-run: rank 1 (pid "));
        assert_string_equal(message + n - strlen("; stopping the other ranks\n"), "; stopping the other ranks\n");
    }
    close(sv[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 7);
    assert_true(found);
}

/* mpirun's "-np N" is hccl-run's -n N. */
static void test_mpirun_np(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-np", "2", "--timeout", "60", rank_helper, "env", NULL), 0);
    assert_int_equal(count_of(&p.out, "env rank="), 2);
    assert_non_null(strstr(text(&p.out), "world=2"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "--timeout", "60", "-np", "3", rank_helper, "env", NULL), 0);
    assert_int_equal(count_of(&p.out, "env rank="), 3);
    proc_free(&p);
}

/* Ranks that ignore SIGTERM get SIGKILL after the grace period. */
static void test_stubborn_ranks_are_killed(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "3", rank_helper, "fail-stubborn", "2", "5", NULL), 5);
    assert_true(proc_seconds(&p) >= 1.9);
    assert_true(proc_seconds(&p) < 15.0);
    assert_non_null(strstr(text(&p.err), "SIGKILL"));
    proc_free(&p);
}

static void test_signal_death(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "2", rank_helper, "signal", "1", "9", NULL), 128 + 9);
    assert_non_null(strstr(text(&p.err), "killed by signal 9"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "-n", "2", rank_helper, "signal", "0", "15", NULL), 128 + 15);
    proc_free(&p);
}

static void test_tag_output(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "3", "--tag-output", rank_helper, "print", NULL), 0);
    for (int r = 0; r < 3; r++) {
        char line[64];
        snprintf(line, sizeof(line), "[%d] hello from %d\n", r, r);
        assert_non_null(strstr(text(&p.out), line));
        snprintf(line, sizeof(line), "[%d] partial %d\n", r, r);
        assert_non_null(strstr(text(&p.out), line));
        snprintf(line, sizeof(line), "[%d] err from %d\n", r, r);
        assert_non_null(strstr(text(&p.err), line));
        assert_null(strstr(text(&p.out), line));
    }
    /* Six lines on stdout, every one tagged. */
    assert_int_equal(count_of(&p.out, "\n"), 6);
    assert_int_equal(count_of(&p.out, "\n["), 5);
    assert_int_equal(p.out.text[0], '[');
    proc_free(&p);
}

/* A line longer than the forwarding buffer still carries one prefix and arrives whole. */
static void test_tag_output_long_line(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "1", "-p", rank_helper, "long", "200000", NULL), 0);
    assert_int_equal(p.out.len, 4 + 200000 + 1);
    assert_memory_equal(p.out.text, "[0] xxxx", 8);
    assert_int_equal(strspn(p.out.text + 4, "x"), 200000);
    proc_free(&p);
}

static void test_timeout(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "2", "--timeout", "1", rank_helper, "block", NULL), 124);
    assert_true(proc_seconds(&p) >= 1.0);
    assert_true(proc_seconds(&p) < 10.0);
    assert_non_null(strstr(text(&p.err), "ranks still running: 0-1"));
    proc_free(&p);
}

/* SIGUSR1 and SIGTERM sent to hccl-run reach every rank. */
static void test_signals_forwarded(void **state)
{
    const char *argv[] = {hccl_run, "-n", "3", rank_helper, "signals", NULL};
    proc_t p;

    (void)state;
    proc_start(&p, argv, NULL);
    proc_wait_text(&p, "ready ", 3);
    kill(p.pid, SIGUSR1);
    proc_wait_text(&p, " got 10\n", 3);
    kill(p.pid, SIGTERM);
    assert_int_equal(proc_finish(&p), 0);
    assert_int_equal(count_of(&p.out, " got 15\n"), 3);
    proc_free(&p);
}

/* Ranks that die of the forwarded SIGTERM make hccl-run exit like them. */
static void test_sigterm_default_action(void **state)
{
    const char *argv[] = {hccl_run, "-n", "2", rank_helper, "block", NULL};
    proc_t p;

    (void)state;
    proc_start(&p, argv, NULL);
    proc_wait_text(&p, "ready ", 2);
    kill(p.pid, SIGTERM);
    assert_int_equal(proc_finish(&p), 128 + SIGTERM);
    proc_free(&p);
}

static void test_usage(void **state)
{
    static const char *const bad[][4] = {
        {NULL}, {"-n", NULL}, {"-n", "0", "true", NULL}, {"-n", "x", "true", NULL}, {"-n", "4097", "true", NULL},
        {"-n", "2", NULL}, {"--timeout", "0", "-n", "2"}, {"--bogus", "-n", "2", "true"}, {"true", NULL},
    };
    proc_t p;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *argv[8] = {hccl_run};
        for (int k = 0; k < 4 && bad[i][k] != NULL; k++)
            argv[k + 1] = bad[i][k];
        proc_start(&p, argv, NULL);
        assert_int_equal(proc_finish(&p), 2);
        assert_non_null(strstr(text(&p.err), "usage: hccl-run"));
        proc_free(&p);
    }
    /* --hosts: each mistake is a usage error that says what is wrong, before anything starts. */
    assert_int_equal(run(&p, NULL, "--hosts", "a:0", "true", NULL), 2);
    assert_non_null(strstr(text(&p.err), "\"a\" needs a number of ranks from 1 to 4096"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "--hosts", "a,b,a:2", "true", NULL), 2);
    assert_non_null(strstr(text(&p.err), "host a is listed twice"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "--hosts", "a:2,b", "-n", "4", "true", NULL), 2);
    assert_non_null(strstr(text(&p.err), "-n 4 ranks, but --hosts gives 3 slots"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "--hosts", ",", "true", NULL), 2);
    assert_non_null(strstr(text(&p.err), "--hosts: is empty"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "-n", "2", "--agent", "ssh", "true", NULL), 2);
    assert_non_null(strstr(text(&p.err), "--agent and --store-addr go with --hosts"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "--node", "zz", NULL), HC_RUN_EXIT_INTERNAL_FOR_TEST);
    assert_non_null(strstr(text(&p.err), "--node: malformed assignment"));
    proc_free(&p);
    assert_int_equal(run(&p, NULL, "--help", NULL), 0);
    assert_non_null(strstr(text(&p.out), "usage: hccl-run"));
    proc_free(&p);
    /* Options after the program are the program's. */
    assert_int_equal(run(&p, NULL, "-n", "1", "--", rank_helper, "env", "-n", NULL), 0);
    proc_free(&p);
}

static void test_exec_failure(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "2", "/nonexistent/program", NULL), 127);
    assert_non_null(strstr(text(&p.err), "cannot execute"));
    proc_free(&p);
}

static void test_broadcast_root_info(void **state)
{
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, NULL, "-n", "4", bcast_helper, "twice", NULL), 0);
    assert_int_equal(count_of(&p.out, "two root infos received"), 4);
    proc_free(&p);
}

/* Rank 0 alive but silent: the others wait HCCL_CONNECT_TIMEOUT (1 s here) and say so. */
static void test_broadcast_silent_root(void **state)
{
    static const char *const env[] = {"HCCL_CONNECT_TIMEOUT=1", NULL};
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, env, "-n", "3", bcast_helper, "silent-root", NULL), 42);
    assert_true(count_of(&p.out, "broadcast without root gave 9 ") >= 1);
    assert_non_null(strstr(text(&p.err), "did not arrive from rank 0"));
    assert_true(proc_seconds(&p) < 20.0);
    proc_free(&p);
}

/* Rank 0 exits before it broadcasts: the others learn it from the store within about a second
 * (ROOT_EXIT_CHECK_NS), not at HCCL_CONNECT_TIMEOUT (60 s here); the bound leaves room for load. */
static void test_broadcast_dead_root(void **state)
{
    static const char *const env[] = {"HCCL_CONNECT_TIMEOUT=60", NULL};
    proc_t p;

    (void)state;
    assert_int_equal(run(&p, env, "-n", "3", bcast_helper, "dead-root", NULL), 0);
    assert_int_equal(count_of(&p.out, "broadcast without root gave 21 "), 2); /* HCCL_E_REMOTE */
    assert_non_null(strstr(text(&p.err), "will never arrive: rank 0 (pid "));
    assert_non_null(strstr(text(&p.err), "exited with status 0 before it published it"));
    print_message("ranks 1 and 2 gave up %.3f s after the start\n", proc_seconds(&p));
    assert_true(proc_seconds(&p) < 10.0);
    proc_free(&p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_exports_reach_local_ranks),
        cmocka_unit_test(test_first_failure_stops_the_rest),
        cmocka_unit_test(test_exit_report_is_one_write),
        cmocka_unit_test(test_mpirun_np),
        cmocka_unit_test(test_stubborn_ranks_are_killed),
        cmocka_unit_test(test_signal_death),
        cmocka_unit_test(test_tag_output),
        cmocka_unit_test(test_tag_output_long_line),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_signals_forwarded),
        cmocka_unit_test(test_sigterm_default_action),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_exec_failure),
        cmocka_unit_test(test_broadcast_root_info),
        cmocka_unit_test(test_broadcast_silent_root),
        cmocka_unit_test(test_broadcast_dead_root),
    };

    if (argc != 4) {
        fprintf(stderr, "usage: %s HCCL_RUN RANK_HELPER BCAST_HELPER\n", argv[0]);
        return 2;
    }
    hccl_run = argv[1];
    rank_helper = argv[2];
    bcast_helper = argv[3];
    /* hccl-run's own variables must come from hccl-run, not from whoever runs the test. */
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("HOSTCCL_STORE");
    unsetenv("HOSTCCL_STORE_TOKEN");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
