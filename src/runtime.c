#include "runtime.h"

#include <Python.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "dlpack/dlpack.h"
#include "dtype_bits.h"
#include "memory_limits.h"
#include "sanitizer.h"

/* Each update a locked instruction on every allocation and free: as few as the counters
 * allow. live_buffers is total_allocations less total_frees, both only ever growing. */
static _Atomic int64_t total_allocations;
static _Atomic int64_t total_frees;
static _Atomic int64_t live_bytes;
static _Atomic int64_t peak_bytes;

void dli_stats_allocated(size_t nbytes) {
  atomic_fetch_add_explicit(&total_allocations, 1, memory_order_relaxed);
  int64_t now = atomic_fetch_add_explicit(&live_bytes, (int64_t)nbytes, memory_order_relaxed) +
                (int64_t)nbytes;
  int64_t peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
  while (now > peak && !atomic_compare_exchange_weak_explicit(
                           &peak_bytes, &peak, now, memory_order_relaxed, memory_order_relaxed)) {
  }
}

void dli_stats_freed(size_t nbytes) {
  /* Release: a reader that sees this free sees its allocation counted too. */
  atomic_fetch_add_explicit(&total_frees, 1, memory_order_release);
  atomic_fetch_sub_explicit(&live_bytes, (int64_t)nbytes, memory_order_relaxed);
}

/* The sanitizer's sides of dli_host_alloc and dli_host_free, out of line (and marked cold)
 * so that the usual paths stay as short as they are without it: pages of its own, which it
 * can make inaccessible on release (NULL / 0: not the sanitizer's, go on as usual). */
static __attribute__((noinline, cold)) void* sanitized_alloc(size_t nbytes, size_t alignment,
                                                             int zero, void** base_out) {
  if (!dli_san_recording()) return NULL;
  void* data = dli_san_host_alloc(nbytes, alignment, zero, base_out);
  if (data != NULL) dli_stats_allocated(nbytes);
  return data;
}

static __attribute__((noinline, cold)) int sanitized_free(void* base, size_t nbytes) {
  if (!dli_san_host_free(base, nbytes)) return 0;
  dli_stats_freed(nbytes);
  return 1;
}

void* dli_host_alloc(size_t nbytes, size_t alignment, int zero, void** base_out) {
  /* Over-allocate and align by hand rather than posix_memalign: calloc keeps the lazily
   * zeroed pages the kernel hands out for large blocks, which is what makes np.zeros cheap,
   * and one code path serves both. */
  size_t total = nbytes + alignment;
  if (total < nbytes) return NULL;
  /* What can never fit is refused here, not by malloc: where the kernel overcommits (or a
   * cgroup's limit is below the machine's), malloc grants any size, and touching the pages
   * then ends this process, or another the OOM killer picks. */
  if ((uint64_t)nbytes >= DLI_MEMORY_CHECK_FROM && (uint64_t)nbytes > dli_memory_ceiling()) {
    return NULL;
  }
  if (dli_san_on()) {
    void* data = sanitized_alloc(nbytes, alignment, zero, base_out);
    if (data != NULL) return data;
  }
  /* calloc's gain is pages fresh from the kernel, which are zero already: a block of the
   * size malloc maps on its own (128 KiB at least). Below that it clears the whole block
   * from the heap, and slower than malloc and a memset of the bytes asked for (glibc's
   * calloc skips its per-thread cache). */
  int lazy_zero = zero && total >= ((size_t)128 << 10);
  void* base = lazy_zero ? calloc(1, total) : malloc(total);
  if (base == NULL) return NULL;
  uintptr_t addr = ((uintptr_t)base + alignment - 1) & ~((uintptr_t)alignment - 1);
  if (zero && !lazy_zero) memset((void*)addr, 0, nbytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  /* As NumPy does for its arrays from 4 MiB: ask for transparent huge pages where the
   * kernel gives them on request only (fewer TLB misses: hashing, copying or sending a
   * large buffer ran about 25% slower without). Advice only: a kernel that refuses changes
   * nothing. */
  if (nbytes >= ((size_t)1 << 22)) {
    uintptr_t start = ((uintptr_t)base + 4095) & ~(uintptr_t)4095;
    uintptr_t end = ((uintptr_t)base + total) & ~(uintptr_t)4095;
    if (end > start) madvise((void*)start, end - start, MADV_HUGEPAGE);
  }
#endif
  *base_out = base;
  dli_stats_allocated(nbytes);
  return (void*)addr;
}

void dli_host_free(void* base, size_t nbytes) {
  if (base == NULL) return;
  if (dli_san_on() && sanitized_free(base, nbytes)) return;
  free(base);
  dli_stats_freed(nbytes);
}

void dli_stats_read(dli_stats* out) {
  /* The frees first: each counted free has its allocation counted before it, so that
   * live_buffers is never negative while other threads allocate and free. */
  int64_t frees = atomic_load(&total_frees);
  out->total_allocations = atomic_load(&total_allocations);
  out->live_buffers = out->total_allocations - frees;
  out->live_bytes = atomic_load(&live_bytes);
  out->peak_bytes = atomic_load(&peak_bytes);
}

int dli_interpreter_alive(void) {
  if (!Py_IsInitialized()) return 0;
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsFinalizing();
#else
  return !_Py_IsFinalizing();
#endif
}

static void copy_dim(char* dst, const char* src, int dim, int ndim, const int64_t* shape,
                     const int64_t* strides, size_t itemsize, char** dst_end) {
  int64_t n = shape[dim];
  ptrdiff_t step = (ptrdiff_t)((uint64_t)strides[dim] * itemsize); /* wraps only where n <= 1 */
  if (dim == ndim - 1) {
    if (step == (ptrdiff_t)itemsize) {
      memcpy(dst, src, (size_t)n * itemsize);
    } else {
      /* A constant size lets the compiler turn each memcpy into one load and store. */
      switch (itemsize) {
#define DLI_GATHER(SIZE) \
  case SIZE: \
    for (int64_t i = 0; i < n; ++i) memcpy(dst + i * SIZE, src + i * step, SIZE); \
    break;
        DLI_GATHER(1)
        DLI_GATHER(2)
        DLI_GATHER(4)
        DLI_GATHER(8)
        DLI_GATHER(16)
#undef DLI_GATHER
        default:
          for (int64_t i = 0; i < n; ++i) memcpy(dst + i * itemsize, src + i * step, itemsize);
      }
    }
    *dst_end = dst + n * itemsize;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    copy_dim(dst, src + i * step, dim + 1, ndim, shape, strides, itemsize, &dst);
  }
  *dst_end = dst;
}

void dli_copy_to_contiguous(char* dst, const char* src, int ndim, const int64_t* shape,
                            const int64_t* strides, size_t itemsize) {
  int64_t count = 1;
  for (int i = 0; i < ndim; ++i) count *= shape[i];
  if (count == 0) return;
  if (ndim == 0) {
    memcpy(dst, src, itemsize);
    return;
  }
  /* Merge trailing C-contiguous dimensions into one so that the common cases (contiguous,
   * row slices) become a single memcpy per outer index. */
  int last = ndim - 1;
  int64_t expected = 1;
  while (last >= 0 && (shape[last] == 1 || strides[last] == expected)) {
    expected *= shape[last];
    --last;
  }
  if (last < 0) {
    memcpy(dst, src, (size_t)count * itemsize);
    return;
  }
  if (expected == 1) {
    char* end;
    copy_dim(dst, src, 0, ndim, shape, strides, itemsize, &end);
    return;
  }
  /* ndim is at most DLI_MAX_NDIM (checked on import and creation). */
  int64_t merged_shape[DLI_MAX_NDIM + 1], merged_strides[DLI_MAX_NDIM + 1];
  for (int i = 0; i <= last; ++i) {
    merged_shape[i] = shape[i];
    merged_strides[i] = strides[i];
  }
  merged_shape[last + 1] = expected;
  merged_strides[last + 1] = 1;
  char* end;
  copy_dim(dst, src, 0, last + 2, merged_shape, merged_strides, itemsize, &end);
}

/* Stores `words` copies of the 8-byte `word` at dst. */
static void fill_words(char* dst, uint64_t word, size_t words) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  /* The string store: as fast as memset on large fills (no read of the lines it writes),
   * where the vector loop below, at the baseline instruction set, ran about 1.5x slower
   * on 4 MiB. */
  __asm__ volatile("rep stosq" : "+D"(dst), "+c"(words) : "a"(word) : "memory");
#else
  for (size_t i = 0; i < words; ++i) memcpy(dst + 8 * i, &word, 8);
#endif
}

void dli_fill(char* dst, const char* pattern, size_t itemsize, int64_t count) {
  if (count <= 0) return;
  int all_zero = 1;
  for (size_t i = 0; i < itemsize; ++i) all_zero &= pattern[i] == 0;
  size_t total = (size_t)count * itemsize;
  if (all_zero || itemsize == 1) {
    memset(dst, pattern[0], total);
    return;
  }
  if (itemsize == 2 || itemsize == 4 || itemsize == 8 || itemsize == 16) {
    /* A block of whole items, stored by constant-size copies (vector stores): each byte
     * is written once, where the doubling copies below read back what they wrote. */
    enum { BLOCK = 64 };
    char block[BLOCK];
    for (size_t i = 0; i < BLOCK; i += itemsize) memcpy(block + i, pattern, itemsize);
    size_t done = 0;
    if (itemsize <= 8 && total >= 512) {
      uint64_t word;
      memcpy(&word, block, 8);
      fill_words(dst, word, total / 8);
      done = total - total % 8;
    }
    for (; done + BLOCK <= total; done += BLOCK) memcpy(dst + done, block, BLOCK);
    memcpy(dst + done, block, total - done); /* whole items, fewer than BLOCK bytes */
    return;
  }
  memcpy(dst, pattern, itemsize);
  /* Any other pattern (a packed sub-byte period of 3 bytes): doubling copies, log2(count)
   * memcpy calls. */
  size_t done = itemsize;
  while (done < total) {
    size_t chunk = done < total - done ? done : total - done;
    memcpy(dst + done, dst, chunk);
    done += chunk;
  }
}

/* The `bits`-bit code starting at bit `bit` of base (bit may be negative: a view with
 * negative strides reads below its element 0). Reads only the bytes the code touches. */
static inline unsigned read_code(const uint8_t* base, int64_t bit, int bits) {
  int64_t byte = bit >> 3; /* arithmetic shift: floor division for negative bit positions */
  int shift = (int)(bit & 7);
  unsigned code = (unsigned)base[byte] >> shift;
  if (shift + bits > 8) code |= (unsigned)base[byte + 1] << (8 - shift);
  return code & ((1u << bits) - 1u);
}

void dli_pack_codes(uint8_t* dst, const uint8_t* src, int ndim, const int64_t* shape,
                    const int64_t* strides, int bits, int src_step) {
  int64_t count = 1;
  for (int i = 0; i < ndim; ++i) count *= shape[i];
  memset(dst, 0, (size_t)dli_bytes_of_bits(count * bits));
  if (count == 0) return;
  int64_t index[DLI_MAX_NDIM] = {0};
  int64_t element = 0; /* in source elements from element 0 */
  int64_t out = 0;     /* in bits into dst */
  for (int64_t n = 0; n < count; ++n) {
    unsigned code = read_code(src, element * src_step, bits);
    dst[out >> 3] |= (uint8_t)(code << (out & 7));
    if ((out & 7) + bits > 8) dst[(out >> 3) + 1] |= (uint8_t)(code >> (8 - (out & 7)));
    out += bits;
    /* Next index in C order (an odometer over the axes). */
    for (int axis = ndim - 1; axis >= 0; --axis) {
      if (++index[axis] < shape[axis]) {
        element += strides[axis];
        break;
      }
      element -= strides[axis] * (shape[axis] - 1);
      index[axis] = 0;
    }
  }
}

void dli_unpack_codes(uint8_t* dst, const uint8_t* src, int64_t count, int bits) {
  for (int64_t i = 0; i < count; ++i) dst[i] = (uint8_t)read_code(src, i * bits, bits);
}

void dli_arange_int(void* dst, int code, int bits, int64_t start, int64_t step, int64_t count) {
#define DLI_ARANGE(TYPE) \
  for (int64_t i = 0; i < count; ++i) ((TYPE*)dst)[i] = (TYPE)(start + i * step);
  if (code == kDLFloat && bits == 64) {
    DLI_ARANGE(double)
  } else if (code == kDLFloat) {
    /* Through double, as Python's int goes to float32: rounded twice. */
    for (int64_t i = 0; i < count; ++i) ((float*)dst)[i] = (float)(double)(start + i * step);
  } else if (bits == 8) {
    if (code == kDLInt) {
      DLI_ARANGE(int8_t)
    } else {
      DLI_ARANGE(uint8_t)
    }
  } else if (bits == 16) {
    if (code == kDLInt) {
      DLI_ARANGE(int16_t)
    } else {
      DLI_ARANGE(uint16_t)
    }
  } else if (bits == 32) {
    if (code == kDLInt) {
      DLI_ARANGE(int32_t)
    } else {
      DLI_ARANGE(uint32_t)
    }
  } else {
    DLI_ARANGE(int64_t) /* int64, or uint64 of values from 0 up: the same bits */
  }
#undef DLI_ARANGE
}

void dli_arange_double(void* dst, int bits, double start, double step, int64_t count) {
  /* Two roundings, the product's and the sum's, as Python's start + i * step rounds: this
   * file is compiled without contracting them into one fused multiply-add. */
  if (bits == 64) {
    for (int64_t i = 0; i < count; ++i) ((double*)dst)[i] = start + (double)i * step;
  } else {
    for (int64_t i = 0; i < count; ++i) ((float*)dst)[i] = (float)(start + (double)i * step);
  }
}
