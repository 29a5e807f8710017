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
#include "threadsafe.h" /* DLI_FREE_THREADED */

/* The interned layouts: open addressing over a fixed table, probed linearly for at most
 * LAYOUT_PROBES slots. A slot goes from NULL to its block once and never back, so a
 * search may stop at the first NULL and read slots without a lock; blocks are published
 * with release stores (under the GIL, which orders them already, plain ones). A block is
 * {n, layout[0..n-1]}. At most LAYOUT_SLOTS blocks of (1 + 2 * 64) int64 (about 4 MiB)
 * however many arrays come and go: only distinct layouts take one. */
#define LAYOUT_SLOTS 4096
#define LAYOUT_PROBES 16

static int64_t* layout_slots[LAYOUT_SLOTS];

#if DLI_FREE_THREADED
static PyMutex layout_lock;
#define LAYOUT_LOAD(slot) __atomic_load_n(slot, __ATOMIC_ACQUIRE)
#define LAYOUT_STORE(slot, block) __atomic_store_n(slot, block, __ATOMIC_RELEASE)
#else
#define LAYOUT_LOAD(slot) (*(int64_t* volatile*)(slot))
#define LAYOUT_STORE(slot, block) (*(int64_t* volatile*)(slot) = (block))
#endif

/* The block holding layout[0:n] among the probed slots, or NULL with *empty the first
 * NULL slot (LAYOUT_SLOTS when every probed slot is taken). */
static const int64_t* layout_find(const int64_t* layout, int n, size_t* empty) {
  uint64_t hash = 1469598103934665603ULL ^ (uint64_t)n; /* FNV-1a over the values */
  int i;
  for (i = 0; i < n; i++) {
    hash = (hash ^ (uint64_t)layout[i]) * 1099511628211ULL;
  }
  for (i = 0; i < LAYOUT_PROBES; i++) {
    size_t slot = (size_t)((hash + (uint64_t)i) % LAYOUT_SLOTS);
    int64_t* block = LAYOUT_LOAD(&layout_slots[slot]);
    if (block == NULL) {
      *empty = slot;
      return NULL;
    }
    if (block[0] == n && memcmp(block + 1, layout, (size_t)n * sizeof(int64_t)) == 0) {
      return block + 1;
    }
  }
  *empty = LAYOUT_SLOTS;
  return NULL;
}

const int64_t* dli_layout_interned(const int64_t* layout, int n) {
  size_t empty;
  const int64_t* found = layout_find(layout, n, &empty);
  int64_t* block;
  if (found != NULL || empty == LAYOUT_SLOTS) {
    return found;
  }
#if DLI_FREE_THREADED
  PyMutex_Lock(&layout_lock);
  found = layout_find(layout, n, &empty); /* another thread may have added it */
  if (found != NULL || empty == LAYOUT_SLOTS) {
    PyMutex_Unlock(&layout_lock);
    return found;
  }
#endif
  block = (int64_t*)PyMem_RawMalloc((size_t)(n + 1) * sizeof(int64_t));
  if (block != NULL) {
    block[0] = n;
    memcpy(block + 1, layout, (size_t)n * sizeof(int64_t));
    LAYOUT_STORE(&layout_slots[empty], block);
    found = block + 1;
  }
#if DLI_FREE_THREADED
  PyMutex_Unlock(&layout_lock);
#endif
  return found;
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

int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim, int* readonly) {
  PyArrayObject* array = (PyArrayObject*)obj;
  PyArray_Descr* descr = PyArray_DESCR(array);
  PyObject* base;
  npy_intp itemsize, *shape, *strides;
  int ndim = PyArray_NDIM(array);
  int code = dl_code_of(descr->type_num);
  int i;

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
  shape = PyArray_SHAPE(array);
  strides = PyArray_STRIDES(array);
  if (!PyArray_IS_C_CONTIGUOUS(array) && PyArray_SIZE(array) != 1) {
    for (i = 0; i < ndim; i++) {
      if (shape[i] != 1 && strides[i] % itemsize != 0) {
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
  out->shape = ndim > 0 ? storage : NULL;
  out->strides = ndim > 0 ? storage + ndim : NULL;
  for (i = 0; i < ndim; i++) {
    storage[i] = shape[i];
    storage[ndim + i] = strides[i] / itemsize; /* as NumPy divides: toward zero */
  }
  *readonly = !PyArray_CHKFLAGS(array, NPY_ARRAY_WRITEABLE);
  return 0;
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

int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim, int* readonly) {
  (void)obj;
  (void)out;
  (void)storage;
  (void)max_ndim;
  (void)readonly;
  return 1;
}

PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base) {
  (void)t;
  (void)readonly;
  (void)base;
  return NULL;
}

#endif
