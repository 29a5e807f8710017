/*
 * dlinterop's C runtime: the host allocator with its counters, the interpreter-liveness
 * check deleters need, and the strided copy kernel. Plain C so that it can be called
 * without the GIL from any thread.
 */
#ifndef DLINTEROP_RUNTIME_H_
#define DLINTEROP_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

/* The most dimensions dlinterop handles. DLPack sets no limit; this one bounds stack arrays
   and rejects garbage (dlinterop/_lib/rules.pxd's MAX_NDIM is this). */
#define DLI_MAX_NDIM 64

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int64_t live_buffers;
  int64_t live_bytes;
  int64_t peak_bytes;
  int64_t total_allocations;
} dli_stats;

/* Returns memory aligned to `alignment` (a power of two) holding at least `nbytes`
 * (never NULL for nbytes == 0), zero-filled when `zero` is set; *base_out receives the
 * pointer to pass to dli_host_free. NULL when out of memory, or when nbytes is more than
 * this process could ever have (dli_memory_ceiling, memory_limits.h). */
void* dli_host_alloc(size_t nbytes, size_t alignment, int zero, void** base_out);
void dli_host_free(void* base, size_t nbytes);

void dli_stats_read(dli_stats* out);

/* Counts a buffer of nbytes made (or freed) by another of dlinterop's allocators (the
   shared-memory segments), so that dl.memory_stats() sees every buffer dlinterop holds. */
void dli_stats_allocated(size_t nbytes);
void dli_stats_freed(size_t nbytes);

/* 1 when the interpreter can run Python code (initialised and not finalising). */
int dli_interpreter_alive(void);

/* Copies an n-d strided array (strides in elements, any sign) into a C-contiguous
 * destination. itemsize in bytes. */
void dli_copy_to_contiguous(char* dst, const char* src, int ndim, const int64_t* shape,
                            const int64_t* strides, size_t itemsize);

/* Packs an n-d array of `bits`-bit codes (1 <= bits <= 7) into dst in C order, little
 * bit-endian, as DLPack lays out packed sub-byte data: element i of dst lies in bits
 * [i * bits, (i + 1) * bits). Each source element starts at bit
 * (sum of index * stride) * src_step from src (strides in elements, any sign): src_step is
 * `bits` for packed data and 8 for padded data (one element in the low bits of each
 * byte; the high bits are ignored). dst must hold ceil(count * bits / 8) bytes; the
 * bits past the last element are zero. */
void dli_pack_codes(uint8_t* dst, const uint8_t* src, int ndim, const int64_t* shape,
                    const int64_t* strides, int bits, int src_step);

/* The inverse for a C-contiguous packed array: writes `count` codes one per byte, in the
 * low bits with the high bits zero, as ml_dtypes' sub-byte types hold them in NumPy (and
 * as DLPack's padded layout does). */
void dli_unpack_codes(uint8_t* dst, const uint8_t* src, int64_t count, int bits);

/* Fills a contiguous buffer with `count` copies of the `itemsize`-byte pattern. */
void dli_fill(char* dst, const char* pattern, size_t itemsize, int64_t count);

/* dl.arange's values: dst[i] = start + i * step for i < count, as elements of DLPack type
 * (code, bits), one lane: kDLInt or kDLUInt of 8 to 64 bits, or kDLFloat of 32 or 64 bits
 * (converted as a cast converts, through double for float32). The caller checks that every
 * value fits int64 and the type. */
void dli_arange_int(void* dst, int code, int bits, int64_t start, int64_t step, int64_t count);

/* The same in floating point, float32 (bits 32, each value rounded from double) or float64:
 * start + (double)i * step, rounded after the product and after the sum as Python rounds. */
void dli_arange_double(void* dst, int bits, double start, double step, int64_t count);

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_RUNTIME_H_ */
