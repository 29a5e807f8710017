/*
 * One element of a cast: read from any data type as a number (values.h's dli_scalar_at;
 * packed sub-byte elements at any position too), written to any type by the rules casts.h
 * sets out, and copied bit for bit between two elements of one type; what a cast finds
 * wrong with a value (DLI_CAST_*).
 *
 * Part of casts.h (dlinterop/core/casts.pxi includes that).
 */
#ifndef DLINTEROP_CASTS_ELEMENTS_H_
#define DLINTEROP_CASTS_ELEMENTS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "casts_floats.h"
#include "dlpack/dlpack.h"
#include "dtype_bits.h"
#include "values.h"

/* What dli_cast found wrong with a value: nothing, NaN for an integer type, or a value out
   of the integer type's range (the infinities too). */
enum { DLI_CAST_OK = 0, DLI_CAST_NAN = 1, DLI_CAST_RANGE = 2 };

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
  if (dli_is_packed(dt)) {
    char code = (char)dli_code_at(base, at * dt.bits, dt.bits);
    return dli_scalar_at(dt, &code, tables, v);
  }
  return dli_scalar_at(dt, base + at * itemsize, tables, v);
}

/* Copies element `from` of src to element `to` of dst, both of type dt: its bits. */
static inline void dli_copy_element(const char* src, int64_t from, char* dst, int64_t to,
                                    DLDataType dt, int64_t itemsize) {
  int64_t bits = (int64_t)dt.bits * dt.lanes;
  if (dli_is_packed(dt))
    dli_store_code(dst, to * bits, (int)bits, dli_code_at(src, from * bits, (int)bits));
  else
    memcpy(dst + to * itemsize, src + from * itemsize, (size_t)itemsize);
}

#endif /* DLINTEROP_CASTS_ELEMENTS_H_ */
