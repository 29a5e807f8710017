/*
 * The reader of one data type (values.h): what dli_reader_for chooses for a DLPack type,
 * and the lane and the element it reads as a Python object.
 */
#ifndef DLINTEROP_VALUES_READER_H_
#define DLINTEROP_VALUES_READER_H_

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "dlpack/dlpack.h"

#include "values_formats.h"

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

typedef struct {
  dli_read_kind kind;
  int bits;               /* of one lane */
  int lanes;              /* lanes per element: a tuple of them when more than one */
  int64_t lane_bytes;     /* bytes per lane (bits / 8) for the kinds read by bytes */
  PyObject* const* table; /* the table kinds: each code's value, a float object */
} dli_reader;

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

#endif /* DLINTEROP_VALUES_READER_H_ */
