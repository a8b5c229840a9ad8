/* Copying payload: memcpy, kept off the two cases where glibc's choice of instructions is slow. */
#ifndef HC_COPY_H
#define HC_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * glibc's memcpy moves a block of 2112 bytes or more (4096 without FSRM) with `rep movsb`, up to
 * about the size of a core's L2 cache. Two cases are slow:
 *   - On AMD Zen 3 (EPYC Milan; glibc 2.36) `rep movsb` runs at a twentieth of its speed when the
 *     destination lies 1-31 bytes after the source modulo 4 KiB: 1.8-2.6 GB/s against 35-48 at
 *     64 KiB-256 KiB, and the kernel's copies for process_vm_readv alike. A slot is page-aligned
 *     and malloc's large blocks start 16 bytes into a page, so every copy out of a slot into such
 *     a buffer was one (2 ranks, 1 MiB AllGather of malloc buffers: 339 us against 53 on
 *     aclrtMalloc memory). Such copies go in pieces of HC_COPY_NEAR_PIECE bytes, below glibc's
 *     thresholds, which it moves with vector loads and stores (39-42 GB/s there).
 *   - On the EPYC of an earlier VM a single call of 1 MiB or more was slower, and left the data
 *     slower for the peers to read (4 ranks on 2 CPUs, malloc AllReduce, 1 MiB 580-612 us with
 *     whole copies, 322-336 us in 256 KiB pieces; one thread, cached buffers: 1 MiB 48 -> 56 GB/s).
 *     Other copies go in pieces of at most HC_COPY_PIECE.
 */
#define HC_COPY_PIECE (256u * 1024u)
#define HC_COPY_NEAR 64u          /* destinations up to this far after the source (mod 4 KiB)... */
#define HC_COPY_NEAR_PIECE 1984u  /* ...are copied in pieces this large (glibc's least threshold: 2048) */

/* The largest piece hc_copy moves with one memcpy from src to dst. */
static inline size_t hc_copy_piece(const void *dst, const void *src)
{
    uintptr_t ahead = ((uintptr_t)dst - (uintptr_t)src) & 4095u;

    return ahead != 0 && ahead < HC_COPY_NEAR ? HC_COPY_NEAR_PIECE : HC_COPY_PIECE;
}

static inline void hc_copy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t piece = hc_copy_piece(dst, src);

    for (; n > piece; n -= piece, d += piece, s += piece)
        memcpy(d, s, piece);
    memcpy(d, s, n);
}

#endif
