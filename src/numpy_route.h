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
 * array must take the __dlpack__ route instead. With `user_types`, also an array of a user
 * type dli_numpy_register_user_type recorded (the exchange table's; the importer follows
 * NumPy's __dlpack__, which decides those). Never sets an exception. */
int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim, int user_types,
                   int* readonly);

/* Records DLPack's type code for NumPy's user type `type_num` (an ml_dtypes type whose
 * elements are whole bytes, as many bits as its item size), for dli_numpy_view's
 * `user_types` and the exchange table's view; 0, or -1 for a number out of range. */
int dli_numpy_register_user_type(int type_num, int code);

/* The NumPy exchange table's dltensor_from_py_object_no_sync (dl.exchange_api_for): a
 * non-owning view of `obj` filled as dli_numpy_view fills it, its shape and strides in a
 * block interned for the process (dli_layout_interned; a 0-d view's point at a static
 * zero). No Python call, no allocation once a layout has been seen. Everything else goes
 * to the function dli_numpy_set_view_otherwise gave, with a status: -1 when `obj` is no
 * numpy.ndarray (nor a subclass's instance), 1 when the array takes NumPy's __dlpack__
 * route, 2 when the interned layouts are full (the caller keeps a block for this array);
 * it returns 0, or -1 with an exception set. */
int dli_numpy_exchange_view(void* obj, DLTensor* out);
typedef int (*dli_numpy_view_otherwise_fn)(PyObject* obj, DLTensor* out, int status);
void dli_numpy_set_view_otherwise(dli_numpy_view_otherwise_fn otherwise);

/* 1 when `obj` is a numpy.ndarray or an instance of a subclass (NumPy's C API imported),
 * else 0. Never sets an exception. */
int dli_numpy_is_array(PyObject* obj);

/* A new exact numpy.ndarray viewing `t` as np.from_dlpack would make it (dtype, shape, byte
 * strides, writeable unless `readonly`), with `base` (a new reference taken here) keeping
 * the memory alive. NULL without an exception where NumPy's own from_dlpack must decide
 * (memory other than plain host memory, a dtype outside NumPy's builtin table, too many
 * dimensions); NULL with an exception where NumPy refused the array. */
PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base);

#endif
