/*
 * A stand-in for libFuzzer in the ordinary build, so that `make test` runs every fuzz target without
 * clang: the target's LLVMFuzzerTestOneInput over its seed corpus, then over deterministic
 * pseudo-random mutations of it (bit flips, interesting integers, inserted, erased and duplicated
 * ranges, splices of two seeds). It finds only shallow bugs; its job is to keep the targets and
 * their properties working between real fuzzing runs (`make fuzz`, docs/testing.md).
 *
 * usage: fuzz_smoke_NAME [--mutations N] [--seed S] [--max-len BYTES] PATH...
 *   PATH is a corpus file or a folder of them. A crash or a broken property names the input and
 *   writes it to smoke-crash-NAME.bin in the working directory, to replay with the real fuzzer
 *   (fuzz_NAME smoke-crash-NAME.bin) or with this driver (fuzz_smoke_NAME smoke-crash-NAME.bin).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_target.h"

#define MAX_SEEDS 256
#define MAX_MUTATIONS_PER_INPUT 4

typedef struct {
    uint8_t *bytes;
    size_t len;
    char *name;
} input_t;

typedef struct {
    input_t seeds[MAX_SEEDS];
    size_t nseeds;
    unsigned long mutations;
    uint64_t seed;
    size_t max_len;
} smoke_t;

/* What is running now, for the crash handler. */
static const uint8_t *current_bytes;
static size_t current_len;
static char current_what[512];
static char crash_path[256];

/* ---- crash reporting --------------------------------------------------------------------------- */

static void write_str(int fd, const char *s)
{
    if (write(fd, s, strlen(s)) < 0)
        return;
}

/* Async-signal-safe: name the input, save it, and die of the same signal. */
static void on_crash(int sig)
{
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    write_str(STDERR_FILENO, "fuzz smoke: crashed on ");
    write_str(STDERR_FILENO, current_what);
    if (fd >= 0 && write(fd, current_bytes, current_len) == (ssize_t)current_len) {
        write_str(STDERR_FILENO, "; input saved to ");
        write_str(STDERR_FILENO, crash_path);
    }
    write_str(STDERR_FILENO, "\n");
    if (fd >= 0)
        close(fd);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_crash_handler(const char *argv0)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    const char *base = strrchr(argv0, '/');
    const char *name = base != NULL ? base + 1 : argv0;

    if (strncmp(name, "fuzz_smoke_", 11) == 0)
        name += 11;
    snprintf(crash_path, sizeof(crash_path), "smoke-crash-%s.bin", name);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        signal(sigs[i], on_crash);
}

/* ---- corpus ------------------------------------------------------------------------------------ */

static void add_file(smoke_t *smoke, const char *path)
{
    FILE *f = fopen(path, "rb");
    input_t *in = &smoke->seeds[smoke->nseeds];
    long len;

    if (smoke->nseeds == MAX_SEEDS) {
        fprintf(stderr, "fuzz smoke: more than %d seeds; ignoring %s\n", MAX_SEEDS, path);
        if (f != NULL)
            fclose(f);
        return;
    }
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "fuzz smoke: cannot read %s\n", path);
        exit(2);
    }
    in->bytes = malloc((size_t)len + 1);
    in->len = (size_t)len;
    in->name = strdup(path);
    if (in->bytes == NULL || in->name == NULL || fread(in->bytes, 1, in->len, f) != in->len) {
        fprintf(stderr, "fuzz smoke: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    smoke->nseeds++;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* A file, or every regular file of a folder in name order (so that runs are reproducible). */
static void add_path(smoke_t *smoke, const char *path)
{
    struct stat st;
    struct dirent **names;
    int n;

    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz smoke: no such corpus: %s\n", path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        add_file(smoke, path);
        return;
    }
    n = scandir(path, &names, NULL, by_name);
    for (int i = 0; i < n; i++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s/%s", path, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(file, &st) == 0 && S_ISREG(st.st_mode))
            add_file(smoke, file);
        free(names[i]);
    }
    free(names);
}

/* ---- mutations --------------------------------------------------------------------------------- */

/* splitmix64: a fixed sequence for a fixed seed, whatever the platform's rand(). */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t below(uint64_t *state, size_t n)
{
    return n == 0 ? 0 : (size_t)(next_random(state) % n);
}

/* Values at the edges of the checks a parser makes: zero, one, sign bits, all ones, 2^16. */
static const uint32_t interesting[] = {0, 1, 2, 6, 16, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff,
                                       0x10000, 0x10001, 0x7fffffff, 0x80000000u, 0xffffffffu};

/* Apply one random change to buf (len bytes of cap); returns the new length. */
static size_t mutate_once(uint64_t *rng, uint8_t *buf, size_t len, size_t cap, const input_t *other)
{
    size_t at = below(rng, len), n;
    uint32_t v;

    switch (below(rng, 8)) {
    case 0: /* flip a bit */
        if (len > 0)
            buf[at] ^= (uint8_t)(1u << below(rng, 8));
        return len;
    case 1: /* a random byte */
        if (len > 0)
            buf[at] = (uint8_t)next_random(rng);
        return len;
    case 2: /* an interesting 32-bit value, either byte order (boot is little-, the store big-endian) */
        v = interesting[below(rng, sizeof(interesting) / sizeof(interesting[0]))];
        if (below(rng, 2))
            v = __builtin_bswap32(v);
        if (len >= 4) {
            at = below(rng, len - 3);
            memcpy(buf + at, &v, 4);
        }
        return len;
    case 3: /* insert random bytes */
        n = 1 + below(rng, 16);
        if (len + n > cap)
            return len;
        memmove(buf + at + n, buf + at, len - at);
        for (size_t i = 0; i < n; i++)
            buf[at + i] = (uint8_t)next_random(rng);
        return len + n;
    case 4: /* erase a range */
        n = below(rng, len - at + 1);
        memmove(buf + at, buf + at + n, len - at - n);
        return len - n;
    case 5: /* cut the tail */
        return below(rng, len + 1);
    case 6: /* copy a range over another place */
        n = below(rng, len - at + 1);
        if (n > 0) {
            size_t to = below(rng, len - n + 1);
            memmove(buf + to, buf + at, n);
        }
        return len;
    default: /* splice: this input's head, another's tail */
        n = other->len > 0 ? below(rng, other->len) : 0;
        if (at + (other->len - n) > cap)
            return len;
        memcpy(buf + at, other->bytes + n, other->len - n);
        return at + (other->len - n);
    }
}

/* ---- running ----------------------------------------------------------------------------------- */

static void run_one(const uint8_t *bytes, size_t len)
{
    /* A copy of exactly len bytes, as libFuzzer gives, so that an overread is an overread. */
    uint8_t *copy = malloc(len > 0 ? len : 1);

    if (copy == NULL) {
        fprintf(stderr, "fuzz smoke: out of memory\n");
        exit(2);
    }
    memcpy(copy, bytes, len);
    current_bytes = copy;
    current_len = len;
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

static void run_mutations(const smoke_t *smoke)
{
    static const input_t empty = {.bytes = (uint8_t *)"", .len = 0, .name = "(empty)"};
    uint8_t *buf = malloc(smoke->max_len);
    uint64_t rng = smoke->seed;

    if (buf == NULL) {
        fprintf(stderr, "fuzz smoke: out of memory\n");
        exit(2);
    }
    for (unsigned long m = 0; m < smoke->mutations; m++) {
        const input_t *base = smoke->nseeds > 0 ? &smoke->seeds[below(&rng, smoke->nseeds)] : &empty;
        const input_t *other = smoke->nseeds > 0 ? &smoke->seeds[below(&rng, smoke->nseeds)] : &empty;
        size_t len = base->len < smoke->max_len ? base->len : smoke->max_len;
        size_t rounds = 1 + below(&rng, MAX_MUTATIONS_PER_INPUT);

        memcpy(buf, base->bytes, len);
        for (size_t r = 0; r < rounds; r++)
            len = mutate_once(&rng, buf, len, smoke->max_len, other);
        snprintf(current_what, sizeof(current_what), "mutation %lu of %s (--seed %llu)", m, base->name,
                 (unsigned long long)smoke->seed);
        run_one(buf, len);
    }
    free(buf);
}

static void usage(void)
{
    fprintf(stderr, "usage: fuzz_smoke_NAME [--mutations N] [--seed S] [--max-len BYTES] PATH...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static smoke_t smoke = {.mutations = 2000, .seed = 1, .max_len = 8192};
    struct timespec t0, t1;
    int i;

    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--mutations") == 0)
            smoke.mutations = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0)
            smoke.seed = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--max-len") == 0)
            smoke.max_len = strtoul(argv[i + 1], NULL, 10);
        else
            usage();
    }
    if (i == argc || smoke.max_len == 0)
        usage();
    for (; i < argc; i++)
        add_path(&smoke, argv[i]);
    install_crash_handler(argv[0]);
    LLVMFuzzerInitialize(&argc, &argv);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t s = 0; s < smoke.nseeds; s++) {
        snprintf(current_what, sizeof(current_what), "seed %s", smoke.seeds[s].name);
        run_one(smoke.seeds[s].bytes, smoke.seeds[s].len);
    }
    run_mutations(&smoke);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("fuzz smoke: %zu seeds and %lu mutations in %.2f s, no failure\n", smoke.nseeds, smoke.mutations,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    for (size_t s = 0; s < smoke.nseeds; s++) {
        free(smoke.seeds[s].bytes);
        free(smoke.seeds[s].name);
    }
    return 0;
}
