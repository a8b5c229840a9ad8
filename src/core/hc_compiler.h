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

/*
 * Ask for the cache line at p for writing (PREFETCHW on x86; a read prefetch elsewhere), so that
 * a later store to a line another core read does not wait for that core's copy to be invalidated
 * at this thread's next locked instruction. __builtin_prefetch(p, 1) emits PREFETCHW only when
 * the target allows it (-mprfchw), which the baseline x86-64 target does not.
 */
static inline void hc_prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

/* Ask for every cache line of the `bytes` from p (p at a line's start) for writing. */
static inline void hc_prefetch_write_lines(const void *p, unsigned long bytes)
{
    for (unsigned long at = 0; at < bytes; at += 64)
        hc_prefetch_write((const char *)p + at);
}

/* One step of a spin-wait: the pause hint that lets the sibling hardware thread run. */
static inline void hc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* HC_COMPILER_H */
