/* Capture this process's stderr in a memory file, for unit tests that assert on log lines. */
#ifndef HC_UNIT_CAPTURE_H
#define HC_UNIT_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    int saved;
    int fd;
} capture_t;

static inline void capture_begin(capture_t *c)
{
    fflush(stderr);
    c->fd = memfd_create("unit-stderr", MFD_CLOEXEC);
    c->saved = dup(STDERR_FILENO);
    if (c->fd < 0 || c->saved < 0 || dup2(c->fd, STDERR_FILENO) < 0) {
        perror("capture_begin");
        exit(1);
    }
}

/* Restore stderr, echo what was captured to it and return the text (malloc'ed). */
static inline char *capture_end(capture_t *c)
{
    off_t len;
    char *text;

    fflush(stderr);
    len = lseek(c->fd, 0, SEEK_END);
    text = calloc(1, (size_t)len + 1);
    if (text == NULL || pread(c->fd, text, (size_t)len, 0) != len) {
        perror("capture_end");
        exit(1);
    }
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    close(c->fd);
    if (len > 0 && write(STDERR_FILENO, text, (size_t)len) < 0)
        exit(1);
    return text;
}

/* How many times needle occurs in text. */
static inline int count_of(const char *text, const char *needle)
{
    int n = 0;

    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

#endif
