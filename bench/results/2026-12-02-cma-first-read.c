/* The first process_vm_readv into a destination the kernel has not yet written costs ~6 us per 4 KiB
 * page on the reference VM (bench/results/2026-12-02-cma-trials.md). A child fills three 2 MiB
 * buffers; the parent reads each with one process_vm_readv, twice, into a destination that is:
 *   0 malloc + memset   1 mmap(MAP_POPULATE)   2 malloc + memset + MADV_POPULATE_WRITE
 *   3 malloc + memset, then process_vm_writev of itself onto itself (the kernel writes it first)
 * cc -O2 -o first-read 2026-12-02-cma-first-read.c && for m in 0 1 2 3; do ./first-read $m; done */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(int argc,char**argv){
  size_t n = 2<<20; int mode = atoi(argv[1]);
  int pfd[2]; pipe(pfd);
  pid_t c = fork();
  if (c==0){ for(int k=0;k<3;k++){char *src = malloc(n); memset(src, 1, n); write(pfd[1], &src, sizeof(src));} pause(); return 0; }
  for (int b=0;b<3;b++){
  char *dst;
  if (mode==1) dst = mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);
  else { dst = malloc(n); memset(dst,3,n); }
  if (mode==2) printf("populate %d\n", madvise((void*)((unsigned long)dst & ~4095ul), n, MADV_POPULATE_WRITE));
  if (mode==3) { struct iovec l={dst,n}, rm={dst,n}; double t0=now(); process_vm_writev(getpid(),&rm,1,&l,1,0); printf("self writev %.1f\n", now()-t0);}
  char *src; read(pfd[0], &src, sizeof(src));
  for (int r=0;r<2;r++){
    struct iovec l={dst,n}, rm={src,n};
    double t0=now(); ssize_t got=process_vm_readv(c,&l,1,&rm,1,0); double t1=now();
    printf("mode %d buf %d read %d: %zd bytes %.1f us\n", mode, b, r, got, t1-t0);
  }}
  kill(c,9); wait(0); return 0;
}
