#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#define WP_UNPOP (1u<<13)
#define WP_ASYNC (1u<<15)
struct rg { uint64_t start, end, cat; };
struct arg { uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, ci, cm, ca, rm; };
#define PMSCAN _IOWR('f', 16, struct arg)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static long scan(int fd, char *b, size_t n, int reset) {
  struct rg r[16]; struct arg a = {.size=sizeof a, .flags = reset ? 3 : 2, .start=(uintptr_t)b, .end=(uintptr_t)b+n, .vec=(uintptr_t)r, .vec_len=16, .cm=2, .rm=2};
  int k = ioctl(fd, PMSCAN, &a); if (k < 0) { perror("scan"); return -1; }
  long pages=0; for (int i=0;i<k;i++) pages += (r[i].end-r[i].start)/4096; return pages;
}
int main(int argc, char **argv) {
  size_t n = argc > 1 ? atol(argv[1]) : 1<<20;
  char *b = malloc(n); memset(b, 1, n);
  char *pb = (char*)(((uintptr_t)b + 4095) & ~4095ul); size_t pn = (n - (pb - b)) & ~4095ul;
  int u = syscall(SYS_userfaultfd, O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY);
  if (u < 0) { perror("userfaultfd"); return 1; }
  struct uffdio_api api = {.api = UFFD_API, .features = WP_ASYNC|WP_UNPOP};
  if (ioctl(u, UFFDIO_API, &api)) { perror("api"); return 1; }
  struct uffdio_register reg = {.range = {(uintptr_t)pb, pn}, .mode = UFFDIO_REGISTER_MODE_WP};
  if (ioctl(u, UFFDIO_REGISTER, &reg)) { perror("register"); return 1; }
  int pm = open("/proc/self/pagemap", O_RDONLY);
  double t0 = now(); long w0 = scan(pm, pb, pn, 1); double t1 = now();
  printf("first scan+reset: %ld written pages, %.1f us\n", w0, t1-t0);
  t0 = now(); long w1 = scan(pm, pb, pn, 1); t1 = now();
  printf("second: %ld pages, %.1f us\n", w1, t1-t0);
  pb[5000] = 2; pb[pn-1] = 3;
  t0 = now(); long w2 = scan(pm, pb, pn, 1); t1 = now();
  printf("after 2 writes: %ld pages, %.1f us\n", w2, t1-t0);
  t0 = now(); for (size_t i = 0; i < pn; i += 64) pb[i] = 4; t1 = now();
  printf("rewrite all (faults): %.1f us\n", t1-t0);
  t0 = now(); for (size_t i = 0; i < pn; i += 64) pb[i] = 5; t1 = now();
  printf("rewrite all again (no reset): %.1f us\n", t1-t0);
  t0 = now(); long w3 = scan(pm, pb, pn, 1); t1 = now();
  printf("scan: %ld pages, %.1f us\n", w3, t1-t0);
  t0 = now(); for (size_t i = 0; i < pn; i += 64) pb[i] = 6; t1 = now();
  printf("rewrite after reset (wp faults): %.1f us\n", t1-t0);
  return 0;
}
