/*
 * A Tensor's element values as Python objects, read in C: one element (a new bool, int,
 * float or complex; a tuple of its lanes for a vector type) and nested or flat lists of
 * the elements over any shape and strides (negative and zero ones too), straight from
 * host memory, with no contiguous copy; and one element as a C number (dli_scalar_at),
 * which float(t), int(t) and bool(t) convert without a Python object in between.
 *
 * Every DLPack data type dlinterop has is read here: the integer, float and complex types
 * by their C types; float16 widened to double below; bfloat16 as the top half of a
 * float32 (bcomplex32 as two); the float8, float6 and float4 formats through a table of
 * the double value of each code, which the caller fills (core/values.pxi fills them from
 * dlinterop._lib.minifloat's decode); the sub-byte integers from their two's complement
 * codes. Sub-byte types are packed, little bit-endian, as DLPack lays them out: lane i
 * (element e's lane j is lane e * lanes + j) lies in bits [i * bits, (i + 1) * bits)
 * from the element-0 address, which a view with negative strides reads below.
 *
 * Included by dlinterop/core/values.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_VALUES_H_
#define DLINTEROP_VALUES_H_

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack/dlpack.h"

/* How one lane is read. */
typedef enum {
  DLI_READ_BOOL,
  DLI_READ_INT8,
  DLI_READ_INT16,
  DLI_READ_INT32,
  DLI_READ_INT64,
  DLI_READ_UINT8,
  DLI_READ_UINT16,
  DLI_READ_UINT32,
  DLI_READ_UINT64,
  DLI_READ_FLOAT16,
  DLI_READ_FLOAT32,
  DLI_READ_FLOAT64,
  DLI_READ_BFLOAT16,
  DLI_READ_COMPLEX32, /* two float16: real, then imaginary */
  DLI_READ_COMPLEX64,
  DLI_READ_COMPLEX128,
  DLI_READ_BCOMPLEX32, /* two bfloat16 */
  DLI_READ_TABLE8,     /* a byte, its value from the table */
  DLI_READ_INT_BITS,   /* a packed two's complement code of fewer than 8 bits */
  DLI_READ_UINT_BITS,  /* a packed unsigned code of fewer than 8 bits */
  DLI_READ_TABLE_BITS, /* a packed code of fewer than 8 bits, its value from the table */
} dli_read_kind;

/* The small float formats with a table: DLPack's codes 7 (float8_e3m4) to 17
   (float4_e2m1fn), a table of DLI_TABLE_CODES doubles each (2**bits of them used). */
#define DLI_TABLE_FIRST_CODE kDLFloat8_e3m4
#define DLI_TABLE_FORMATS (kDLFloat4_e2m1fn - kDLFloat8_e3m4 + 1)
#define DLI_TABLE_CODES 256

typedef struct {
  dli_read_kind kind;
  int bits;               /* of one lane */
  int lanes;              /* lanes per element: a tuple of them when more than one */
  int64_t lane_bytes;     /* bytes per lane (bits / 8) for the kinds read by bytes */
  PyObject* const* table; /* the table kinds: each code's value, a float object */
} dli_reader;

/* The bits of the small float format of DLPack code `code` (8 for the float8 formats, 6
   for float6, 4 for float4), or 0 when it is none of them. */
static inline int dli_table_bits(uint8_t code) {
  if (code < kDLFloat8_e3m4 || code > kDLFloat4_e2m1fn) return 0;
  return code <= kDLFloat8_e8m0fnu ? 8 : code <= kDLFloat6_e3m2fn ? 6 : 4;
}

/* Puts in *r the reader of a data type: 1 when it is ready, 2 when it reads through a
   table of `tables` (DLI_TABLE_FORMATS tables of DLI_TABLE_CODES float objects each, in
   DLPack's code order, each element read as a new reference to one of them: making a
   float costs more than a reference), which must be filled before it is used; 0 (and *r
   untouched) for a type not read here. */
static inline int dli_reader_for(uint8_t code, uint8_t bits, uint16_t lanes,
                                 PyObject* const* tables, dli_reader* r) {
  int kind = -1;
  if (lanes == 0 || (lanes > 1 && (bits * lanes) % 8 != 0)) return 0;
  switch (code) {
    case kDLInt:
    case kDLUInt:
      switch (bits) {
        case 8: kind = code == kDLUInt ? DLI_READ_UINT8 : DLI_READ_INT8; break;
        case 16: kind = code == kDLUInt ? DLI_READ_UINT16 : DLI_READ_INT16; break;
        case 32: kind = code == kDLUInt ? DLI_READ_UINT32 : DLI_READ_INT32; break;
        case 64: kind = code == kDLUInt ? DLI_READ_UINT64 : DLI_READ_INT64; break;
        case 1:
        case 2:
        case 4: kind = code == kDLUInt ? DLI_READ_UINT_BITS : DLI_READ_INT_BITS; break;
      }
      break;
    case kDLFloat:
      if (bits == 16) kind = DLI_READ_FLOAT16;
      if (bits == 32) kind = DLI_READ_FLOAT32;
      if (bits == 64) kind = DLI_READ_FLOAT64;
      break;
    case kDLBfloat:
      if (bits == 16) kind = DLI_READ_BFLOAT16;
      break;
    case kDLComplex:
      if (bits == 32) kind = DLI_READ_COMPLEX32;
      if (bits == 64) kind = DLI_READ_COMPLEX64;
      if (bits == 128) kind = DLI_READ_COMPLEX128;
      break;
    case kDLBool:
      if (bits == 8) kind = DLI_READ_BOOL;
      break;
    case kDLBcomplex:
      if (bits == 32) kind = DLI_READ_BCOMPLEX32;
      break;
    default:
      if (bits == dli_table_bits(code)) kind = bits == 8 ? DLI_READ_TABLE8 : DLI_READ_TABLE_BITS;
  }
  if (kind < 0) return 0;
  r->kind = (dli_read_kind)kind;
  r->bits = bits;
  r->lanes = lanes;
  r->lane_bytes = bits / 8;
  r->table = NULL;
  if (kind == DLI_READ_TABLE8 || kind == DLI_READ_TABLE_BITS) {
    r->table = tables + (code - DLI_TABLE_FIRST_CODE) * DLI_TABLE_CODES;
    return 2;
  }
  return 1;
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

/* The lane at lane index `lane` from base (element e's lane j is lane e * lanes + j): a new
   reference, NULL with an exception set when it cannot be made. */
static inline PyObject* dli_read_lane(const dli_reader* r, const char* base, int64_t lane) {
  const char* p = base + lane * r->lane_bytes;
  switch (r->kind) {
    case DLI_READ_BOOL: return Py_NewRef(*p ? Py_True : Py_False);
    case DLI_READ_INT8: return PyLong_FromLong(*(const int8_t*)p);
    case DLI_READ_INT16: {
      int16_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(x);
    }
    case DLI_READ_INT32: {
      int32_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(x);
    }
    case DLI_READ_INT64: {
      int64_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLongLong(x);
    }
    case DLI_READ_UINT8: return PyLong_FromLong(*(const uint8_t*)p);
    case DLI_READ_UINT16: {
      uint16_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(x);
    }
    case DLI_READ_UINT32: {
      uint32_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLongLong(x);
    }
    case DLI_READ_UINT64: {
      uint64_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromUnsignedLongLong(x);
    }
    case DLI_READ_FLOAT16: {
      uint16_t x;
      memcpy(&x, p, sizeof x);
      return PyFloat_FromDouble(dli_half_to_double(x));
    }
    case DLI_READ_FLOAT32: {
      float x;
      memcpy(&x, p, sizeof x);
      return PyFloat_FromDouble(dli_float_to_double(x));
    }
    case DLI_READ_FLOAT64: {
      double x;
      memcpy(&x, p, sizeof x);
      return PyFloat_FromDouble(x);
    }
    case DLI_READ_BFLOAT16: {
      uint16_t x;
      memcpy(&x, p, sizeof x);
      return PyFloat_FromDouble(dli_bfloat16_to_double(x));
    }
    case DLI_READ_COMPLEX32: {
      uint16_t x[2];
      memcpy(x, p, sizeof x);
      return PyComplex_FromDoubles(dli_half_to_double(x[0]), dli_half_to_double(x[1]));
    }
    case DLI_READ_COMPLEX64: {
      float x[2];
      memcpy(x, p, sizeof x);
      return PyComplex_FromDoubles(dli_float_to_double(x[0]), dli_float_to_double(x[1]));
    }
    case DLI_READ_COMPLEX128: {
      double x[2];
      memcpy(x, p, sizeof x);
      return PyComplex_FromDoubles(x[0], x[1]);
    }
    case DLI_READ_BCOMPLEX32: {
      uint16_t x[2];
      memcpy(x, p, sizeof x);
      return PyComplex_FromDoubles(dli_bfloat16_to_double(x[0]), dli_bfloat16_to_double(x[1]));
    }
    case DLI_READ_TABLE8: return Py_NewRef(r->table[*(const uint8_t*)p]);
    case DLI_READ_INT_BITS: {
      long code = (long)dli_code_at(base, lane * r->bits, r->bits);
      return PyLong_FromLong(code >> (r->bits - 1) ? code - (1L << r->bits) : code);
    }
    case DLI_READ_UINT_BITS:
      return PyLong_FromLong((long)dli_code_at(base, lane * r->bits, r->bits));
    case DLI_READ_TABLE_BITS:
      return Py_NewRef(r->table[dli_code_at(base, lane * r->bits, r->bits)]);
  }
  PyErr_SetString(PyExc_SystemError, "dlinterop: an unknown value reader");
  return NULL;
}

/* Element `element` (counted in elements from base): its one lane, or a tuple of its lanes
   for a vector type. A new reference, or NULL with an exception set. */
static inline PyObject* dli_read_element(const dli_reader* r, const char* base, int64_t element) {
  if (r->lanes == 1) return dli_read_lane(r, base, element);
  PyObject* tuple = PyTuple_New(r->lanes);
  if (tuple == NULL) return NULL;
  for (int j = 0; j < r->lanes; ++j) {
    PyObject* value = dli_read_lane(r, base, element * r->lanes + j);
    if (value == NULL) {
      Py_DECREF(tuple);
      return NULL;
    }
    PyTuple_SET_ITEM(tuple, j, value);
  }
  return tuple;
}

/* Stores in list[at], list[at + 1], ... the n elements first, first + step, ... from base:
   0, or -1 with an exception set (the items not stored stay NULL, which a list's
   deallocation skips). The common kinds have a loop each, without a switch per element. */
static int dli_read_row(const dli_reader* r, const char* base, int64_t first, int64_t step,
                        Py_ssize_t n, PyObject* list, Py_ssize_t at) {
#define DLI_ROW(type, make) \
  for (Py_ssize_t i = 0; i < n; ++i) { \
    type x; \
    memcpy(&x, base + (first + i * step) * (int64_t)sizeof x, sizeof x); \
    PyObject* value = make; \
    if (value == NULL) return -1; \
    PyList_SET_ITEM(list, at + i, value); \
  } \
  return 0
/* The packed codes at bits first * bits, (first + step) * bits, ... from base, each
   `code` in turn: only the bytes a code touches are read (bits 6 may cross a byte). */
#define DLI_PACKED_ROW(make) \
  do { \
    const unsigned char* bytes = (const unsigned char*)base; \
    const unsigned mask = (1u << bits) - 1u; \
    int64_t bit = first * bits; \
    for (Py_ssize_t i = 0; i < n; ++i, bit += step * bits) { \
      int64_t byte = bit >> 3; /* arithmetic shift: floor division for negative bits */ \
      int shift = (int)(bit & 7); \
      unsigned code = (unsigned)bytes[byte] >> shift; \
      if (shift + bits > 8) code |= (unsigned)bytes[byte + 1] << (8 - shift); \
      code &= mask; \
      PyObject* value = make; \
      if (value == NULL) return -1; \
      PyList_SET_ITEM(list, at + i, value); \
    } \
    return 0; \
  } while (0)
  PyObject* const* table = r->table; /* in a register across the calls below */
  const int bits = r->bits;
  if (r->lanes == 1) {
    switch (r->kind) {
      case DLI_READ_BOOL: DLI_ROW(uint8_t, Py_NewRef(x ? Py_True : Py_False));
      case DLI_READ_INT8: DLI_ROW(int8_t, PyLong_FromLong(x));
      case DLI_READ_INT16: DLI_ROW(int16_t, PyLong_FromLong(x));
      case DLI_READ_INT32: DLI_ROW(int32_t, PyLong_FromLong(x));
      case DLI_READ_INT64: DLI_ROW(int64_t, PyLong_FromLongLong(x));
      case DLI_READ_UINT8: DLI_ROW(uint8_t, PyLong_FromLong(x));
      case DLI_READ_UINT16: DLI_ROW(uint16_t, PyLong_FromLong(x));
      case DLI_READ_UINT32: DLI_ROW(uint32_t, PyLong_FromLongLong(x));
      case DLI_READ_UINT64: DLI_ROW(uint64_t, PyLong_FromUnsignedLongLong(x));
      case DLI_READ_FLOAT16: DLI_ROW(uint16_t, PyFloat_FromDouble(dli_half_to_double(x)));
      case DLI_READ_FLOAT32: DLI_ROW(float, PyFloat_FromDouble(dli_float_to_double(x)));
      case DLI_READ_FLOAT64: DLI_ROW(double, PyFloat_FromDouble(x));
      case DLI_READ_BFLOAT16: DLI_ROW(uint16_t, PyFloat_FromDouble(dli_bfloat16_to_double(x)));
      case DLI_READ_TABLE8: DLI_ROW(uint8_t, Py_NewRef(table[x]));
      case DLI_READ_COMPLEX64:
        DLI_ROW(dli_complex64,
                PyComplex_FromDoubles(dli_float_to_double(x.real), dli_float_to_double(x.imag)));
      case DLI_READ_COMPLEX128: DLI_ROW(dli_complex128, PyComplex_FromDoubles(x.real, x.imag));
      case DLI_READ_TABLE_BITS: DLI_PACKED_ROW(Py_NewRef(table[code]));
      case DLI_READ_INT_BITS:
        DLI_PACKED_ROW(
            PyLong_FromLong(code >> (bits - 1) ? (long)code - (1L << bits) : (long)code));
      case DLI_READ_UINT_BITS: DLI_PACKED_ROW(PyLong_FromLong((long)code));
      default: break;
    }
  }
#undef DLI_ROW
#undef DLI_PACKED_ROW
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* value = dli_read_element(r, base, first + i * step);
    if (value == NULL) return -1;
    PyList_SET_ITEM(list, at + i, value);
  }
  return 0;
}

/* PyList_New(n) (its items NULL), or NULL with MemoryError. In a free-threaded build
   (3.13 at least) a PyList_New whose items cannot be allocated releases a half-made list
   and corrupts the interpreter's list free list, a crash later and elsewhere
   (python/cpython#118331, #152125); so there a list whose items could not be allocated
   is refused here, before PyList_New is asked: beyond what a Py_ssize_t can count, and,
   for a large one, when a trial allocation of its size fails. The trial is the C
   library's malloc, which refuses what the system's overcommit rule would not back; the
   free-threaded build's allocator (mimalloc) reserves any size and the list's clearing
   then runs the process out of memory. */
static PyObject* dli_list_new(Py_ssize_t n) {
#ifdef Py_GIL_DISABLED
  if (n > 0) {
    if ((size_t)n > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject*) - 4) return PyErr_NoMemory();
    if (n >= ((Py_ssize_t)1 << 16)) {
      void* trial = malloc((size_t)n * sizeof(PyObject*) + 4 * sizeof(PyObject*));
      if (trial == NULL) return PyErr_NoMemory();
      free(trial);
    }
  }
#endif
  return PyList_New(n);
}

/* Nested lists of the elements of the array at element `first` from base (ndim > 0; shape
   and strides in elements), in C order. A new reference, or NULL with an exception set:
   MemoryError at once for an extent too large to list, even one before an empty axis. */
static PyObject* dli_read_nested(const dli_reader* r, const char* base, int ndim,
                                 const int64_t* shape, const int64_t* strides, int64_t first) {
  PyObject* list = dli_list_new((Py_ssize_t)shape[0]);
  if (list == NULL) return NULL;
  if (ndim == 1) {
    if (dli_read_row(r, base, first, strides[0], (Py_ssize_t)shape[0], list, 0) < 0) {
      Py_DECREF(list);
      return NULL;
    }
    return list;
  }
  for (int64_t i = 0; i < shape[0]; ++i) {
    PyObject* inner =
        dli_read_nested(r, base, ndim - 1, shape + 1, strides + 1, first + i * strides[0]);
    if (inner == NULL) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, inner);
  }
  return list;
}

/* Stores the elements of the array at element `first` from base (ndim > 0), in C order,
   in list[*at], list[*at + 1], ... (advancing *at): 0, or -1 with an exception set. */
static int dli_read_flat(const dli_reader* r, const char* base, int ndim, const int64_t* shape,
                         const int64_t* strides, int64_t first, PyObject* list, Py_ssize_t* at) {
  if (ndim == 1) {
    if (dli_read_row(r, base, first, strides[0], (Py_ssize_t)shape[0], list, *at) < 0) return -1;
    *at += (Py_ssize_t)shape[0];
    return 0;
  }
  for (int64_t i = 0; i < shape[0]; ++i)
    if (dli_read_flat(r, base, ndim - 1, shape + 1, strides + 1, first + i * strides[0], list, at) <
        0)
      return -1;
  return 0;
}

/* -- one element as a number, without a reader: item(), float(t), int(t), bool(t) ... -- */

/* What dli_scalar_at read. */
typedef enum {
  DLI_SCALAR_NONE,    /* nothing: the type is read through a dli_reader */
  DLI_SCALAR_BOOL,    /* integer: 0 or 1 */
  DLI_SCALAR_INT,     /* integer */
  DLI_SCALAR_UINT,    /* unsigned_integer */
  DLI_SCALAR_REAL,    /* real */
  DLI_SCALAR_COMPLEX, /* real, imag */
} dli_scalar_kind;

typedef struct {
  int64_t integer;
  uint64_t unsigned_integer;
  double real;
  double imag;
} dli_scalar;

/* The element at p (a packed sub-byte one at bit 0 of p) of a type of one lane, read into
   *out: what it read, or DLI_SCALAR_NONE for a vector type, a type not read here, or a
   small float format when `tables` (as dli_reader_for's, filled) is NULL. */
static inline dli_scalar_kind dli_scalar_at(DLDataType dt, const char* p, const double* tables,
                                            dli_scalar* out) {
  if (dt.lanes != 1) return DLI_SCALAR_NONE;
  switch (dt.code) {
    case kDLInt:
      switch (dt.bits) {
        case 8: out->integer = *(const int8_t*)p; return DLI_SCALAR_INT;
        case 16: {
          int16_t x;
          memcpy(&x, p, sizeof x);
          out->integer = x;
          return DLI_SCALAR_INT;
        }
        case 32: {
          int32_t x;
          memcpy(&x, p, sizeof x);
          out->integer = x;
          return DLI_SCALAR_INT;
        }
        case 64: memcpy(&out->integer, p, sizeof out->integer); return DLI_SCALAR_INT;
        case 1:
        case 2:
        case 4: {
          int64_t code = *(const uint8_t*)p & ((1 << dt.bits) - 1);
          out->integer = code >> (dt.bits - 1) ? code - ((int64_t)1 << dt.bits) : code;
          return DLI_SCALAR_INT;
        }
      }
      return DLI_SCALAR_NONE;
    case kDLUInt:
      switch (dt.bits) {
        case 8: out->integer = *(const uint8_t*)p; return DLI_SCALAR_INT;
        case 16: {
          uint16_t x;
          memcpy(&x, p, sizeof x);
          out->integer = x;
          return DLI_SCALAR_INT;
        }
        case 32: {
          uint32_t x;
          memcpy(&x, p, sizeof x);
          out->integer = x;
          return DLI_SCALAR_INT;
        }
        case 64:
          memcpy(&out->unsigned_integer, p, sizeof out->unsigned_integer);
          return DLI_SCALAR_UINT;
        case 1:
        case 2:
        case 4: out->integer = *(const uint8_t*)p & ((1 << dt.bits) - 1); return DLI_SCALAR_INT;
      }
      return DLI_SCALAR_NONE;
    case kDLFloat:
      switch (dt.bits) {
        case 16: {
          uint16_t x;
          memcpy(&x, p, sizeof x);
          out->real = dli_half_to_double(x);
          return DLI_SCALAR_REAL;
        }
        case 32: {
          float x;
          memcpy(&x, p, sizeof x);
          out->real = dli_float_to_double(x);
          return DLI_SCALAR_REAL;
        }
        case 64: memcpy(&out->real, p, sizeof out->real); return DLI_SCALAR_REAL;
      }
      return DLI_SCALAR_NONE;
    case kDLBool:
      if (dt.bits != 8) return DLI_SCALAR_NONE;
      out->integer = *p != 0;
      return DLI_SCALAR_BOOL;
    case kDLBfloat: {
      uint16_t x;
      if (dt.bits != 16) return DLI_SCALAR_NONE;
      memcpy(&x, p, sizeof x);
      out->real = dli_bfloat16_to_double(x);
      return DLI_SCALAR_REAL;
    }
    case kDLComplex:
      switch (dt.bits) {
        case 32: {
          uint16_t x[2];
          memcpy(x, p, sizeof x);
          out->real = dli_half_to_double(x[0]);
          out->imag = dli_half_to_double(x[1]);
          return DLI_SCALAR_COMPLEX;
        }
        case 64: {
          float x[2];
          memcpy(x, p, sizeof x);
          out->real = dli_float_to_double(x[0]);
          out->imag = dli_float_to_double(x[1]);
          return DLI_SCALAR_COMPLEX;
        }
        case 128: {
          double x[2];
          memcpy(x, p, sizeof x);
          out->real = x[0];
          out->imag = x[1];
          return DLI_SCALAR_COMPLEX;
        }
      }
      return DLI_SCALAR_NONE;
    case kDLBcomplex: {
      uint16_t x[2];
      if (dt.bits != 32) return DLI_SCALAR_NONE;
      memcpy(x, p, sizeof x);
      out->real = dli_bfloat16_to_double(x[0]);
      out->imag = dli_bfloat16_to_double(x[1]);
      return DLI_SCALAR_COMPLEX;
    }
    default: break;
  }
  if (tables != NULL && dt.bits == dli_table_bits(dt.code)) {
    unsigned code = *(const uint8_t*)p & ((1u << dt.bits) - 1u);
    out->real = tables[(dt.code - DLI_TABLE_FIRST_CODE) * DLI_TABLE_CODES + code];
    return DLI_SCALAR_REAL;
  }
  return DLI_SCALAR_NONE;
}

/* The Python object of what dli_scalar_at read (not DLI_SCALAR_NONE): a new reference, or
   NULL with an exception set. */
static inline PyObject* dli_scalar_object(dli_scalar_kind kind, const dli_scalar* x) {
  switch (kind) {
    case DLI_SCALAR_BOOL: return Py_NewRef(x->integer ? Py_True : Py_False);
    case DLI_SCALAR_INT: return PyLong_FromLongLong(x->integer);
    case DLI_SCALAR_UINT: return PyLong_FromUnsignedLongLong(x->unsigned_integer);
    case DLI_SCALAR_REAL: return PyFloat_FromDouble(x->real);
    case DLI_SCALAR_COMPLEX: return PyComplex_FromDoubles(x->real, x->imag);
    default: break;
  }
  PyErr_SetString(PyExc_SystemError, "dlinterop: no value was read");
  return NULL;
}

/* The int of the element at p (a packed sub-byte one at bit 0 of p) of an integer type
   (kDLInt or kDLUInt) of one lane: operator.index(t). A new reference, or NULL with an
   exception set. */
static inline PyObject* dli_int_at(DLDataType dt, const char* p) {
  int is_signed = dt.code == kDLInt;
  switch (dt.bits) {
    case 8: return PyLong_FromLong(is_signed ? (long)*(const int8_t*)p : (long)*(const uint8_t*)p);
    case 16: {
      uint16_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(is_signed ? (long)(int16_t)x : (long)x);
    }
    case 32: {
      uint32_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLongLong(is_signed ? (long long)(int32_t)x : (long long)x);
    }
    case 64: {
      uint64_t x;
      memcpy(&x, p, sizeof x);
      return is_signed ? PyLong_FromLongLong((long long)x) : PyLong_FromUnsignedLongLong(x);
    }
    case 1:
    case 2:
    case 4: {
      long code = *(const uint8_t*)p & ((1 << dt.bits) - 1);
      return PyLong_FromLong(is_signed && code >> (dt.bits - 1) ? code - (1L << dt.bits) : code);
    }
  }
  PyErr_SetString(PyExc_SystemError, "dlinterop: not an integer type");
  return NULL;
}

#endif /* DLINTEROP_VALUES_H_ */
