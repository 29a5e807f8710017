/*
 * The number formats the value readers decode (values.h): a float16, float32 or bfloat16
 * bit pattern as a double, the small float formats' tables (their codes and bits), a packed
 * sub-byte code, and the complex pairs' C layouts.
 */
#ifndef DLINTEROP_VALUES_FORMATS_H_
#define DLINTEROP_VALUES_FORMATS_H_

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "dlpack/dlpack.h"

/* The small float formats with a table: DLPack's codes 7 (float8_e3m4) to 17
   (float4_e2m1fn), a table of DLI_TABLE_CODES doubles each (2**bits of them used). */
#define DLI_TABLE_FIRST_CODE kDLFloat8_e3m4
#define DLI_TABLE_FORMATS (kDLFloat4_e2m1fn - kDLFloat8_e3m4 + 1)
#define DLI_TABLE_CODES 256

/* The bits of the small float format of DLPack code `code` (8 for the float8 formats, 6
   for float6, 4 for float4), or 0 when it is none of them. */
static inline int dli_table_bits(uint8_t code) {
  if (code < kDLFloat8_e3m4 || code > kDLFloat4_e2m1fn) return 0;
  return code <= kDLFloat8_e8m0fnu ? 8 : code <= kDLFloat6_e3m2fn ? 6 : 4;
}

/* NaN is read as CPython's struct module reads it (the reader in Python,
   dlinterop/_lib/values.py, reads through it): its sign always, its payload where that
   version of CPython keeps it. Every other value converts exactly, without a call. */
#if PY_VERSION_HEX >= 0x030B0000
#define DLI_UNPACK2(p) PyFloat_Unpack2((const char*)(p), 1)
#define DLI_UNPACK4(p) PyFloat_Unpack4((const char*)(p), 1)
#else /* public from 3.11 */
#define DLI_UNPACK2(p) _PyFloat_Unpack2((const unsigned char*)(p), 1)
#define DLI_UNPACK4(p) _PyFloat_Unpack4((const unsigned char*)(p), 1)
#endif

/* float16's value as a double: zero keeps its sign, subnormals are mantissa * 2**-24. */
static inline double dli_half_to_double(uint16_t h) {
  uint64_t sign = (uint64_t)(h >> 15) << 63;
  uint64_t exponent = (h >> 10) & 0x1F;
  uint64_t mantissa = h & 0x3FF;
  uint64_t bits;
  double value;
  if (exponent == 0) {
    value = (double)mantissa * 5.9604644775390625e-08; /* 2**-24 */
    return sign ? -value : value;
  }
  if (exponent == 0x1F && mantissa != 0) {
    unsigned char little[2] = {(unsigned char)h, (unsigned char)(h >> 8)};
    return DLI_UNPACK2(little);
  }
  if (exponent == 0x1F)
    bits = sign | 0x7FF0000000000000ULL; /* inf */
  else
    bits = sign | ((exponent + 1008) << 52) | (mantissa << 42); /* 1008 = 1023 - 15 */
  memcpy(&value, &bits, sizeof value);
  return value;
}

/* float32's value as a double. */
static inline double dli_float_to_double(float x) {
  if (x != x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    unsigned char little[4] = {(unsigned char)bits, (unsigned char)(bits >> 8),
                               (unsigned char)(bits >> 16), (unsigned char)(bits >> 24)};
    return DLI_UNPACK4(little);
  }
  return x;
}

/* bfloat16's value: the top half of a float32's bit pattern. */
static inline double dli_bfloat16_to_double(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float value;
  memcpy(&value, &bits, sizeof value);
  return dli_float_to_double(value);
}

/* The `bits`-bit code at bit `bit` (negative too) from base; only the bytes it touches are
   read. */
static inline unsigned dli_code_at(const char* base, int64_t bit, int bits) {
  int64_t byte = bit >> 3; /* arithmetic shift: floor division for negative positions */
  int shift = (int)(bit & 7);
  const unsigned char* p = (const unsigned char*)base + byte;
  unsigned code = (unsigned)p[0] >> shift;
  if (shift + bits > 8) code |= (unsigned)p[1] << (8 - shift);
  return code & ((1u << bits) - 1u);
}

typedef struct {
  float real, imag;
} dli_complex64;
typedef struct {
  double real, imag;
} dli_complex128;

#endif /* DLINTEROP_VALUES_FORMATS_H_ */
