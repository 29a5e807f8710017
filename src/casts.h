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
 * Included by dlinterop/core/casts.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_CASTS_H_
#define DLINTEROP_CASTS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dlpack/dlpack.h"
#include "runtime.h" /* DLI_MAX_NDIM */
#include "values.h"

/* What dli_cast found wrong with a value: nothing, NaN for an integer type, or a value out
   of the integer type's range (the infinities too). */
enum { DLI_CAST_OK = 0, DLI_CAST_NAN = 1, DLI_CAST_RANGE = 2 };

/* How a small float format (DLPack codes 7 to 17) encodes a double, as
   dlinterop._lib.minifloat.encode does: the magnitudes of its codes 0 to the largest finite
   one, in order, then the value where rounding overflows; the codes for NaN and for
   overflow by sign ([0] positive, [1] negative); its sign bit (0: none); and its kind. */
#define DLI_SMALL_FLOAT_MAX_CODES 257
enum { DLI_SMALL_FLOAT_PLAIN = 0, DLI_SMALL_FLOAT_FNUZ = 1, DLI_SMALL_FLOAT_E8M0 = 2 };
typedef struct {
  double magnitudes[DLI_SMALL_FLOAT_MAX_CODES];
  int count; /* entries in magnitudes: the last is the overflow value */
  uint8_t nan_code[2];
  uint8_t overflow_code[2];
  uint8_t sign_bit;
  uint8_t kind;
} dli_small_float_encoding;

/* x in a small float format, rounded to nearest (ties to even; e8m0's ties up). */
static inline unsigned dli_encode_small_float(const dli_small_float_encoding* f, double x) {
  int negative = signbit(x) != 0;
  if (x != x) return f->nan_code[negative];
  if (f->kind == DLI_SMALL_FLOAT_E8M0 && (negative || x == 0)) return f->nan_code[0];
  double a = fabs(x);
  int overflow = f->count - 1;
  int lo = 0, hi = f->count; /* the first magnitude >= a (bisect_left) */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (f->magnitudes[mid] < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  int code;
  if (lo > overflow) {
    code = overflow;
  } else if (lo == 0 || f->magnitudes[lo] == a) {
    code = lo;
  } else {
    double middle = (f->magnitudes[lo - 1] + f->magnitudes[lo]) / 2; /* exact: few bits */
    if (a < middle)
      code = lo - 1;
    else if (a > middle || f->kind == DLI_SMALL_FLOAT_E8M0)
      code = lo;
    else
      code = lo % 2 == 0 ? lo : lo - 1;
  }
  if (code == overflow) return f->overflow_code[negative];
  if (negative && (code != 0 || f->kind != DLI_SMALL_FLOAT_FNUZ)) code |= f->sign_bit;
  return (unsigned)code;
}

/* x rounded to float16 (nearest even; past 65504 to infinity; NaN keeps its sign and the
   top of its payload, as NumPy's conversion keeps them). */
static inline uint16_t dli_double_to_half(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  uint16_t sign = (uint16_t)((bits >> 48) & 0x8000u);
  int exponent = (int)((bits >> 52) & 0x7FF);
  uint64_t mantissa = bits & 0xFFFFFFFFFFFFFULL;
  if (exponent == 0x7FF) {
    uint16_t payload = (uint16_t)(mantissa >> 42);
    return (uint16_t)(sign | 0x7C00u | (mantissa == 0 ? 0 : payload ? payload : 1));
  }
  int e = exponent - 1023;
  if (e >= 16) return (uint16_t)(sign | 0x7C00u);
  if (e < -25) return sign; /* below half the smallest subnormal, 2**-25 */
  uint64_t significand = mantissa | (1ULL << 52);
  /* Bits to drop: to units of 2**-24 for a subnormal result, to 10 mantissa bits else. */
  int drop = e < -14 ? 28 - e : 42;
  uint64_t kept = significand >> drop;
  uint64_t rest = significand & ((1ULL << drop) - 1);
  uint64_t half = 1ULL << (drop - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  if (e < -14) return (uint16_t)(sign | kept); /* 0x400, the smallest normal, if it carried */
  /* kept includes the implicit bit: a carry to 0x800 moves into the exponent field. */
  uint32_t h = ((uint32_t)(e + 15) << 10) + (uint32_t)(kept - 0x400);
  return (uint16_t)(sign | (h >= 0x7C00u ? 0x7C00u : h));
}

/* x rounded to bfloat16 once, from its exact value, as ml_dtypes rounds a double (nearest
   even; NaN is the quiet NaN of its sign): rounded to odd into a float first, which keeps
   enough bits that the second rounding gives the first's answer. */
static inline uint16_t dli_double_to_bfloat16(double x) {
  if (x != x) return signbit(x) ? 0xFFC0u : 0x7FC0u;
  float f = (float)x;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((double)f != x && !isinf(x)) {
    if (fabs((double)f) > fabs(x)) --bits; /* rounded away from zero: step back */
    bits |= 1;                             /* inexact: odd */
  }
  bits += 0x7FFFu + ((bits >> 16) & 1);
  return (uint16_t)(bits >> 16);
}

/* The code of `bits` bits at bit position `bit` from base set to `code` (the other bits of
   the bytes it touches kept). */
static inline void dli_store_code(char* base, int64_t bit, int bits, unsigned code) {
  unsigned char* p = (unsigned char*)base + (bit >> 3);
  int shift = (int)(bit & 7);
  unsigned mask = (1u << bits) - 1u;
  p[0] = (unsigned char)((p[0] & ~(mask << shift)) | ((code & mask) << shift));
  if (shift + bits > 8) {
    int spill = 8 - shift;
    p[1] = (unsigned char)((p[1] & ~(mask >> spill)) | ((code & mask) >> spill));
  }
}

/* The value read as a double (an integer rounded once, to nearest). */
static inline double dli_scalar_real(dli_scalar_kind kind, const dli_scalar* v) {
  if (kind == DLI_SCALAR_REAL || kind == DLI_SCALAR_COMPLEX) return v->real;
  if (kind == DLI_SCALAR_UINT) return (double)v->unsigned_integer;
  return (double)v->integer;
}

/* The value read as a float, rounded once from the exact value. */
static inline float dli_scalar_float(dli_scalar_kind kind, const dli_scalar* v) {
  if (kind == DLI_SCALAR_REAL || kind == DLI_SCALAR_COMPLEX) return (float)v->real;
  if (kind == DLI_SCALAR_UINT) return (float)v->unsigned_integer;
  return (float)v->integer;
}

/* The value as the two's complement bits of an integer type of `bits` bits and signedness
   `is_signed`, in *out: DLI_CAST_OK, or what is wrong with a real value (*bad: it). */
static inline int dli_scalar_integer(dli_scalar_kind kind, const dli_scalar* v, int bits,
                                     int is_signed, uint64_t* out, double* bad) {
  if (kind == DLI_SCALAR_UINT) {
    *out = v->unsigned_integer;
    return DLI_CAST_OK;
  }
  if (kind != DLI_SCALAR_REAL && kind != DLI_SCALAR_COMPLEX) {
    *out = (uint64_t)v->integer;
    return DLI_CAST_OK;
  }
  double x = v->real;
  if (x != x) {
    *bad = x;
    return DLI_CAST_NAN;
  }
  double t = trunc(x);
  /* The range's bounds as doubles: exact (powers of two, or 2**bits - 1 below 64 bits). */
  double low = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
  double past = is_signed ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);
  if (!(t >= low && t < past)) {
    *bad = x;
    return DLI_CAST_RANGE;
  }
  *out = is_signed ? (uint64_t)(int64_t)t : (uint64_t)t;
  return DLI_CAST_OK;
}

/* Writes the value read (kind, *v) as element `at` (counted in elements from base; a
   packed sub-byte element at bit at * bits) of the one-lane type dt. */
static inline int dli_cast_store(char* base, int64_t at, DLDataType dt, int64_t itemsize,
                                 dli_scalar_kind kind, const dli_scalar* v,
                                 const dli_small_float_encoding* small_floats, double* bad) {
  char* p = base + at * itemsize;
  switch (dt.code) {
    case kDLBool: {
      int truth;
      if (kind == DLI_SCALAR_REAL)
        truth = v->real != 0;
      else if (kind == DLI_SCALAR_COMPLEX)
        truth = v->real != 0 || v->imag != 0;
      else if (kind == DLI_SCALAR_UINT)
        truth = v->unsigned_integer != 0;
      else
        truth = v->integer != 0;
      *p = (char)truth;
      return DLI_CAST_OK;
    }
    case kDLInt:
    case kDLUInt: {
      uint64_t u;
      int err = dli_scalar_integer(kind, v, dt.bits, dt.code == kDLInt, &u, bad);
      if (err) return err;
      switch (dt.bits) {
        case 8: *(uint8_t*)p = (uint8_t)u; break;
        case 16: {
          uint16_t x = (uint16_t)u;
          memcpy(p, &x, sizeof x);
          break;
        }
        case 32: {
          uint32_t x = (uint32_t)u;
          memcpy(p, &x, sizeof x);
          break;
        }
        case 64: memcpy(p, &u, sizeof u); break;
        default: dli_store_code(base, at * dt.bits, dt.bits, (unsigned)u);
      }
      return DLI_CAST_OK;
    }
    case kDLFloat:
      if (dt.bits == 16) {
        uint16_t h = dli_double_to_half(dli_scalar_real(kind, v));
        memcpy(p, &h, sizeof h);
      } else if (dt.bits == 32) {
        float f = dli_scalar_float(kind, v);
        memcpy(p, &f, sizeof f);
      } else {
        double d = dli_scalar_real(kind, v);
        memcpy(p, &d, sizeof d);
      }
      return DLI_CAST_OK;
    case kDLBfloat: {
      uint16_t h = dli_double_to_bfloat16(dli_scalar_real(kind, v));
      memcpy(p, &h, sizeof h);
      return DLI_CAST_OK;
    }
    case kDLComplex:
    case kDLBcomplex: {
      double imag = kind == DLI_SCALAR_COMPLEX ? v->imag : 0.0;
      if (dt.code == kDLBcomplex || dt.bits == 32) {
        uint16_t parts[2];
        int brain = dt.code == kDLBcomplex;
        double real = dli_scalar_real(kind, v);
        parts[0] = brain ? dli_double_to_bfloat16(real) : dli_double_to_half(real);
        parts[1] = brain ? dli_double_to_bfloat16(imag) : dli_double_to_half(imag);
        memcpy(p, parts, sizeof parts);
      } else if (dt.bits == 64) {
        float parts[2] = {dli_scalar_float(kind, v), (float)imag};
        memcpy(p, parts, sizeof parts);
      } else {
        double parts[2] = {dli_scalar_real(kind, v), imag};
        memcpy(p, parts, sizeof parts);
      }
      return DLI_CAST_OK;
    }
    default: break;
  }
  /* a small float format (the caller checked dli_table_bits) */
  unsigned code = dli_encode_small_float(small_floats + (dt.code - DLI_TABLE_FIRST_CODE),
                                         dli_scalar_real(kind, v));
  if (dt.bits == 8)
    *(uint8_t*)p = (uint8_t)code;
  else
    dli_store_code(base, at * dt.bits, dt.bits, code);
  return DLI_CAST_OK;
}

/* Reads element `at` (counted from base; packed sub-byte elements too) of the one-lane
   type dt into *v; `tables` are the small float formats' values (values.h). */
static inline dli_scalar_kind dli_cast_load(const char* base, int64_t at, DLDataType dt,
                                            int64_t itemsize, const double* tables, dli_scalar* v) {
  if (dt.bits < 8) {
    char code = (char)dli_code_at(base, at * dt.bits, dt.bits);
    return dli_scalar_at(dt, &code, tables, v);
  }
  return dli_scalar_at(dt, base + at * itemsize, tables, v);
}

/* Copies element `from` of src to element `to` of dst, both of type dt: its bits. */
static inline void dli_copy_element(const char* src, int64_t from, char* dst, int64_t to,
                                    DLDataType dt, int64_t itemsize) {
  int64_t bits = (int64_t)dt.bits * dt.lanes;
  if (bits < 8)
    dli_store_code(dst, to * bits, (int)bits, dli_code_at(src, from * bits, (int)bits));
  else
    memcpy(dst + to * itemsize, src + from * itemsize, (size_t)itemsize);
}

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
  int64_t sitem = ((int64_t)sdt.bits * sdt.lanes + 7) / 8;
  int64_t ditem = ((int64_t)ddt.bits * ddt.lanes + 7) / 8;
  for (int i = 0; i < ndim; ++i)
    if (shape[i] == 0) return DLI_CAST_OK;
  int inner = ndim - 1;
  int64_t n = ndim > 0 ? shape[inner] : 1;
  int64_t sstep = ndim > 0 ? sstrides[inner] : 0;
  int64_t dstep = ndim > 0 ? dstrides[inner] : 0;
  int source = dli_plain_index(sdt), target = dli_plain_index(ddt);
  int packed = (int64_t)sdt.bits * sdt.lanes < 8 || (int64_t)ddt.bits * ddt.lanes < 8;
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
