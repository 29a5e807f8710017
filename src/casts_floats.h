/*
 * Rounding a double into the narrow float formats a cast writes: float16 and bfloat16 by
 * their bits, and the small float formats (DLPack codes 7 to 17) by a table of each
 * format's magnitudes that the caller fills from dlinterop._lib.minifloat (core/casts.pxi),
 * so that a cast rounds as dl.full does. Nearest, ties to even (e8m0's ties up).
 *
 * Part of casts.h (dlinterop/core/casts.pxi includes that).
 */
#ifndef DLINTEROP_CASTS_FLOATS_H_
#define DLINTEROP_CASTS_FLOATS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

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

#endif /* DLINTEROP_CASTS_FLOATS_H_ */
