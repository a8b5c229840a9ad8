/*
 * --tag-output: each rank's stdout and stderr come through pipes and leave hccl-run line by line,
 * each line prefixed with "[R] ". Lines, not reads, are the unit, so that two ranks printing at
 * once still give whole lines; stdout and stderr stay separate streams.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "hccl_run.h"

/* A line longer than this is written in pieces: the first piece carries the prefix, the rest
 * follows without one. Bounds the memory a rank can make hccl-run hold. */
#define LINE_BYTES (64 * 1024)

/* Set once our own stdout or stderr is gone (EPIPE): output is then read and dropped, so that
 * ranks never block on a full pipe. */
static int out_broken[3];

static void write_all(int fd, const struct iovec *iov_in, int iovcnt)
{
    struct iovec iov[3];
    int first = 0;

    if (out_broken[fd])
        return;
    memcpy(iov, iov_in, (size_t)iovcnt * sizeof(iov[0]));
    while (first < iovcnt) {
        ssize_t n = writev(fd, iov + first, iovcnt - first);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            out_broken[fd] = 1;
            return;
        }
        while (first < iovcnt && (size_t)n >= iov[first].iov_len) {
            n -= (ssize_t)iov[first].iov_len;
            first++;
        }
        if (first < iovcnt) {
            iov[first].iov_base = (char *)iov[first].iov_base + n;
            iov[first].iov_len -= (size_t)n;
        }
    }
}

/* Write text (len bytes) as part of the current line, with the prefix unless the line has begun,
 * and with `newline` appended when given. */
static void emit(hc_run_stream_t *stream, const char *text, size_t len, const char *newline)
{
    struct iovec iov[3];
    int n = 0;

    if (!stream->mid_line)
        iov[n++] = (struct iovec){.iov_base = stream->prefix, .iov_len = strlen(stream->prefix)};
    iov[n++] = (struct iovec){.iov_base = (void *)text, .iov_len = len};
    if (newline != NULL)
        iov[n++] = (struct iovec){.iov_base = (void *)newline, .iov_len = 1};
    write_all(stream->out_fd, iov, n);
    stream->mid_line = newline == NULL;
}

/* Write every complete line in the buffer and keep the incomplete rest. */
static void emit_lines(hc_run_stream_t *stream)
{
    size_t start = 0;

    for (;;) {
        char *nl = memchr(stream->buf + start, '\n', stream->len - start);
        if (nl == NULL)
            break;
        emit(stream, stream->buf + start, (size_t)(nl - (stream->buf + start)), "\n");
        start = (size_t)(nl - stream->buf) + 1;
    }
    memmove(stream->buf, stream->buf + start, stream->len - start);
    stream->len -= start;
    if (stream->len == LINE_BYTES) {
        emit(stream, stream->buf, stream->len, NULL);
        stream->len = 0;
    }
}

void hc_run_stream_init(hc_run_stream_t *stream, uint32_t rank, int out_fd)
{
    memset(stream, 0, sizeof(*stream));
    stream->fd = -1;
    stream->out_fd = out_fd;
    snprintf(stream->prefix, sizeof(stream->prefix), "[%u] ", rank);
}

int hc_run_stream_open(hc_run_stream_t *stream, int fd)
{
    stream->buf = malloc(LINE_BYTES);
    if (stream->buf == NULL) {
        fprintf(stderr, "hccl-run: out of memory for output buffers\n");
        return -1;
    }
    /* Non-blocking: the poll loop reads what is there and never waits on one rank. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    stream->fd = fd;
    return 0;
}

/* Read once: 1 got data, 0 nothing now, -1 end of stream or error. */
static int read_once(hc_run_stream_t *stream)
{
    for (;;) {
        ssize_t n = read(stream->fd, stream->buf + stream->len, LINE_BYTES - stream->len);
        if (n > 0) {
            stream->len += (size_t)n;
            emit_lines(stream);
            return 1;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
}

void hc_run_stream_read(hc_run_stream_t *stream)
{
    if (stream->fd >= 0 && read_once(stream) < 0)
        hc_run_stream_close(stream);
}

void hc_run_stream_close(hc_run_stream_t *stream)
{
    if (stream->fd < 0)
        return;
    /* Everything the rank wrote before it exited is in the pipe now; read it out, but stop at an
     * empty pipe rather than at end of file: a child of the rank may hold the pipe open. */
    while (read_once(stream) > 0)
        ;
    if (stream->len > 0 || stream->mid_line)
        emit(stream, stream->buf, stream->len, "\n");
    stream->len = 0;
    close(stream->fd);
    stream->fd = -1;
    free(stream->buf);
    stream->buf = NULL;
}
