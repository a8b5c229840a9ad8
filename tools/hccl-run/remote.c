/*
 * hccl-run --hosts: ranks on several hosts (docs/hccl-run.md, "Several hosts").
 *
 * The head (the hccl-run the user started) places the ranks host by host, runs the ranks of a host
 * named "localhost" itself, and for every other host starts one agent process (ssh HOST, or any
 * command given with --agent) that runs `hccl-run --node SPEC` there. That node is an hccl-run of
 * its own: it starts the host's ranks with their global numbers and the head's store address,
 * supervises them, tags their output, and exits with their status, which the agent passes back.
 *
 * SPEC is the node's whole assignment as hex digits, so it passes unchanged through any agent and
 * any remote shell. The node's standard input is a control pipe from the head: each byte is a
 * signal to forward to the node's ranks, or HC_RUN_NODE_STOP (the job is being stopped); end of file (the head stopped the job, or died, or the
 * agent's connection broke) kills them at once. So no rank outlives the job on any host, whatever
 * kills the head, and agents run in process groups of their own so that a Ctrl-C reaches remote
 * ranks exactly once, forwarded.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "hccl_run.h"

extern char **environ;

#define SPEC_MAGIC "hccl-run-node/2"
#define DEFAULT_AGENT "ssh -x -o BatchMode=yes {host}"
#define MAX_AGENT_WORDS 64

/* ---- placing the ranks ------------------------------------------------------------------------- */

static int plan_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int plan_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "hccl-run: --hosts: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

/* Cut "h1:2,h2" into names (in buf) and slot counts; -1 after printing what is wrong. */
static int parse_hosts(char *buf, char **names, uint32_t *slots, uint32_t *nhosts_p)
{
    uint32_t n = 0;

    for (char *item = strtok(buf, ","); item != NULL; item = strtok(NULL, ",")) {
        char *colon = strrchr(item, ':'), *end;
        unsigned long count = 1;
        if (n == HC_RUN_MAX_RANKS)
            return plan_error("%s", "more hosts than ranks hccl-run can start");
        if (colon != NULL) {
            *colon = '\0';
            errno = 0;
            count = strtoul(colon + 1, &end, 10);
            if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 || count == 0 ||
                count > HC_RUN_MAX_RANKS)
                return plan_error("\"%s\" needs a number of ranks from 1 to 4096 after the colon", item);
        }
        if (item[0] == '\0' || strpbrk(item, " \t\n'\"\\") != NULL)
            return plan_error("\"%s\" is not a host name", item);
        for (uint32_t k = 0; k < n; k++)
            if (strcmp(names[k], item) == 0)
                return plan_error("host %s is listed twice", item);
        names[n] = item;
        slots[n++] = (uint32_t)count;
    }
    if (n == 0)
        return plan_error("%s", "is empty");
    *nhosts_p = n;
    return 0;
}

static int is_local_host(const char *name)
{
    return strcmp(name, "localhost") == 0;
}

/* The entries: per host in list order, its ranks one by one (localhost) or one node. */
static int fill_entries(hc_run_job_t *job, char **names, const uint32_t *slots, uint32_t nhosts)
{
    uint32_t placed = 0, n = 0;

    job->ranks = calloc(job->world, sizeof(*job->ranks));
    if (job->ranks == NULL) {
        fprintf(stderr, "hccl-run: out of memory for %u ranks\n", job->world);
        return -1;
    }
    for (uint32_t h = 0; h < nhosts && placed < job->world; h++) {
        uint32_t count = slots[h] < job->world - placed ? slots[h] : job->world - placed;
        for (uint32_t k = 0; k < (is_local_host(names[h]) ? count : 1); k++) {
            hc_run_rank_t *r = &job->ranks[n++];
            r->rank = is_local_host(names[h]) ? placed + k : placed;
            r->count = is_local_host(names[h]) ? 1 : count;
            r->host = is_local_host(names[h]) ? NULL : names[h];
            r->ctl_fd = -1;
            hc_run_stream_init(&r->out, r->rank, STDOUT_FILENO);
            hc_run_stream_init(&r->err, r->rank, STDERR_FILENO);
        }
        placed += count;
    }
    job->nprocs = n;
    return 0;
}

int hc_run_hosts_plan(hc_run_job_t *job)
{
    char **names = calloc(HC_RUN_MAX_RANKS, sizeof(*names));
    uint32_t *slots = calloc(HC_RUN_MAX_RANKS, sizeof(*slots));
    uint32_t nhosts = 0;
    uint64_t total = 0;
    int rc = -1;

    job->hosts_buf = strdup(job->args.hosts);
    if (names == NULL || slots == NULL || job->hosts_buf == NULL) {
        fprintf(stderr, "hccl-run: out of memory\n");
        goto out;
    }
    if (parse_hosts(job->hosts_buf, names, slots, &nhosts) != 0)
        goto out;
    for (uint32_t h = 0; h < nhosts; h++)
        total += slots[h];
    job->world = job->args.nranks != 0 ? job->args.nranks : (uint32_t)(total < HC_RUN_MAX_RANKS ? total : HC_RUN_MAX_RANKS);
    if (job->world > total) {
        fprintf(stderr, "hccl-run: -n %u ranks, but --hosts gives %llu slots\n", job->world,
                (unsigned long long)total);
        goto out;
    }
    rc = fill_entries(job, names, slots, nhosts);
out:
    free(names);
    free(slots);
    return rc;
}

int hc_run_hosts_remote(const hc_run_job_t *job)
{
    for (uint32_t i = 0; i < job->nprocs; i++)
        if (job->ranks[i].host != NULL)
            return 1;
    return 0;
}

/* ---- the node's assignment: NUL-separated fields, as hex ---------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
    int failed;
} spec_t;

static void spec_add(spec_t *s, const char *field)
{
    size_t n = strlen(field) + 1;

    if (s->failed)
        return;
    if (s->len + n > s->cap) {
        size_t cap = (s->len + n) * 2;
        char *grown = realloc(s->buf, cap);
        if (grown == NULL) {
            s->failed = 1;
            return;
        }
        s->buf = grown;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, field, n);
    s->len += n;
}

static void spec_add_u32(spec_t *s, uint32_t v)
{
    char text[16];

    snprintf(text, sizeof(text), "%u", v);
    spec_add(s, text);
}

/* Variables every node gets from the head: hostccl's and CANN's own, and -x. */
static int exported_by_default(const char *entry)
{
    return (strncmp(entry, "HCCL_", 5) == 0 || strncmp(entry, "HOSTCCL_", 8) == 0 ||
            strncmp(entry, "ASCEND_", 7) == 0) &&
           strncmp(entry, "HOSTCCL_STORE=", 14) != 0 && strncmp(entry, "HOSTCCL_STORE_TOKEN=", 20) != 0;
}

static void spec_add_exports(spec_t *s, const hc_run_args_t *args)
{
    char **list = calloc(HC_RUN_MAX_EXPORTS + 1024, sizeof(*list));
    char *owned[HC_RUN_MAX_EXPORTS] = {NULL};
    uint32_t n = 0;

    if (list == NULL) {
        s->failed = 1;
        return;
    }
    for (char **e = environ; *e != NULL && n < 1024; e++)
        if (exported_by_default(*e))
            list[n++] = *e;
    for (uint32_t i = 0; i < args->nexports; i++) {
        const char *value = strchr(args->exports[i], '=') != NULL ? NULL : getenv(args->exports[i]);
        if (strchr(args->exports[i], '=') != NULL) {
            list[n++] = (char *)args->exports[i];
        } else if (value != NULL && (owned[i] = malloc(strlen(args->exports[i]) + strlen(value) + 2)) != NULL) {
            sprintf(owned[i], "%s=%s", args->exports[i], value);
            list[n++] = owned[i];
        }
    }
    spec_add_u32(s, n);
    for (uint32_t i = 0; i < n; i++)
        spec_add(s, list[i]);
    for (uint32_t i = 0; i < args->nexports; i++)
        free(owned[i]);
    free(list);
}

/* The hex SPEC for node r (malloc'ed), or NULL when out of memory. */
static char *spec_encode(const hc_run_job_t *job, const hc_run_rank_t *r, const char *store_addr,
                         const char *token_hex)
{
    spec_t s = {0};
    char cwd[PATH_MAX], *hex;
    uint32_t nargs = 0;

    if (getcwd(cwd, sizeof(cwd)) == NULL)
        snprintf(cwd, sizeof(cwd), "/");
    spec_add(&s, SPEC_MAGIC);
    spec_add_u32(&s, r->rank);
    spec_add_u32(&s, r->count);
    spec_add_u32(&s, job->world);
    spec_add(&s, store_addr);
    spec_add(&s, token_hex);
    spec_add(&s, cwd);
    spec_add_u32(&s, (uint32_t)job->args.tag_output);
    spec_add_u32(&s, (uint32_t)job->args.bind_none | (uint32_t)job->args.keep_going << 1);
    spec_add_exports(&s, &job->args);
    while (job->args.argv[nargs] != NULL)
        nargs++;
    spec_add_u32(&s, nargs);
    for (uint32_t i = 0; i < nargs; i++)
        spec_add(&s, job->args.argv[i]);
    hex = s.failed ? NULL : malloc(2 * s.len + 1);
    for (size_t i = 0; hex != NULL && i < s.len; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s.buf[i]);
    free(s.buf);
    return hex;
}

/* ---- the head's side: agents -------------------------------------------------------------------- */

/* The agent's words for host, then hccl-run --node SPEC; argv points into words_buf. */
static int agent_argv(const char *agent, const char *host, const char *self, char *spec, char **argv,
                      char *words_buf, size_t buf_len)
{
    size_t used = 0;
    int n = 0, has_host = 0;
    const char *p = agent != NULL ? agent : DEFAULT_AGENT;

    while (*p != '\0') {
        const char *end;
        p += strspn(p, " \t");
        if (*p == '\0')
            break;
        end = p + strcspn(p, " \t");
        if (n == MAX_AGENT_WORDS - 4)
            return -1;
        argv[n++] = words_buf + used;
        for (const char *q = p; q < end; q++) {
            if (strncmp(q, "{host}", 6) == 0) {
                size_t hl = strlen(host);
                if (used + hl + 1 >= buf_len)
                    return -1;
                memcpy(words_buf + used, host, hl);
                used += hl;
                q += 5;
                has_host = 1;
            } else if (used + 2 < buf_len) {
                words_buf[used++] = *q;
            } else {
                return -1;
            }
        }
        words_buf[used++] = '\0';
        p = end;
    }
    if (n == 0)
        return -1;
    if (!has_host)
        argv[n++] = (char *)host;
    argv[n++] = (char *)self;
    argv[n++] = "--node";
    argv[n++] = spec;
    argv[n] = NULL;
    return 0;
}

static _Noreturn void exec_agent(const hc_run_job_t *job, int ctl_read, char **argv, pid_t launcher)
{
    /* A group of its own: the terminal's Ctrl-C reaches the remote ranks once, through us. */
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
        _exit(HC_RUN_EXIT_INTERNAL);
    if (dup2(ctl_read, STDIN_FILENO) < 0)
        _exit(HC_RUN_EXIT_INTERNAL);
    sigaction(SIGPIPE, &job->saved_sigpipe, NULL);
    if (job->nofile_raised)
        setrlimit(RLIMIT_NOFILE, &job->saved_nofile);
    sigprocmask(SIG_SETMASK, &job->saved_mask, NULL);
    execvp(argv[0], argv);
    fprintf(stderr, "hccl-run: cannot run the agent \"%s\": %s\n", argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

static int spawn_node(hc_run_job_t *job, hc_run_rank_t *r, const char *self, const char *store_addr,
                      const char *token_hex)
{
    char *argv[MAX_AGENT_WORDS], words[4096];
    char *spec = spec_encode(job, r, store_addr, token_hex);
    int ctl[2] = {-1, -1};
    pid_t pid, launcher = getpid();

    if (spec == NULL || agent_argv(job->args.agent, r->host, self, spec, argv, words, sizeof(words)) != 0) {
        fprintf(stderr, "hccl-run: cannot build the agent command for host %s (out of memory, or --agent "
                        "longer than %zu characters or %d words)\n", r->host, sizeof(words), MAX_AGENT_WORDS - 4);
        free(spec);
        return -1;
    }
    if (pipe2(ctl, O_CLOEXEC) != 0) {
        fprintf(stderr, "hccl-run: pipe failed: %s\n", strerror(errno));
        free(spec);
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        exec_agent(job, ctl[0], argv, launcher);
    free(spec);
    close(ctl[0]);
    if (pid < 0) {
        fprintf(stderr, "hccl-run: cannot start the agent for host %s: fork failed: %s\n", r->host, strerror(errno));
        close(ctl[1]);
        return -1;
    }
    fcntl(ctl[1], F_SETFL, O_NONBLOCK);
    r->ctl_fd = ctl[1];
    r->pid = pid;
    r->running = 1;
    job->live++;
    return 0;
}

int hc_run_nodes_spawn(hc_run_job_t *job, const char *store_addr, const char *token_hex)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n <= 0) {
        fprintf(stderr, "hccl-run: cannot find its own path (/proc/self/exe): %s\n", strerror(errno));
        return -1;
    }
    self[n] = '\0';
    for (uint32_t i = 0; i < job->nprocs; i++)
        if (job->ranks[i].host != NULL && spawn_node(job, &job->ranks[i], self, store_addr, token_hex) != 0)
            return -1;
    return 0;
}

void hc_run_node_signal(hc_run_rank_t *node, int signo)
{
    unsigned char byte = (unsigned char)signo;

    /* SIGKILL cannot wait for a node to pass it on: kill the agent, and close the pipe, which kills
     * the node's ranks wherever they run. */
    if (signo == SIGKILL || node->ctl_fd < 0 || write(node->ctl_fd, &byte, 1) != 1) {
        kill(node->pid, signo == SIGKILL ? SIGKILL : signo == HC_RUN_NODE_STOP ? SIGTERM : signo);
        if (node->ctl_fd >= 0)
            close(node->ctl_fd);
        node->ctl_fd = -1;
    }
}

/* ---- the node's side ------------------------------------------------------------------------------ */

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The spec's fields: fields[i] point into buf (decoded, NUL-separated); -1 when malformed. */
static int spec_decode(const char *hex, char **buf_p, char ***fields_p, size_t *nfields_p)
{
    size_t len = strlen(hex), n = 0;
    char *buf, **fields;

    if (len == 0 || len % 2 != 0 || (buf = malloc(len / 2 + 1)) == NULL)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(buf);
            return -1;
        }
        buf[i] = (char)(hi << 4 | lo);
        n += buf[i] == '\0';
    }
    buf[len / 2] = '\0';
    if (buf[len / 2 - 1] != '\0' || (fields = calloc(n + 1, sizeof(*fields))) == NULL) {
        free(buf);
        return -1;
    }
    for (size_t i = 0, f = 0; f < n; f++) {
        fields[f] = buf + i;
        i += strlen(buf + i) + 1;
    }
    *buf_p = buf;
    *fields_p = fields;
    *nfields_p = n;
    return 0;
}

static int field_u32(char **fields, size_t nfields, size_t i, uint32_t max, uint32_t *v)
{
    char *end;
    unsigned long x;

    if (i >= nfields || fields[i][0] < '0' || fields[i][0] > '9')
        return -1;
    x = strtoul(fields[i], &end, 10);
    if (*end != '\0' || x > max)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

/* Apply the fields after the magic: numbering, store, directory, flags, exports, program. */
static int node_apply(hc_run_job_t *job, char **f, size_t nf, char *store_addr, size_t addr_len, char *token_hex)
{
    uint32_t count, tag, flags, nexports, nargs;
    size_t i = 10;

    if (field_u32(f, nf, 1, HC_RUN_MAX_RANKS, &job->rank_base) || field_u32(f, nf, 2, HC_RUN_MAX_RANKS, &count) ||
        field_u32(f, nf, 3, HC_RUN_MAX_RANKS, &job->world) || count == 0 || job->rank_base + count > job->world ||
        nf < 10 || strlen(f[5]) + 1 != HC_STORE_TOKEN_HEX_BYTES || strlen(f[4]) >= addr_len ||
        field_u32(f, nf, 7, 1, &tag) || field_u32(f, nf, 8, 3, &flags) ||
        field_u32(f, nf, 9, (uint32_t)nf, &nexports) || i + nexports >= nf)
        return -1;
    snprintf(store_addr, addr_len, "%s", f[4]);
    memcpy(token_hex, f[5], HC_STORE_TOKEN_HEX_BYTES);
    if (chdir(f[6]) != 0)
        fprintf(stderr, "hccl-run: node for ranks %u-%u: cannot enter %s (%s); running in %s\n", job->rank_base,
                job->rank_base + count - 1, f[6], strerror(errno), getenv("HOME") != NULL ? getenv("HOME") : "?");
    for (uint32_t k = 0; k < nexports; k++, i++) {
        char *eq = strchr(f[i], '=');
        if (eq == NULL || eq == f[i])
            continue;
        *eq = '\0';
        if (setenv(f[i], eq + 1, 1) != 0)
            return -1;
    }
    if (field_u32(f, nf, i++, (uint32_t)nf, &nargs) || nargs == 0 || i + nargs != nf)
        return -1;
    job->node_argv = calloc(nargs + 1, sizeof(char *));
    if (job->node_argv == NULL)
        return -1;
    memcpy(job->node_argv, f + i, nargs * sizeof(char *));
    job->args.argv = job->node_argv;
    job->args.nranks = count;
    job->args.tag_output = (int)tag;
    job->args.bind_none = (int)(flags & 1);
    job->args.keep_going = (int)(flags >> 1 & 1);
    return 0;
}

int hc_run_node_setup(hc_run_job_t *job, char *store_addr, size_t addr_len, char *token_hex)
{
    char *buf = NULL, **fields = NULL;
    size_t nfields = 0;

    /* The decoded buffer stays with the job (job_destroy frees it): the ranks' argv points into it. */
    if (spec_decode(job->args.node_spec, &buf, &fields, &nfields) != 0 || nfields == 0 ||
        strcmp(fields[0], SPEC_MAGIC) != 0 || node_apply(job, fields, nfields, store_addr, addr_len, token_hex) != 0) {
        fprintf(stderr, "hccl-run: --node: malformed assignment (is this hccl-run the same version as the one "
                        "that started the job?)\n");
        free(fields);
        free(buf);
        return -1;
    }
    free(fields);
    job->node_spec_buf = buf;
    job->ranks = calloc(job->args.nranks, sizeof(*job->ranks));
    if (job->ranks == NULL)
        return -1;
    for (uint32_t i = 0; i < job->args.nranks; i++) {
        job->ranks[i].rank = job->rank_base + i;
        job->ranks[i].count = 1;
        job->ranks[i].ctl_fd = -1;
        hc_run_stream_init(&job->ranks[i].out, job->rank_base + i, STDOUT_FILENO);
        hc_run_stream_init(&job->ranks[i].err, job->rank_base + i, STDERR_FILENO);
    }
    job->nprocs = job->args.nranks;
    job->ctl_in = STDIN_FILENO;
    return 0;
}
