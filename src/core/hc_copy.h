/* Copying payload: memcpy, kept off the cases where the way glibc copies is slow. */
#ifndef HC_COPY_H
#define HC_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#define HC_COPY_HAS_STREAM 1
#else
#define HC_COPY_HAS_STREAM 0
#endif

/*
 * Two cases:
 *   - A destination 1-63 bytes ahead of its source modulo 4 KiB. Copying forwards, the next loads
 *     share their low 12 address bits with stores still pending, and each waits for them (4K
 *     aliasing). On AMD Zen 3 (EPYC Milan, glibc 2.36) `rep movsb`, which glibc's memcpy uses from
 *     2112 bytes to about a core's L2 cache, runs at 1.6-2.6 GB/s there against 35-48 elsewhere (the
 *     kernel's copies for process_vm_readv alike), and a large copy made of calls below that size
 *     (glibc's vector loop) at 11-12. A slot starts on a page and malloc's large blocks 16 bytes
 *     into one, so every copy out of a slot into such a buffer was one. hc_copy_backward copies
 *     these from the end: 26-36 GB/s, a 1 MiB Broadcast of malloc buffers 250 -> 64 us.
 *   - On the EPYC of an earlier VM a single call of 1 MiB or more was slower, and left the data
 *     slower for the peers to read (4 ranks on 2 CPUs, malloc AllReduce, 1 MiB 580-612 us with
 *     whole copies, 322-336 us in 256 KiB pieces; one thread, cached buffers: 1 MiB 48 -> 56 GB/s).
 *     Other copies go in pieces of at most HC_COPY_PIECE.
 */
#define HC_COPY_PIECE (256u * 1024u)
#define HC_COPY_NEAR 64u /* a destination less far ahead of its source (mod 4 KiB) is copied backwards... */
/* ...from this size: below it glibc copies with vector loads and stores, which those distances do not
 * stall (hot cache, 256-2048 bytes 1.2-1.9x faster than hc_copy_backward; lines from the other core,
 * 1-2 KiB, 0.22-0.34 us against 0.26-0.38). */
#define HC_COPY_NEAR_MIN 2048u

/* Is dst 1 to HC_COPY_NEAR - 1 bytes ahead of src, modulo 4 KiB? */
static inline int hc_copy_near(const void *dst, const void *src)
{
    uintptr_t ahead = ((uintptr_t)dst - (uintptr_t)src) & 4095u;

    return ahead != 0 && ahead < HC_COPY_NEAR;
}

/* From the end to the start, HC_COPY_NEAR bytes a step: the next loads lie below the stores just
 * made, and so below their aliases at HC_COPY_NEAR - 1 bytes ahead at most. */
static inline void hc_copy_backward(uint8_t *d, const uint8_t *s, size_t n)
{
    typedef uint8_t v16 __attribute__((vector_size(16)));

    while (n >= HC_COPY_NEAR) {
        v16 a, b, c, e;

        n -= HC_COPY_NEAR;
        memcpy(&a, s + n, 16);
        memcpy(&b, s + n + 16, 16);
        memcpy(&c, s + n + 32, 16);
        memcpy(&e, s + n + 48, 16);
        memcpy(d + n, &a, 16);
        memcpy(d + n + 16, &b, 16);
        memcpy(d + n + 32, &c, 16);
        memcpy(d + n + 48, &e, 16);
    }
    memcpy(d, s, n);
}

static inline void hc_copy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;

    if (n >= HC_COPY_NEAR_MIN && hc_copy_near(dst, src)) {
        hc_copy_backward(d, s, n);
        return;
    }
    for (; n > HC_COPY_PIECE; n -= HC_COPY_PIECE, d += HC_COPY_PIECE, s += HC_COPY_PIECE)
        memcpy(d, s, HC_COPY_PIECE);
    memcpy(d, s, n);
}

/* memmove's contract (the ranges may overlap), at hc_copy's speed where they do not. */
static inline void hc_move(void *dst, const void *src, size_t n)
{
    if ((uintptr_t)dst - (uintptr_t)src < n || (uintptr_t)src - (uintptr_t)dst < n)
        memmove(dst, src, n);
    else
        hc_copy(dst, src, n);
}

/*
 * Copy with non-temporal stores, which write whole lines to memory without first fetching them
 * (x86-64; hc_copy elsewhere): for shared memory that another core reads next, where fetching
 * each line for writing is what limits a copy (hc_shm_write says when). Ends with a store fence:
 * the stores are weakly ordered, and whatever publishes the data must follow them. A destination
 * just ahead of its source (hc_copy_near) goes to hc_copy.
 */
static inline void hc_copy_stream(void *dst, const void *src, size_t n)
{
#if HC_COPY_HAS_STREAM
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 63u);

    if (n < 2 * 64 || hc_copy_near(dst, src)) {
        hc_copy(dst, src, n);
        return;
    }
    memcpy(d, s, head); /* up to the destination's next line */
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
        _mm_stream_si128((__m128i *)(void *)d, a);
        _mm_stream_si128((__m128i *)(void *)(d + 16), b);
        _mm_stream_si128((__m128i *)(void *)(d + 32), c);
        _mm_stream_si128((__m128i *)(void *)(d + 48), e);
    }
    memcpy(d, s, n);
    _mm_sfence();
#else
    hc_copy(dst, src, n);
#endif
}

#endif
