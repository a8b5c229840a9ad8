/* hccl-run's command line. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hccl/hccl_host.h>

#include "hccl_run.h"

/* Large enough for any job, small enough that seconds * 1e9 stays far from int64 overflow. */
#define MAX_TIMEOUT_S (365LL * 24 * 3600)

static const char usage_text[] =
    "usage: hccl-run -n N [options] [--] PROGRAM [ARGS...]\n"
    "       hccl-run --hosts HOST:N,HOST:N... [--agent 'CMD {host}'] [options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Start N ranks of PROGRAM on this host (or on several hosts) and serve them a rendezvous store.\n"
    "\n"
    "options:\n"
    "  -n, --np N           number of ranks (1..4096); with --hosts, at most the hosts' slots;\n"
    "                       -np N is accepted too, as mpirun's\n"
    "  -p, --tag-output     prefix each line of output with \"[RANK] \"\n"
    "      --timeout S      stop every rank after S seconds and exit with 124\n"
    "      --keep-going     when a rank fails, let the others run on (fault-injection tests)\n"
    "      --bind-to WHAT   share (default): each rank gets its share of the CPUs hccl-run may\n"
    "                       use; none: leave the ranks' CPU affinity alone\n"
    "      --hosts LIST     HOST[:N],... ranks placed host by host, N each (default 1);\n"
    "                       \"localhost\" runs its ranks here, other hosts through the agent\n"
    "      --agent CMD      how to run a command on a host, {host} standing for it\n"
    "                       (default 'ssh -x -o BatchMode=yes {host}'; tests: 'ip netns exec {host}')\n"
    "      --store-addr IP  where the store listens for other hosts (default: the address\n"
    "                       HCCL_IF_IP / HCCL_SOCKET_IFNAME / the first interface up give)\n"
    "  -x NAME=VALUE        set NAME to VALUE for every rank, on every host\n"
    "  -x NAME              give NAME with its value here to the ranks on other hosts too\n"
    "                       (HCCL_*, HOSTCCL_*, ASCEND_* always go)\n"
    "  -h, --help           print this help\n"
    "      --version        print the hostccl version\n"
    "\n"
    "Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, HOSTCCL_STORE and\n"
    "HOSTCCL_STORE_TOKEN. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to\n"
    "every rank. When a rank fails the others are stopped and hccl-run exits with the first\n"
    "failure's status (128+N for a signal N). See docs/hccl-run.md.\n";

enum { OPT_TIMEOUT = 256, OPT_HOSTS, OPT_VERSION, OPT_KEEP_GOING, OPT_BIND_TO, OPT_AGENT, OPT_STORE_ADDR, OPT_NODE };

static const struct option options[] = {
    {.name = "np", .has_arg = required_argument, .val = 'n'},
    {.name = "tag-output", .has_arg = no_argument, .val = 'p'},
    {.name = "timeout", .has_arg = required_argument, .val = OPT_TIMEOUT},
    {.name = "keep-going", .has_arg = no_argument, .val = OPT_KEEP_GOING},
    {.name = "bind-to", .has_arg = required_argument, .val = OPT_BIND_TO},
    {.name = "hosts", .has_arg = required_argument, .val = OPT_HOSTS},
    {.name = "agent", .has_arg = required_argument, .val = OPT_AGENT},
    {.name = "store-addr", .has_arg = required_argument, .val = OPT_STORE_ADDR},
    {.name = "node", .has_arg = required_argument, .val = OPT_NODE},
    {.name = "help", .has_arg = no_argument, .val = 'h'},
    {.name = "version", .has_arg = no_argument, .val = OPT_VERSION},
    {.name = NULL},
};

/* A decimal integer in [min, max]: 0 on success. */
static int parse_count(const char *text, long long min, long long max, long long *value_p)
{
    char *end;
    long long v;

    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *value_p = v;
    return 0;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("hccl-run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n\n", stderr);
    fputs(usage_text, stderr);
    return -1;
}

/* Apply one option to args: 0 go on, 1 done, -1 usage error. */
static int apply_option(int opt, const char *arg, hc_run_args_t *args)
{
    long long value;

    switch (opt) {
    case 'n':
        if (parse_count(arg, 1, HC_RUN_MAX_RANKS, &value) != 0)
            return usage_error("-n needs a number of ranks from 1 to 4096, not \"%s\"", arg);
        args->nranks = (uint32_t)value;
        return 0;
    case 'p':
        args->tag_output = 1;
        return 0;
    case OPT_TIMEOUT:
        if (parse_count(arg, 1, MAX_TIMEOUT_S, &value) != 0)
            return usage_error("--timeout needs a positive number of seconds, not \"%s\"", arg);
        args->timeout_s = value;
        return 0;
    case OPT_KEEP_GOING:
        args->keep_going = 1;
        return 0;
    case OPT_BIND_TO:
        if (strcmp(arg, "share") != 0 && strcmp(arg, "none") != 0)
            return usage_error("--bind-to is share or none, not \"%s\"", arg);
        args->bind_none = strcmp(arg, "none") == 0;
        return 0;
    case OPT_HOSTS:
        args->hosts = arg;
        return 0;
    case OPT_AGENT:
        if (strspn(arg, " \t") == strlen(arg))
            return usage_error("%s", "--agent needs a command");
        args->agent = arg;
        return 0;
    case OPT_STORE_ADDR:
        args->store_addr = arg;
        return 0;
    case 'x':
        if (args->nexports == HC_RUN_MAX_EXPORTS)
            return usage_error("at most %u -x options", HC_RUN_MAX_EXPORTS);
        if (arg[0] == '\0' || arg[0] == '=')
            return usage_error("-x needs NAME or NAME=VALUE, not \"%s\"", arg);
        args->exports[args->nexports++] = arg;
        return 0;
    case OPT_NODE:
        args->node_spec = arg;
        return 0;
    case 'h':
        fputs(usage_text, stdout);
        return 1;
    case OPT_VERSION:
        printf("hccl-run (hostccl) %d.%d.%d\n", HOSTCCL_VERSION_MAJOR, HOSTCCL_VERSION_MINOR,
               HOSTCCL_VERSION_PATCH);
        return 1;
    default:
        /* getopt_long has already said what was wrong. */
        fputc('\n', stderr);
        fputs(usage_text, stderr);
        return -1;
    }
}

/* Options of hccl-run that take their value as the next word. */
static int takes_value(const char *word)
{
    static const char *const with_value[] = {"-n", "--np", "--timeout", "--bind-to", "--hosts"};

    for (size_t i = 0; i < sizeof(with_value) / sizeof(with_value[0]); i++)
        if (strcmp(word, with_value[i]) == 0)
            return 1;
    return 0;
}

/*
 * mpirun's habit, "-np N", would read as -n with the value "p". Among hccl-run's own words (before
 * the program or "--"), "-np" becomes "--np" before getopt sees it.
 */
static void accept_mpirun_np(int argc, char **argv)
{
    static char long_np[] = "--np";

    for (int i = 1; i < argc; i++) {
        char *word = argv[i];
        if (strcmp(word, "--") == 0 || word[0] != '-')
            return;
        if (strcmp(word, "-np") == 0) {
            argv[i] = long_np;
            i++; /* its value */
        } else if (takes_value(word)) {
            i++;
        }
    }
}

int hc_run_args_parse(int argc, char **argv, hc_run_args_t *args_p)
{
    hc_run_args_t args = {.nranks = 0};
    int opt;

    accept_mpirun_np(argc, argv);

    /* "+": stop at the first non-option, so that the program's own options stay its own. */
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+n:phx:", options, NULL)) != -1) {
        int rc = apply_option(opt, optarg, &args);
        if (rc != 0)
            return rc;
    }
    /* A node gets everything else from its spec (remote.c). */
    if (args.node_spec != NULL) {
        *args_p = args;
        return 0;
    }
    if (args.nranks == 0 && args.hosts == NULL)
        return usage_error("%s", "-n N is required (or --hosts)");
    if (args.hosts == NULL && (args.agent != NULL || args.store_addr != NULL))
        return usage_error("%s", "--agent and --store-addr go with --hosts");
    if (optind >= argc)
        return usage_error("%s", "no program to run");
    args.argv = argv + optind;
    *args_p = args;
    return 0;
}
