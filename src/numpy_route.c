/* The native import route for exact numpy.ndarray objects: the array read through NumPy's
 * public C API, with no Python call, as NumPy's own __dlpack__ would describe it.
 *
 * Built against NumPy's headers when the build finds them (DLI_HAVE_NUMPY); otherwise every
 * function reports the route as absent. NumPy's C API is imported lazily, by dli_numpy_init,
 * which the core calls only once `numpy` is in sys.modules: dlinterop never imports NumPy.
 */
#include "numpy_route.h"

#include <string.h>

#include "device_kinds.h"
#include "layouts_interned.h"
#include "runtime.h" /* DLI_MAX_NDIM */

static dli_numpy_view_otherwise_fn view_otherwise;

void dli_numpy_set_view_otherwise(dli_numpy_view_otherwise_fn otherwise) {
  view_otherwise = otherwise;
}

#ifdef DLI_HAVE_NUMPY

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#include <numpy/arrayobject.h>

int dli_numpy_built(void) { return 1; }

int dli_numpy_init(void) {
  if (PyArray_ImportNumPyAPI() < 0) {
    return -1;
  }
  return 0;
}

int dli_numpy_is_array(PyObject* obj) { return PyArray_Check(obj) ? 1 : 0; }

/* DLPack's code for the builtin NumPy types whose __dlpack__ export is unconditional;
 * -1 for the rest (long double, user types such as ml_dtypes', structured, object, ...),
 * which take the __dlpack__ route and so get exactly NumPy's answer. */
static int dl_code_of(int type_num) {
  switch (type_num) {
    case NPY_BOOL: return kDLBool;
    case NPY_BYTE:
    case NPY_SHORT:
    case NPY_INT:
    case NPY_LONG:
    case NPY_LONGLONG: return kDLInt;
    case NPY_UBYTE:
    case NPY_USHORT:
    case NPY_UINT:
    case NPY_ULONG:
    case NPY_ULONGLONG: return kDLUInt;
    case NPY_HALF:
    case NPY_FLOAT:
    case NPY_DOUBLE: return kDLFloat;
    case NPY_CFLOAT:
    case NPY_CDOUBLE: return kDLComplex;
    default: return -1;
  }
}

/* DLPack's codes for NumPy's user types (ml_dtypes' bfloat16, float8s, ...) that
 * dli_numpy_register_user_type recorded, by type number from NPY_USERDEF: the code plus
 * one, 0 for a type not recorded. Written with the GIL held (or, free-threaded, by any
 * thread: one byte, the same answer whoever writes it). */
#define USER_TYPES 128
static uint8_t user_codes[USER_TYPES];

static inline int user_code_of(int type_num) {
  if (type_num < NPY_USERDEF || type_num >= NPY_USERDEF + USER_TYPES) {
    return -1;
  }
  return (int)__atomic_load_n(&user_codes[type_num - NPY_USERDEF], __ATOMIC_RELAXED) - 1;
}

int dli_numpy_register_user_type(int type_num, int code) {
  if (type_num < NPY_USERDEF || type_num >= NPY_USERDEF + USER_TYPES || code < 0 || code > 254) {
    return -1;
  }
  __atomic_store_n(&user_codes[type_num - NPY_USERDEF], (uint8_t)(code + 1), __ATOMIC_RELAXED);
  return 0;
}

/* What dli_numpy_view and the exchange table's view share: the checks, then `out` filled
 * but for its shape and strides; 0, or 1 where NumPy's own export decides. Every type
 * dl_code_of takes has a power-of-two size, so *shift and *mask turn byte strides that are
 * whole items into element strides without a division (tens of cycles, where the view
 * takes a few in all): element_stride. */
static inline __attribute__((always_inline)) int numpy_header(PyArrayObject* array, DLTensor* out,
                                                              int max_ndim, int user_types,
                                                              int* shift, npy_intp* mask) {
  PyArray_Descr* descr = PyArray_DESCR(array);
  PyObject* base;
  npy_intp itemsize, size, *shape, *strides;
  int ndim = PyArray_NDIM(array);
  int code = dl_code_of(descr->type_num);
  int i;

  if (code < 0 && user_types) {
    code = user_code_of(descr->type_num);
  }

  if (code < 0 || ndim > max_ndim || PyDataType_ISBYTESWAPPED(descr)) {
    return 1; /* NumPy's own export decides (and raises its own error) */
  }
  /* An array made by np.from_dlpack reports its capsule's device: leave it to NumPy. */
  base = PyArray_BASE(array);
  while (base != NULL && PyArray_Check(base)) {
    base = PyArray_BASE((PyArrayObject*)base);
  }
  if (base != NULL && PyCapsule_CheckExact(base)) {
    return 1;
  }
  itemsize = PyArray_ITEMSIZE(array);
  *shift = __builtin_ctzll((unsigned long long)itemsize);
  *mask = itemsize - 1;
  if (!PyArray_IS_C_CONTIGUOUS(array)) {
    shape = PyArray_SHAPE(array);
    strides = PyArray_STRIDES(array);
    size = 1; /* PyArray_SIZE, without its call */
    for (i = 0; i < ndim; i++) {
      size *= shape[i];
    }
    for (i = 0; i < ndim && size != 1; i++) {
      if (shape[i] != 1 && (strides[i] & *mask) != 0) {
        return 1; /* NumPy refuses these strides with its BufferError */
      }
    }
  }
  out->data = PyArray_DATA(array);
  out->device.device_type = kDLCPU;
  out->device.device_id = 0;
  out->ndim = ndim;
  out->dtype.code = (uint8_t)code;
  out->dtype.bits = (uint8_t)(8 * itemsize);
  out->dtype.lanes = 1;
  out->byte_offset = 0;
  return 0;
}

/* A byte stride in elements, as NumPy divides: toward zero (a shift where the stride is
 * whole items, exact for negative ones too; a division for the odd stride of a length-1
 * axis). */
static inline int64_t element_stride(npy_intp stride, int shift, npy_intp mask) {
  return (stride & mask) == 0 ? stride >> shift : stride / (mask + 1);
}

int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim, int user_types,
                   int* readonly) {
  PyArrayObject* array = (PyArrayObject*)obj;
  npy_intp mask, *shape, *strides;
  int shift, i, ndim;
  if (numpy_header(array, out, max_ndim, user_types, &shift, &mask) != 0) {
    return 1;
  }
  ndim = out->ndim;
  shape = PyArray_SHAPE(array);
  strides = PyArray_STRIDES(array);
  out->shape = ndim > 0 ? storage : NULL;
  out->strides = ndim > 0 ? storage + ndim : NULL;
  for (i = 0; i < ndim; i++) {
    storage[i] = shape[i];
    storage[ndim + i] = element_stride(strides[i], shift, mask);
  }
  *readonly = !PyArray_CHKFLAGS(array, NPY_ARRAY_WRITEABLE);
  return 0;
}

static int64_t no_dims[1]; /* shape and strides of a 0-d view: filled, never NULL */

/* The exchange table's view: dli_numpy_exchange_view's status. The array's layout is
 * compared first with the block found last, read straight from the array; only a
 * different layout is written out and looked up. */
static inline __attribute__((always_inline)) int table_view(PyObject* obj, DLTensor* out) {
  int64_t storage[2 * DLI_MAX_NDIM];
  PyArrayObject* array = (PyArrayObject*)obj;
  const int64_t* kept;
  npy_intp mask, *shape, *strides;
  int shift, i, ndim;
  if (!PyArray_Check(obj)) {
    return -1;
  }
  if (numpy_header(array, out, DLI_MAX_NDIM, 1, &shift, &mask) != 0) {
    return 1;
  }
  ndim = out->ndim;
  if (ndim == 0) {
    out->shape = out->strides = no_dims;
    return 0;
  }
  shape = PyArray_SHAPE(array);
  strides = PyArray_STRIDES(array);
  kept = dli_layout_last();
  if (kept != NULL && kept[0] == 2 * ndim) {
    for (i = 0; i < ndim; i++) {
      if (kept[1 + i] != shape[i] ||
          kept[1 + ndim + i] != element_stride(strides[i], shift, mask)) {
        break;
      }
    }
    if (i == ndim) {
      out->shape = (int64_t*)kept + 1;
      out->strides = (int64_t*)kept + 1 + ndim;
      return 0;
    }
  }
  for (i = 0; i < ndim; i++) {
    storage[i] = shape[i];
    storage[ndim + i] = element_stride(strides[i], shift, mask);
  }
  kept = dli_layout_interned(storage, 2 * ndim);
  if (kept == NULL) {
    return 2;
  }
  out->shape = (int64_t*)kept;
  out->strides = (int64_t*)kept + ndim;
  return 0;
}

int dli_numpy_exchange_view(void* obj, DLTensor* out) {
  int status = table_view((PyObject*)obj, out);
  return status == 0 ? 0 : view_otherwise((PyObject*)obj, out, status);
}

/* NumPy's type for a DLPack dtype, as its from_dlpack maps them; -1 for the rest. */
static int type_num_of(DLDataType dt) {
  if (dt.lanes != 1) {
    return -1;
  }
  switch (dt.code) {
    case kDLBool: return dt.bits == 8 ? NPY_BOOL : -1;
    case kDLInt:
      switch (dt.bits) {
        case 8: return NPY_INT8;
        case 16: return NPY_INT16;
        case 32: return NPY_INT32;
        case 64: return NPY_INT64;
      }
      return -1;
    case kDLUInt:
      switch (dt.bits) {
        case 8: return NPY_UINT8;
        case 16: return NPY_UINT16;
        case 32: return NPY_UINT32;
        case 64: return NPY_UINT64;
      }
      return -1;
    case kDLFloat:
      switch (dt.bits) {
        case 16: return NPY_FLOAT16;
        case 32: return NPY_FLOAT32;
        case 64: return NPY_FLOAT64;
      }
      return -1;
    case kDLComplex:
      switch (dt.bits) {
        case 64: return NPY_COMPLEX64;
        case 128: return NPY_COMPLEX128;
      }
      return -1;
    default: return -1;
  }
}

PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base) {
  npy_intp shape[NPY_MAXDIMS], strides[NPY_MAXDIMS];
  PyArray_Descr* descr;
  PyObject* array;
  npy_intp itemsize;
  int type_num = type_num_of(t->dtype);
  int i;

  /* Plain host memory only (src/device_kinds.h): an array from np.from_dlpack reports a
   * pinned or managed capsule's device through its base, so those stay with NumPy, as do
   * dtypes and ranks its table does not have. */
  if (type_num < 0 || !dli_device_host(t->device.device_type) || t->ndim < 0 ||
      t->ndim > NPY_MAXDIMS) {
    return NULL;
  }
  descr = PyArray_DescrFromType(type_num);
  if (descr == NULL) {
    return NULL;
  }
  itemsize = PyDataType_ELSIZE(descr);
  for (i = 0; i < t->ndim; i++) {
    shape[i] = (npy_intp)t->shape[i];
    if (t->strides != NULL) {
      strides[i] = (npy_intp)t->strides[i] * itemsize;
    }
  }
  /* PyArray_NewFromDescr steals descr, on failure too. */
  array = PyArray_NewFromDescr(&PyArray_Type, descr, t->ndim, shape,
                               t->strides != NULL ? strides : NULL, (char*)t->data + t->byte_offset,
                               readonly ? 0 : NPY_ARRAY_WRITEABLE, NULL);
  if (array == NULL) {
    return NULL;
  }
  Py_INCREF(base);
  if (PyArray_SetBaseObject((PyArrayObject*)array, base) < 0) { /* steals base */
    Py_DECREF(array);
    return NULL;
  }
  return array;
}

#else /* built without NumPy's headers: the route is absent */

int dli_numpy_built(void) { return 0; }

int dli_numpy_init(void) {
  PyErr_SetString(PyExc_ImportError, "dlinterop was built without NumPy's headers");
  return -1;
}

int dli_numpy_is_array(PyObject* obj) {
  (void)obj;
  return 0;
}

int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim, int user_types,
                   int* readonly) {
  (void)obj;
  (void)out;
  (void)storage;
  (void)max_ndim;
  (void)user_types;
  (void)readonly;
  return 1;
}

int dli_numpy_register_user_type(int type_num, int code) {
  (void)type_num;
  (void)code;
  return -1;
}

int dli_numpy_exchange_view(void* obj, DLTensor* out) {
  return view_otherwise((PyObject*)obj, out, -1);
}

PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base) {
  (void)t;
  (void)readonly;
  (void)base;
  return NULL;
}

#endif
