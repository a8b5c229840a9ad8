/* The round-trip baseline of the multi-host section (bench/multihost.py): a TCP ping-pong of
 * SIZE-byte messages over one connection with TCP_NODELAY and blocking reads (netperf's TCP_RR).
 *
 *   tcp_pingpong --serve PORT [--timeout S]
 *       accepts one connection and echoes every message back until the client closes it
 *   tcp_pingpong --connect ADDR PORT [--bytes N] [--iters N] [--warmup N]
 *       prints "rtt_us min M median M mean M" over the timed round trips
 *
 * The server gives up after --timeout seconds (default 60) so that nothing outlives a failed run. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int xfer(int fd, char *buf, size_t len, int sending)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL) : recv(fd, buf + done, len - done, 0);
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static void nodelay(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int serve(int port, int timeout_s)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), fd;
    uint32_t len;
    char *buf;

    alarm((unsigned)timeout_s);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0) {
        perror("tcp_pingpong: listen");
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    if ((fd = accept(ls, NULL, NULL)) < 0) {
        perror("tcp_pingpong: accept");
        return 1;
    }
    nodelay(fd);
    if (xfer(fd, (char *)&len, sizeof(len), 0) != 0 || len == 0 || len > (1u << 20) || (buf = malloc(len)) == NULL)
        return 1;
    while (xfer(fd, buf, len, 0) == 0)
        if (xfer(fd, buf, len, 1) != 0)
            break;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static int ping(const char *addr, int port, uint32_t len, int iters, int warmup)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    double *rtt = calloc((size_t)iters, sizeof(*rtt)), sum = 0;
    char *buf = calloc(1, len);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (rtt == NULL || buf == NULL || inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
        fprintf(stderr, "tcp_pingpong: bad address %s\n", addr);
        return 1;
    }
    for (int tries = 0; connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0; tries++) {
        if (tries == 50) {
            perror("tcp_pingpong: connect");
            return 1;
        }
        close(fd);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        usleep(100000); /* the server may still be starting */
    }
    nodelay(fd);
    if (xfer(fd, (char *)&len, sizeof(len), 1) != 0)
        return 1;
    for (int i = -warmup; i < iters; i++) {
        double t0 = now_us();
        if (xfer(fd, buf, len, 1) != 0 || xfer(fd, buf, len, 0) != 0) {
            fprintf(stderr, "tcp_pingpong: the connection broke\n");
            return 1;
        }
        if (i >= 0)
            rtt[i] = now_us() - t0;
    }
    close(fd);
    for (int i = 0; i < iters; i++)
        sum += rtt[i];
    qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_double);
    printf("rtt_us min %.2f median %.2f mean %.2f\n", rtt[0], rtt[iters / 2], sum / iters);
    return 0;
}

int main(int argc, char **argv)
{
    int iters = 20000, warmup = 1000, timeout_s = 60;
    uint32_t len = 8;

    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--bytes") == 0)
            len = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--timeout") == 0)
            timeout_s = atoi(argv[++i]);
    }
    if (argc >= 3 && strcmp(argv[1], "--serve") == 0)
        return serve(atoi(argv[2]), timeout_s);
    if (argc >= 4 && strcmp(argv[1], "--connect") == 0 && len > 0 && len <= (1u << 20) && iters > 0 && warmup >= 0)
        return ping(argv[2], atoi(argv[3]), len, iters, warmup);
    fprintf(stderr, "usage: tcp_pingpong --serve PORT [--timeout S] | --connect ADDR PORT [--bytes N] [--iters N] "
                    "[--warmup N]\n");
    return 2;
}
