/*
 * One element as a C number, without a reader (values.h): what item(), float(t), int(t),
 * bool(t) and operator.index(t) convert with no Python object in between.
 */
#ifndef DLINTEROP_VALUES_SCALARS_H_
#define DLINTEROP_VALUES_SCALARS_H_

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "dlpack/dlpack.h"

#include "values_formats.h"

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

#endif /* DLINTEROP_VALUES_SCALARS_H_ */
