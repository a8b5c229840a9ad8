/*
 * Logging: one line per event on stderr, "hostccl[rank R comm NAME] level: message".
 *
 * Level from ASCEND_GLOBAL_LOG_LEVEL (0 debug, 1 info, 2 warning, 3 error, 4 off; default 2).
 * Code logs once, where an error is detected; callers only propagate (STYLE.md 8).
 */
#ifndef HC_LOG_H
#define HC_LOG_H

#include <stdarg.h>
#include <stdint.h>

typedef enum {
    HC_LOG_DEBUG = 0,
    HC_LOG_INFO = 1,
    HC_LOG_WARN = 2,
    HC_LOG_ERROR = 3,
    HC_LOG_OFF = 4
} hc_log_level_t;

/* What the prefix says about the caller: set by the API entry and by the executor running an op,
 * so that a log line deep in a transport still names the rank and communicator. */
typedef struct {
    int rank;              /* -1: unknown */
    const char *comm_name; /* NULL: none */
} hc_log_ctx_t;

int hc_log_enabled(hc_log_level_t level);
void hc_log_write(hc_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void hc_log_vwrite(hc_log_level_t level, const char *file, int line, const char *fmt, va_list ap);

/* Install ctx as this thread's context and return the previous one (restore it when done). */
const hc_log_ctx_t *hc_log_ctx_push(const hc_log_ctx_t *ctx);
void hc_log_ctx_pop(const hc_log_ctx_t *previous);

/* The last error-level message logged by this thread ("" when none). */
const char *hc_log_last_error(void);

/* When this thread's last error was set (CLOCK_MONOTONIC ns, 0: never), and whether it was carried
 * (hc_log_carry_error) rather than logged here. */
int64_t hc_log_last_error_ns(int *carried_p);

/* Error lines this thread has logged so far (compare before and after a task). */
unsigned hc_log_error_count(void);

/* Make text this thread's last error without logging it: the error of a task another thread ran,
 * carried to the thread that synchronised with it. */
void hc_log_carry_error(const char *text);

/* Re-read ASCEND_GLOBAL_LOG_LEVEL (tests change it between cases). */
void hc_log_reload(void);

#define HC_LOG(level, ...)                                              \
    do {                                                                \
        if (hc_log_enabled(level))                                      \
            hc_log_write((level), __FILE__, __LINE__, __VA_ARGS__);     \
    } while (0)

#define HC_ERROR(...) HC_LOG(HC_LOG_ERROR, __VA_ARGS__)
#define HC_WARN(...) HC_LOG(HC_LOG_WARN, __VA_ARGS__)
#define HC_INFO(...) HC_LOG(HC_LOG_INFO, __VA_ARGS__)
#define HC_DEBUG(...) HC_LOG(HC_LOG_DEBUG, __VA_ARGS__)

#endif /* HC_LOG_H */
