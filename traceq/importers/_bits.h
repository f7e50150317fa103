/*
 * traceq/importers/_bits.h: what the compiled readers take from the compiler beyond C11, in one place.
 *
 * - TQ_SSE2: 1 where the 16-byte SSE2 loops may be used (GCC and Clang say so with __SSE2__; MSVC
 *   has SSE2 on every x64 target and says so with _M_X64 or _M_IX86_FP >= 2); 0 elsewhere (ARM,
 *   an old x86), where the byte-by-byte loops beside them run instead.
 * - TQ_PAGE_MOVES: 1 where pages may be moved with Linux's mremap; elsewhere move_pages() answers
 *   "not moved" and the caller copies.
 * - Bit scans and counts (tq_ctz32, tq_clz32, tq_ctz64, tq_clz64 of a value that is never 0;
 *   tq_popcount8): the GCC/Clang builtins, MSVC's intrinsics, or plain C.
 *
 * TRACEQ_PORTABLE (TRACEQ_PORTABLE_C=1 at build time, see setup.py) turns all three to the plain-C
 * choices, so that the paths an ARM or a non-Linux build takes are built and tested on Linux x86.
 */
#ifndef TRACEQ_BITS_H
#define TRACEQ_BITS_H

#include <stdint.h>

#if !defined(TRACEQ_PORTABLE) && (defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#define TQ_SSE2 1
#include <emmintrin.h>
#else
#define TQ_SSE2 0
#endif

#if !defined(TRACEQ_PORTABLE) && defined(__linux__)
#define TQ_PAGE_MOVES 1
#else
#define TQ_PAGE_MOVES 0
#endif

#if !defined(TRACEQ_PORTABLE) && (defined(__GNUC__) || defined(__clang__))
static inline unsigned tq_ctz32(uint32_t x) { return (unsigned)__builtin_ctz(x); }
static inline unsigned tq_clz32(uint32_t x) { return (unsigned)__builtin_clz(x); }
static inline unsigned tq_ctz64(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
static inline unsigned tq_clz64(uint64_t x) { return (unsigned)__builtin_clzll(x); }
static inline unsigned tq_popcount8(uint8_t x) { return (unsigned)__builtin_popcount(x); }
#elif !defined(TRACEQ_PORTABLE) && defined(_MSC_VER) && (defined(_M_X64) || defined(_M_ARM64))
#include <intrin.h>
static inline unsigned tq_ctz32(uint32_t x) {
    unsigned long i;
    _BitScanForward(&i, x);
    return (unsigned)i;
}
static inline unsigned tq_clz32(uint32_t x) {
    unsigned long i;
    _BitScanReverse(&i, x);
    return 31u - (unsigned)i;
}
static inline unsigned tq_ctz64(uint64_t x) {
    unsigned long i;
    _BitScanForward64(&i, x);
    return (unsigned)i;
}
static inline unsigned tq_clz64(uint64_t x) {
    unsigned long i;
    _BitScanReverse64(&i, x);
    return 63u - (unsigned)i;
}
/* (__popcnt needs the POPCNT instruction, which not every x64 CPU has) */
static inline unsigned tq_popcount8(uint8_t x) {
    x = (uint8_t)(x - ((x >> 1) & 0x55u));
    x = (uint8_t)((x & 0x33u) + ((x >> 2) & 0x33u));
    return (unsigned)((x + (x >> 4)) & 0x0Fu);
}
#else
static inline unsigned tq_ctz64(uint64_t x) {
    unsigned n = 0;
    while (n < 64 && !(x & 1u)) {
        x >>= 1;
        n++;
    }
    return n;
}
static inline unsigned tq_clz64(uint64_t x) {
    unsigned n = 0;
    while (n < 64 && !(x & (UINT64_C(1) << 63))) {
        x <<= 1;
        n++;
    }
    return n;
}
static inline unsigned tq_ctz32(uint32_t x) { return x ? tq_ctz64(x) : 32u; }
static inline unsigned tq_clz32(uint32_t x) { return x ? tq_clz64(x) - 32u : 32u; }
static inline unsigned tq_popcount8(uint8_t x) {
    x = (uint8_t)(x - ((x >> 1) & 0x55u));
    x = (uint8_t)((x & 0x33u) + ((x >> 2) & 0x33u));
    return (unsigned)((x + (x >> 4)) & 0x0Fu);
}
#endif

#endif /* TRACEQ_BITS_H */
