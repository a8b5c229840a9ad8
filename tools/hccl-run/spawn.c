/*
 * Starting the ranks: one fork/exec per rank, each with its own environment.
 *
 * Everything a rank must not keep (the store's sockets, the signalfd, other ranks' pipes) is
 * close-on-exec, so the exec itself cleans the slate. Each rank asks the kernel for SIGKILL when
 * hccl-run dies (PR_SET_PDEATHSIG): a launcher killed with SIGKILL cannot stop its ranks, and this
 * is the backstop that still leaves no rank behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "hc_launch.h"
#include "hccl_run.h"

extern char **environ;

/* The variables hccl-run gives each rank; any inherited value is replaced. HOSTCCL_RUN_OUTER tells
 * a launcher that hccl-run starts from hccl-run itself (src/boot/launch_outer.c). */
static const char *const rank_vars[] = {"RANK",          "LOCAL_RANK",          "WORLD_SIZE",       "LOCAL_WORLD_SIZE",
                                        "HOSTCCL_STORE", "HOSTCCL_STORE_TOKEN", "HOSTCCL_RUN_OUTER"};
#define N_RANK_VARS (sizeof(rank_vars) / sizeof(rank_vars[0]))

typedef struct {
    char **envp;        /* the inherited environment without rank_vars and what -x sets, then the -x
                         * values, then ours, then NULL */
    size_t n_inherited;
    char values[N_RANK_VARS][96];
    char outer[HC_LAUNCH_OUTER_BYTES];
} rank_env_t;

static int is_rank_var(const char *entry)
{
    for (size_t i = 0; i < N_RANK_VARS; i++) {
        size_t len = strlen(rank_vars[i]);
        if (strncmp(entry, rank_vars[i], len) == 0 && entry[len] == '=')
            return 1;
    }
    return 0;
}

/* Whether `entry` (NAME=VALUE) and `other` (NAME=VALUE, or NAME) name the same variable. */
static int same_name(const char *entry, const char *other)
{
    size_t len = strcspn(entry, "=");

    return strncmp(entry, other, len) == 0 && (other[len] == '=' || other[len] == '\0');
}

/* The last -x NAME=VALUE from the `from`-th on that sets entry's variable for every rank, or NULL.
 * A plain -x NAME passes this environment's value on, which local ranks inherit anyway. */
static const char *export_setting(const hc_run_args_t *args, const char *entry, uint32_t from)
{
    const char *found = NULL;

    for (uint32_t i = from; i < args->nexports; i++)
        if (strchr(args->exports[i], '=') != NULL && same_name(args->exports[i], entry))
            found = args->exports[i];
    return found;
}

/* The ranks' environment: this one, with what -x NAME=VALUE sets (on every host, this one too, as
 * mpirun -x does) in place of an inherited value; hccl-run's own variables (rank_vars) last, and
 * never from -x. */
static int rank_env_init(rank_env_t *env, const hc_run_args_t *args)
{
    size_t n = 0;

    for (char **e = environ; *e != NULL; e++)
        n++;
    env->envp = calloc(n + args->nexports + N_RANK_VARS + 1, sizeof(char *));
    if (env->envp == NULL)
        return -1;
    env->n_inherited = 0;
    hc_launch_outer_digest(env->outer);
    for (char **e = environ; *e != NULL; e++) {
        if (!is_rank_var(*e) && export_setting(args, *e, 0) == NULL)
            env->envp[env->n_inherited++] = *e;
    }
    for (uint32_t i = 0; i < args->nexports; i++) {
        const char *x = args->exports[i];
        if (strchr(x, '=') != NULL && !is_rank_var(x) && export_setting(args, x, i + 1) == NULL)
            env->envp[env->n_inherited++] = (char *)x; /* the last -x of a name wins */
    }
    return 0;
}

/* Point the last slots of envp at the values of the rank that is local_rank of nlocal here. */
static void rank_env_fill(rank_env_t *env, const hc_run_job_t *job, uint32_t rank, uint32_t local_rank,
                          uint32_t nlocal, const char *store_addr, const char *token_hex)
{
    snprintf(env->values[0], sizeof(env->values[0]), "RANK=%u", rank);
    snprintf(env->values[1], sizeof(env->values[1]), "LOCAL_RANK=%u", local_rank);
    snprintf(env->values[2], sizeof(env->values[2]), "WORLD_SIZE=%u", job->world);
    snprintf(env->values[3], sizeof(env->values[3]), "LOCAL_WORLD_SIZE=%u", nlocal);
    snprintf(env->values[4], sizeof(env->values[4]), "HOSTCCL_STORE=%s", store_addr);
    snprintf(env->values[5], sizeof(env->values[5]), "HOSTCCL_STORE_TOKEN=%s", token_hex);
    snprintf(env->values[6], sizeof(env->values[6]), "HOSTCCL_RUN_OUTER=%s", env->outer);
    for (size_t i = 0; i < N_RANK_VARS; i++)
        env->envp[env->n_inherited + i] = env->values[i];
    env->envp[env->n_inherited + N_RANK_VARS] = NULL;
}

/* Pipe ends for one rank: [0] read, [1] write for stdout, [2] read, [3] write for stderr; all
 * close-on-exec (dup2 in the child clears the flag on the copies it makes). */
typedef struct {
    int fds[4];
} rank_pipes_t;

static void pipes_close(rank_pipes_t *p)
{
    for (int i = 0; i < 4; i++) {
        if (p->fds[i] >= 0)
            close(p->fds[i]);
        p->fds[i] = -1;
    }
}

static int pipes_open(rank_pipes_t *p, int tag_output)
{
    for (int i = 0; i < 4; i++)
        p->fds[i] = -1;
    if (!tag_output)
        return 0;
    if (pipe2(p->fds, O_CLOEXEC) != 0 || pipe2(p->fds + 2, O_CLOEXEC) != 0) {
        fprintf(stderr, "hccl-run: pipe failed: %s\n", strerror(errno));
        pipes_close(p);
        return -1;
    }
    return 0;
}

/* --bind-to share, in the child: its share of the CPUs it inherited from hccl-run (bind.c). A
 * failure leaves the rank unbound, which only costs speed: say so and go on. */
static void bind_rank(uint32_t rank, uint32_t nranks)
{
    cpu_set_t allowed, share;

    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
        hc_run_share_cpus(&allowed, rank, nranks, &share) != 0)
        return;
    if (sched_setaffinity(0, sizeof(share), &share) != 0)
        fprintf(stderr, "hccl-run: rank %u: cannot bind to its share of the CPUs (running unbound): %s\n", rank,
                strerror(errno));
}

/*
 * In the child, between fork and exec. hccl-run is single-threaded, so any libc call is safe here;
 * the child still does as little as it can and reports failure through its stderr and exit status
 * (127 when the program is not found, 126 when it cannot run, as a shell does).
 */
static _Noreturn void exec_rank(const hc_run_job_t *job, uint32_t rank, uint32_t local_rank, uint32_t nlocal,
                                const rank_pipes_t *p, int null_fd, char **envp, pid_t launcher)
{
    const char *prog = job->args.argv[0];
    int err;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
        _exit(HC_RUN_EXIT_INTERNAL); /* hccl-run is already gone: nobody would supervise us */
    if ((p->fds[1] >= 0 && dup2(p->fds[1], STDOUT_FILENO) < 0) ||
        (p->fds[3] >= 0 && dup2(p->fds[3], STDERR_FILENO) < 0) ||
        ((rank != 0 || job->ctl_in >= 0) && dup2(null_fd, STDIN_FILENO) < 0)) {
        fprintf(stderr, "hccl-run: rank %u: cannot set up stdio: %s\n", rank, strerror(errno));
        _exit(HC_RUN_EXIT_INTERNAL);
    }
    if (!job->args.bind_none)
        bind_rank(local_rank, nlocal);
    sigaction(SIGPIPE, &job->saved_sigpipe, NULL);
    if (job->nofile_raised)
        setrlimit(RLIMIT_NOFILE, &job->saved_nofile);
    sigprocmask(SIG_SETMASK, &job->saved_mask, NULL);
    execvpe(prog, job->args.argv, envp);
    err = errno;
    fprintf(stderr, "hccl-run: rank %u: cannot execute \"%s\": %s\n", rank, prog, strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

/* Forget the streams of a rank that did not start (the caller closes the descriptors). */
static void streams_abandon(hc_run_rank_t *r)
{
    free(r->out.buf);
    free(r->err.buf);
    hc_run_stream_init(&r->out, r->rank, STDOUT_FILENO);
    hc_run_stream_init(&r->err, r->rank, STDERR_FILENO);
}

/* Fork the rank of entry `index`, local_rank of nlocal here; 0 on success (the rank is then running
 * and counted). */
static int spawn_one(hc_run_job_t *job, uint32_t index, uint32_t local_rank, uint32_t nlocal, int null_fd,
                     char **envp)
{
    hc_run_rank_t *r = &job->ranks[index];
    uint32_t rank = r->rank;
    pid_t launcher = getpid();
    rank_pipes_t p;
    pid_t pid;

    if (pipes_open(&p, job->args.tag_output) != 0)
        return -1;
    if (job->args.tag_output &&
        (hc_run_stream_open(&r->out, p.fds[0]) != 0 || hc_run_stream_open(&r->err, p.fds[2]) != 0))
        goto err_close_pipes;
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        exec_rank(job, rank, local_rank, nlocal, &p, null_fd, envp, launcher);
    if (pid < 0) {
        fprintf(stderr, "hccl-run: cannot start rank %u: fork failed: %s\n", rank, strerror(errno));
        goto err_close_pipes;
    }
    r->pid = pid;
    r->running = 1;
    job->live++;
    /* Our copies of the write ends must go, or the pipes would never report end of file. */
    if (job->args.tag_output) {
        close(p.fds[1]);
        close(p.fds[3]);
    }
    return 0;

err_close_pipes:
    streams_abandon(r);
    pipes_close(&p);
    return -1;
}

int hc_run_ranks_spawn(hc_run_job_t *job, const char *store_addr, const char *token_hex)
{
    rank_env_t env;
    uint32_t nlocal = 0;
    int null_fd, rc = 0;

    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) {
        fprintf(stderr, "hccl-run: cannot open /dev/null: %s\n", strerror(errno));
        return -1;
    }
    /* Ranks drive device LOCAL_RANK (docs/hccl-run.md): the host must have as many devices as ranks,
     * more than the runtime's default of 8 when -n is larger, unless the user chose a count. */
    if (job->args.nranks > 8 && getenv("HOSTCCL_DEVICE_COUNT") == NULL) {
        char count[16];

        snprintf(count, sizeof(count), "%u", job->args.nranks);
        setenv("HOSTCCL_DEVICE_COUNT", count, 0);
    }
    if (rank_env_init(&env, &job->args) != 0) {
        fprintf(stderr, "hccl-run: out of memory for the ranks' environment\n");
        close(null_fd);
        return -1;
    }
    for (uint32_t i = 0; i < job->nprocs; i++)
        nlocal += job->ranks[i].host == NULL;
    for (uint32_t i = 0, local = 0; i < job->nprocs && rc == 0; i++) {
        if (job->ranks[i].host != NULL)
            continue;
        rank_env_fill(&env, job, job->ranks[i].rank, local, nlocal, store_addr, token_hex);
        rc = spawn_one(job, i, local++, nlocal, null_fd, env.envp);
    }
    free(env.envp);
    close(null_fd);
    return rc;
}
