/* 2 ranks: a loop of blocking AllReduces, then rank 0 enqueues one and sleeps 50 ms before
 * synchronising; rank 1 times its blocking wait for that op. Repeated. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "hccl/hccl.h"
#include "hccl/hccl_host.h"
#include "acl/acl.h"
static double now_us(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(void){
  HcclHostLaunchInfo l; HcclRootInfo root; HcclComm comm; aclrtStream s;
  aclInit(NULL); HcclHostGetLaunchInfo(&l); aclrtSetDevice((int)l.localRank); aclrtCreateStream(&s);
  if (l.rank==0) HcclGetRootInfo(&root);
  HcclHostBroadcastRootInfo(&root); HcclCommInitRootInfo(l.size,&root,l.rank,&comm);
  size_t n=getenv("N")?atol(getenv("N")):16384; float *a=calloc(n,4),*b=calloc(n,4);
  for (int rep=0; rep<6; rep++){
    for (int i=0;i<3000;i++){ HcclAllReduce(a,b,n,HCCL_DATA_TYPE_FP32,HCCL_REDUCE_SUM,comm,s); aclrtSynchronizeStream(s);} 
    HcclBarrier(comm,s); aclrtSynchronizeStream(s);
    double t0=now_us();
    HcclAllReduce(a,b,n,HCCL_DATA_TYPE_FP32,HCCL_REDUCE_SUM,comm,s);
    if (l.rank==0) usleep(50000);
    aclrtSynchronizeStream(s);
    if (l.rank==1) printf("rep %d: rank 1 waited %.0f us\n", rep, now_us()-t0);
  }
  HcclCommDestroy(comm); return 0;}
