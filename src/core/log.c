/*
 * Logging. The level is read once (and again on hc_log_reload); a line is formatted into one buffer
 * and written with one write(2) so that lines of concurrent ranks do not interleave.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hc_compiler.h"
#include "hc_config.h"
#include "hc_log.h"
#include "hc_time.h"

#define LINE_BYTES 2048

static atomic_int log_level = -1; /* -1: not read yet */
static HC_TLS_FAST const hc_log_ctx_t *tls_ctx;

/*
 * The last error line of each thread (aclGetRecentErrMsg) lives on the heap, found through a
 * pthread key that frees it when the thread ends. Not in TLS: the libraries' initial-exec TLS makes
 * their whole TLS block static, and glibc leaves only ~1.6 KB of static TLS for libraries loaded
 * with dlopen (frameworks load libhccl that way, as does Python's ctypes): with a 2 KiB buffer in
 * it, dlopen failed with "cannot allocate memory in static TLS block".
 */
typedef struct {
    int64_t ns;  /* CLOCK_MONOTONIC when it was set: orders the two libraries' lines */
    int carried; /* set by hc_log_carry_error, not by a line this library logged */
    char text[LINE_BYTES];
} last_error_t;

static pthread_key_t last_error_key;
/* Error lines this thread logged: a task's runner compares it before and after the task. */
static HC_TLS_FAST unsigned tls_error_count;
static pthread_once_t last_error_once = PTHREAD_ONCE_INIT;
static int last_error_key_ok;

static void make_last_error_key(void)
{
    last_error_key_ok = pthread_key_create(&last_error_key, free) == 0;
}

/* This thread's buffer; created when `create` (NULL if that fails or the key could not be made). */
static last_error_t *last_error_buffer(int create)
{
    last_error_t *buf;

    pthread_once(&last_error_once, make_last_error_key);
    if (!last_error_key_ok)
        return NULL;
    buf = pthread_getspecific(last_error_key);
    if (buf == NULL && create) {
        buf = calloc(1, sizeof(*buf));
        if (buf != NULL && pthread_setspecific(last_error_key, buf) != 0) {
            free(buf);
            buf = NULL;
        }
    }
    return buf;
}

static const char *const level_names[] = {"debug", "info", "warning", "error"};

void hc_log_reload(void)
{
    /* Publish the default first: reading the variable may itself log a warning. */
    atomic_store(&log_level, HC_LOG_WARN);
    atomic_store(&log_level, (int)hc_config_int(HC_CFG_LOG_LEVEL));
}

int hc_log_enabled(hc_log_level_t level)
{
    int current = atomic_load_explicit(&log_level, memory_order_relaxed);

    if (current < 0) {
        int saved = errno; /* callers format strerror(errno) after this check */
        hc_log_reload();
        errno = saved;
        current = atomic_load(&log_level);
    }
    return (int)level >= current && level < HC_LOG_OFF;
}

const hc_log_ctx_t *hc_log_ctx_push(const hc_log_ctx_t *ctx)
{
    const hc_log_ctx_t *previous = tls_ctx;

    tls_ctx = ctx;
    return previous;
}

void hc_log_ctx_pop(const hc_log_ctx_t *previous)
{
    tls_ctx = previous;
}

const char *hc_log_last_error(void)
{
    const last_error_t *buf = last_error_buffer(0);

    return buf != NULL ? buf->text : "";
}

int64_t hc_log_last_error_ns(int *carried_p)
{
    const last_error_t *buf = last_error_buffer(0);

    if (carried_p != NULL)
        *carried_p = buf != NULL && buf->carried;
    return buf != NULL ? buf->ns : 0;
}

unsigned hc_log_error_count(void)
{
    return tls_error_count;
}

void hc_log_carry_error(const char *text)
{
    last_error_t *buf = last_error_buffer(1);

    if (buf == NULL)
        return;
    snprintf(buf->text, sizeof(buf->text), "%s", text);
    buf->ns = hc_now_ns();
    buf->carried = 1;
}

static int format_prefix(char *buf, size_t len)
{
    const hc_log_ctx_t *ctx = tls_ctx;

    if (ctx != NULL && ctx->rank >= 0)
        return snprintf(buf, len, "hostccl[rank %d comm %s]", ctx->rank,
                        ctx->comm_name != NULL ? ctx->comm_name : "-");
    return snprintf(buf, len, "hostccl[pid %d]", (int)getpid());
}

void hc_log_vwrite(hc_log_level_t level, const char *file, int line, const char *fmt, va_list ap)
{
    char buf[LINE_BYTES];
    int used, n, saved = errno; /* logging never changes errno */

    used = format_prefix(buf, sizeof(buf));
    n = snprintf(buf + used, sizeof(buf) - (size_t)used, " %s: ", level_names[level]);
    used += n;
    n = vsnprintf(buf + used, sizeof(buf) - (size_t)used, fmt, ap);
    used = n < 0 ? used : used + n;
    if ((size_t)used >= sizeof(buf) - 64)
        used = (int)sizeof(buf) - 64;
    if (level == HC_LOG_DEBUG)
        used += snprintf(buf + used, sizeof(buf) - (size_t)used, " (%s:%d)", file, line);
    if (level == HC_LOG_ERROR) {
        last_error_t *last = last_error_buffer(1);
        if (last != NULL) {
            snprintf(last->text, sizeof(last->text), "%s", buf);
            last->ns = hc_now_ns();
            last->carried = 0;
        }
        tls_error_count++;
    }
    buf[used++] = '\n';
    /* One write per line; a short write to stderr is not worth a retry loop. */
    if (write(STDERR_FILENO, buf, (size_t)used) < 0)
        used = 0;
    errno = saved;
}

void hc_log_write(hc_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    hc_log_vwrite(level, file, line, fmt, ap);
    va_end(ap);
}
