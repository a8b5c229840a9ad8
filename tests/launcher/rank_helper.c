/*
 * A rank for the hccl-run tests: one program, one behaviour per mode (argv[1]). Ranks that must
 * be in place before something happens say so through the job's store ("ready/R"), so that the
 * tests wait for events instead of sleeping.
 */
#include <dirent.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_store.h"
#include "hc_time.h"

#define SYNC_DEADLINE_NS (60 * HC_NS_PER_S)

static unsigned rank, world;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line, one write: lines of different ranks never mix on a shared stdout. */
static void say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) < 0)
        exit(90);
}

/* Wait for nothing, forever: a read on a pipe whose write end we hold ourselves. */
static _Noreturn void block_forever(void)
{
    int p[2];
    char c;

    if (pipe(p) != 0)
        exit(91);
    while (read(p[0], &c, 1) != 0)
        ;
    exit(92);
}

static void set_ready(void)
{
    char key[32];

    snprintf(key, sizeof(key), "ready/%u", rank);
    if (hc_store_set(key, "1", 1) != HCCL_SUCCESS)
        exit(93);
}

static void wait_others_ready(void)
{
    for (unsigned r = 0; r < world; r++) {
        char key[32], value[4];
        size_t len;
        if (r == rank)
            continue;
        snprintf(key, sizeof(key), "ready/%u", r);
        if (hc_store_get(key, value, sizeof(value), &len, hc_now_ns() + SYNC_DEADLINE_NS) != HCCL_SUCCESS)
            exit(94);
    }
}

/* Descriptors other than stdio (and the one listing them): "-" when none. */
static void list_fds(char *buf, size_t len)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    size_t used = 0;

    buf[0] = '\0';
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
            continue;
        used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", fd);
        if (used >= len)
            break;
    }
    closedir(d);
    if (buf[0] == '\0')
        snprintf(buf, len, "-");
}

static int mode_env(void)
{
    char fds[128];
    const char *vars[6] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "HOSTCCL_STORE",
                           "HOSTCCL_STORE_TOKEN"};
    const char *v[6];

    for (int i = 0; i < 6; i++)
        v[i] = getenv(vars[i]) != NULL ? getenv(vars[i]) : "unset";
    list_fds(fds, sizeof(fds));
    say("env rank=%s local_rank=%s world=%s local_world=%s store=%s token=%s fds=%s\n", v[0], v[1], v[2], v[3],
        v[4], v[5], fds);
    return 0;
}

/* Rank `failing` ends with `code` (or signal `sig`) once every other rank is blocked. */
static int mode_fail(unsigned failing, int code, int sig, int stubborn)
{
    say("pid %u %d\n", rank, (int)getpid());
    if (rank != failing) {
        if (stubborn)
            signal(SIGTERM, SIG_IGN);
        set_ready();
        block_forever();
    }
    wait_others_ready();
    if (sig != 0)
        kill(getpid(), sig);
    return code;
}

static int mode_print(void)
{
    char line[64];
    int n;

    say("hello from %u\n", rank);
    n = snprintf(line, sizeof(line), "err from %u\n", rank);
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return 1;
    say("partial %u", rank);
    return 0;
}

static int mode_long(size_t len)
{
    char *line = malloc(len + 1);

    memset(line, 'x', len);
    line[len] = '\n';
    for (size_t done = 0; done < len + 1;) {
        ssize_t n = write(STDOUT_FILENO, line + done, len + 1 - done);
        if (n <= 0)
            return 1;
        done += (size_t)n;
    }
    free(line);
    return 0;
}

/* Report SIGUSR1 and SIGTERM as they come; exit 0 on SIGTERM. */
static int mode_signals(void)
{
    sigset_t set;
    int sig;

    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    say("ready %u\n", rank);
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            return 1;
        say("%u got %d\n", rank, sig);
        if (sig == SIGTERM)
            return 0;
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    rank = (unsigned)atoi(getenv("RANK") != NULL ? getenv("RANK") : "0");
    world = (unsigned)atoi(getenv("WORLD_SIZE") != NULL ? getenv("WORLD_SIZE") : "1");
    if (strcmp(mode, "env") == 0)
        return mode_env();
    if (strcmp(mode, "fail") == 0 && argc == 4)
        return mode_fail((unsigned)atoi(argv[2]), atoi(argv[3]), 0, 0);
    if (strcmp(mode, "fail-stubborn") == 0 && argc == 4)
        return mode_fail((unsigned)atoi(argv[2]), atoi(argv[3]), 0, 1);
    if (strcmp(mode, "signal") == 0 && argc == 4)
        return mode_fail((unsigned)atoi(argv[2]), 99, atoi(argv[3]), 0);
    if (strcmp(mode, "print") == 0)
        return mode_print();
    if (strcmp(mode, "long") == 0 && argc == 3)
        return mode_long((size_t)atol(argv[2]));
    if (strcmp(mode, "signals") == 0)
        return mode_signals();
    if (strcmp(mode, "block") == 0) {
        say("ready %u\n", rank);
        block_forever();
    }
    fprintf(stderr, "rank_helper: unknown mode \"%s\"\n", mode);
    return 2;
}
