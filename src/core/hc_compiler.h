/* Compiler attributes used across the libraries. */
#ifndef HC_COMPILER_H
#define HC_COMPILER_H

/*
 * Thread-locals read on every operation: the initial-exec model reads them at a fixed offset from
 * the thread pointer instead of calling __tls_get_addr (3.6% of an 8-byte AllReduce's
 * instructions under callgrind). It reserves static TLS, so it is kept for a few small variables;
 * a library loaded late by dlopen still has the few dozen bytes glibc sets aside for this.
 */
#define HC_TLS_FAST _Thread_local __attribute__((tls_model("initial-exec")))

#endif /* HC_COMPILER_H */
