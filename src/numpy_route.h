/* The native NumPy import route (numpy_route.c); the core declares it in
 * dlinterop/core/numpy_route.pxi. */
#ifndef DLI_NUMPY_ROUTE_H
#define DLI_NUMPY_ROUTE_H

#include <Python.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

/* 1 when built against NumPy's headers. */
int dli_numpy_built(void);
/* Imports NumPy's C API (NumPy must already be imported); 0, or -1 with an exception. */
int dli_numpy_init(void);
/* Fills `out` (shape and strides in `storage`, 2 * ndim entries) from an exact
 * numpy.ndarray as NumPy's __dlpack__ would, and *readonly; 0 on success, 1 when the
 * array must take the __dlpack__ route instead. Never sets an exception. */
int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim, int* readonly);

/* 1 when `obj` is a numpy.ndarray or an instance of a subclass (NumPy's C API imported),
 * else 0. Never sets an exception. */
int dli_numpy_is_array(PyObject* obj);

/* A copy of layout[0:n] (a view's shape, then its strides) kept for the life of the
 * process, shared by every view with that layout: the exchange table's non-owning views
 * point into it, so they need no allocation and outlive their arrays. NULL once the table
 * of layouts is full (or out of memory), without an exception: the caller keeps its own
 * copy. Called with the GIL held, or any thread on a free-threaded build. */
const int64_t* dli_layout_interned(const int64_t* layout, int n);

/* A new exact numpy.ndarray viewing `t` as np.from_dlpack would make it (dtype, shape, byte
 * strides, writeable unless `readonly`), with `base` (a new reference taken here) keeping
 * the memory alive. NULL without an exception where NumPy's own from_dlpack must decide
 * (memory other than plain host memory, a dtype outside NumPy's builtin table, too many
 * dimensions); NULL with an exception where NumPy refused the array. */
PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base);

#endif
