/*
 * Element-wise casts between data types, in C, without the GIL: every element of a
 * strided source (negative and zero strides too, packed sub-byte types at any element) is
 * read as a number (values.h's dli_scalar_at), converted by NumPy's casting rules, and
 * written to a strided destination. These rules are NumPy's astype (and ml_dtypes' for
 * its types), not dl.full's rules for Python values (core/encoding.pxi):
 *
 *   - integer to integer wraps, two's complement (int64 300 is int8 44), sub-byte ones too;
 *   - a real value to an integer is truncated toward zero; NaN, the infinities and values
 *     out of the integer type's range are refused (DLI_CAST_NAN, DLI_CAST_RANGE), where
 *     NumPy gives values that depend on the machine, with a RuntimeWarning;
 *   - to a float type: rounded to nearest even, once, from the exact value (int64 to
 *     float32 directly, not through a double; float64 to float16 and bfloat16 directly, as
 *     NumPy and ml_dtypes round), past the range to infinity, or to what each small float
 *     format does there (dli_small_float_encoding, filled from dlinterop._lib.minifloat);
 *   - complex to real keeps the real part (the caller warns, as NumPy does);
 *   - to bool: non-zero (NaN too) is true.
 *
 * A cast to the same type copies the bits (NaN payloads included). NaN keeps its sign in
 * every cast; its payload is not promised.
 *
 * The parts, each one concern: casts_floats.h (a double rounded into the narrow float
 * formats), casts_elements.h (one element read, written or copied); here, the rows
 * between the plain C types without a switch per element, and the cast of a whole
 * strided array, row by row.
 *
 * Included by dlinterop/core/casts.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_CASTS_H_
#define DLINTEROP_CASTS_H_

#include <stdint.h>
#include <string.h>

#include "casts_elements.h"
#include "dlpack/dlpack.h"
#include "dtype_bits.h"
#include "runtime.h" /* DLI_MAX_NDIM */

/* -- rows between the plain C types, without a switch per element ---------------------- */

/* The plain types (bool, the integers of 8 to 64 bits, float32, float64), each with its
   index, its C type, its kind and, for the integers, the bounds of a real value's
   truncation, [LOW, PAST), as doubles (exact: powers of two). Two copies of the list, so
   that one can expand inside the other. */
#define DLI_PLAIN_SOURCES(M) \
  M(0, uint8_t, BOOL) \
  M(1, int8_t, INT) \
  M(2, int16_t, INT) \
  M(3, int32_t, INT) \
  M(4, int64_t, INT) \
  M(5, uint8_t, INT) \
  M(6, uint16_t, INT) \
  M(7, uint32_t, INT) \
  M(8, uint64_t, INT) \
  M(9, float, REAL) \
  M(10, double, REAL)
#define DLI_PLAIN_TARGETS(M, S, SK) \
  M(S, SK, 0, uint8_t, BOOL, 0, 0) \
  M(S, SK, 1, int8_t, INT, -0x1p7, 0x1p7) \
  M(S, SK, 2, int16_t, INT, -0x1p15, 0x1p15) \
  M(S, SK, 3, int32_t, INT, -0x1p31, 0x1p31) \
  M(S, SK, 4, int64_t, INT, -0x1p63, 0x1p63) \
  M(S, SK, 5, uint8_t, INT, 0.0, 0x1p8) \
  M(S, SK, 6, uint16_t, INT, 0.0, 0x1p16) \
  M(S, SK, 7, uint32_t, INT, 0.0, 0x1p32) \
  M(S, SK, 8, uint64_t, INT, 0.0, 0x1p64) \
  M(S, SK, 9, float, REAL, 0, 0) \
  M(S, SK, 10, double, REAL, 0, 0)

/* The index of a plain type, or -1. */
static inline int dli_plain_index(DLDataType dt) {
  if (dt.lanes != 1) return -1;
  int at = dt.bits == 8 ? 0 : dt.bits == 16 ? 1 : dt.bits == 32 ? 2 : dt.bits == 64 ? 3 : -1;
  if (at < 0) return -1;
  if (dt.code == kDLInt) return 1 + at;
  if (dt.code == kDLUInt) return 5 + at;
  if (dt.code == kDLBool) return at == 0 ? 0 : -1;
  if (dt.code == kDLFloat && at >= 2) return 7 + at;
  return -1;
}

/* x (of source kind SK) as y (of type D, kind DK): the rules above, for plain types. */
#define DLI_CONVERT_BOOL_BOOL(D, LOW, PAST) y = (D)(x != 0);
#define DLI_CONVERT_INT_BOOL(D, LOW, PAST) y = (D)(x != 0);
#define DLI_CONVERT_REAL_BOOL(D, LOW, PAST) y = (D)(x != 0);
#define DLI_CONVERT_BOOL_INT(D, LOW, PAST) y = (D)(x != 0);
#define DLI_CONVERT_INT_INT(D, LOW, PAST) y = (D)x; /* wraps: GCC's and Clang's rule */
#define DLI_CONVERT_BOOL_REAL(D, LOW, PAST) y = (D)(x != 0);
#define DLI_CONVERT_INT_REAL(D, LOW, PAST) y = (D)x; /* rounded once, to nearest */
#define DLI_CONVERT_REAL_REAL(D, LOW, PAST) y = (D)x;
/* In range when its truncation is: above LOW - 1 (exact below 64 bits; LOW itself, a
   power of two, for int64, where LOW - 1 rounds to LOW) and below PAST. NaN fails both.
   (A first pass over the row without a branch is no faster: GCC does not vectorize
   comparisons of doubles in a reduction, since they may trap.) */
#define DLI_CONVERT_REAL_INT(D, LOW, PAST) \
  { \
    double r = (double)x; \
    if (!((r > (LOW) - 1.0 || r == (LOW)) && r < (PAST))) { \
      *bad = r; \
      return r != r ? DLI_CAST_NAN : DLI_CAST_RANGE; \
    } \
    y = (D)r; /* truncated toward zero, as C converts */ \
  }

/* One row of S into D, the steps SSTEP and DSTEP in bytes: constants where both rows are
   contiguous, so that the compiler vectorizes the loops. */
#define DLI_PLAIN_ROW(S, SK, D, DK, LOW, PAST, SSTEP, DSTEP) \
  for (int64_t i = 0; i < n; ++i) { \
    S x; \
    D y; \
    memcpy(&x, src + i * (SSTEP), sizeof x); \
    DLI_CONVERT_##SK##_##DK(D, LOW, PAST) memcpy(dst + i * (DSTEP), &y, sizeof y); \
  }

#define DLI_TARGET_CASE(S, SK, DI, D, DK, LOW, PAST) \
  case DI: \
    if (sstep == sizeof(S) && dstep == sizeof(D)) { \
      DLI_PLAIN_ROW(S, SK, D, DK, LOW, PAST, (int64_t)sizeof(S), (int64_t)sizeof(D)) \
    } else { \
      DLI_PLAIN_ROW(S, SK, D, DK, LOW, PAST, sstep, dstep) \
    } \
    return DLI_CAST_OK;
#define DLI_SOURCE_CASE(SI, S, SK) \
  case SI: \
    switch (target) { \
      DLI_PLAIN_TARGETS(DLI_TARGET_CASE, S, SK) \
      default: break; \
    } \
    break;

/* Casts the n elements src, src + sstep, ... (steps in bytes) of plain type `source` into
   dst, dst + dstep, ... of plain type `target`: dli_cast's answer for them. */
static int dli_cast_plain_row(const char* src, int64_t sstep, int source, char* dst, int64_t dstep,
                              int target, int64_t n, double* bad) {
  switch (source) {
    DLI_PLAIN_SOURCES(DLI_SOURCE_CASE)
    default: break;
  }
  return DLI_CAST_OK; /* not reached: the caller passes plain indices */
}

/* Copies the n elements src, src + sstep, ... (steps in bytes) of `itemsize` bytes to dst,
   dst + dstep, ...: one move where both are contiguous, else by the item's size. */
static void dli_copy_row(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t itemsize,
                         int64_t n) {
#define DLI_COPY_ROW(SIZE) \
  for (int64_t i = 0; i < n; ++i) memcpy(dst + i * dstep, src + i * sstep, SIZE); \
  return
  if (sstep == itemsize && dstep == itemsize) {
    memmove(dst, src, (size_t)(n * itemsize));
    return;
  }
  switch (itemsize) {
    case 1: DLI_COPY_ROW(1);
    case 2: DLI_COPY_ROW(2);
    case 4: DLI_COPY_ROW(4);
    case 8: DLI_COPY_ROW(8);
    case 16: DLI_COPY_ROW(16);
    default: DLI_COPY_ROW((size_t)itemsize);
  }
#undef DLI_COPY_ROW
}

/* Casts the elements of src (type sdt, strides in elements; element 0 at element
   `src_first` from src) into dst (type ddt, its own strides, element 0 at `dst_first`),
   over `shape`, in C order. Same types copy bits (any lanes); otherwise both are of one
   lane and each has a reader (values.h) and a writer above, which the caller checked.
   DLI_CAST_OK, or what was wrong (and *bad, the value), the elements before it written.
   The two must not overlap unless they are the same elements. */
static int dli_cast(const char* src, int64_t src_first, DLDataType sdt, const int64_t* sstrides,
                    char* dst, int64_t dst_first, DLDataType ddt, const int64_t* dstrides, int ndim,
                    const int64_t* shape, const double* tables,
                    const dli_small_float_encoding* small_floats, double* bad) {
  int64_t index[DLI_MAX_NDIM] = {0};
  int same = sdt.code == ddt.code && sdt.bits == ddt.bits && sdt.lanes == ddt.lanes;
  int64_t sitem = dli_item_bytes(sdt);
  int64_t ditem = dli_item_bytes(ddt);
  for (int i = 0; i < ndim; ++i)
    if (shape[i] == 0) return DLI_CAST_OK;
  int inner = ndim - 1;
  int64_t n = ndim > 0 ? shape[inner] : 1;
  int64_t sstep = ndim > 0 ? sstrides[inner] : 0;
  int64_t dstep = ndim > 0 ? dstrides[inner] : 0;
  int source = dli_plain_index(sdt), target = dli_plain_index(ddt);
  int packed = dli_is_packed(sdt) || dli_is_packed(ddt);
  int64_t s = src_first, d = dst_first;
  for (;;) {
    if (same && !packed) {
      dli_copy_row(src + s * sitem, sstep * sitem, dst + d * ditem, dstep * ditem, sitem, n);
    } else if (same) {
      for (int64_t i = 0; i < n; ++i)
        dli_copy_element(src, s + i * sstep, dst, d + i * dstep, sdt, sitem);
    } else if (source >= 0 && target >= 0) {
      int err = dli_cast_plain_row(src + s * sitem, sstep * sitem, source, dst + d * ditem,
                                   dstep * ditem, target, n, bad);
      if (err) return err;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        dli_scalar v;
        dli_scalar_kind kind = dli_cast_load(src, s + i * sstep, sdt, sitem, tables, &v);
        int err = dli_cast_store(dst, d + i * dstep, ddt, ditem, kind, &v, small_floats, bad);
        if (err) return err;
      }
    }
    /* Next row in C order (an odometer over the outer axes). */
    int axis = inner - 1;
    for (; axis >= 0; --axis) {
      if (++index[axis] < shape[axis]) {
        s += sstrides[axis];
        d += dstrides[axis];
        break;
      }
      s -= sstrides[axis] * (shape[axis] - 1);
      d -= dstrides[axis] * (shape[axis] - 1);
      index[axis] = 0;
    }
    if (axis < 0) return DLI_CAST_OK;
  }
}

#endif /* DLINTEROP_CASTS_H_ */
