/*
 * The elements of an array as nested or flat Python lists (values.h), over any shape and
 * strides, through a dli_reader: a row at a time, the common kinds without a switch per
 * element.
 */
#ifndef DLINTEROP_VALUES_LISTS_H_
#define DLINTEROP_VALUES_LISTS_H_

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "values_formats.h"
#include "values_reader.h"

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

#endif /* DLINTEROP_VALUES_LISTS_H_ */
