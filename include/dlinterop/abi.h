/* dlinterop's stable C ABI for downstream extensions: one versioned table of functions.
 *
 * An extension that calls dlinterop through this header keeps working when dlinterop is
 * upgraded: nothing it compiles in depends on the layout of dlinterop's own objects, only
 * on DLPack's structs (dlpack/dlpack.h), PyObject* and the table below, which grows only
 * by appending entries (see docs/cython.md, "The stable ABI"). It uses only the Python
 * Limited API, so an extension built on it can be an abi3 wheel.
 *
 *   #include <Python.h>
 *   #include "dlpack/dlpack.h"
 *   #include "dlinterop/abi.h"      // both under dlinterop.get_include()
 *   ...in the module's init: if (DLInterop_Import() < 0) return NULL;
 *
 * DLInterop_Import() checks the installed dlinterop's table once: an ImportError names
 * both versions when the installed table is of another major version or older than the
 * minor version this extension targets (DLINTEROP_TARGET_MINOR, by default the minor
 * version of this header; define it lower, as NumPy's NPY_TARGET_VERSION, to run on an
 * older dlinterop with only the entries it has). Every function below needs the GIL and
 * follows CPython's convention: NULL or -1 with an exception set on failure; a returned
 * object is a new reference. A function called before DLInterop_Import() imports it. */
#ifndef DLINTEROP_ABI_H_
#define DLINTEROP_ABI_H_

#include <Python.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the table this header describes. */
#define DLINTEROP_ABI_MAJOR 1
#define DLINTEROP_ABI_MINOR 0

/* The oldest table this extension accepts: the minor version whose entries it calls. */
#ifndef DLINTEROP_TARGET_MINOR
#define DLINTEROP_TARGET_MINOR DLINTEROP_ABI_MINOR
#endif
#if DLINTEROP_TARGET_MINOR > DLINTEROP_ABI_MINOR
#error "DLINTEROP_TARGET_MINOR is newer than this dlinterop/abi.h"
#endif

/* Where the table is published: a capsule of this name, attribute abi_table of the
   module dlinterop._capi. */
#define DLINTEROP_ABI_MODULE "dlinterop._capi"
#define DLINTEROP_ABI_CAPSULE "dlinterop._capi.abi_table"

/* What DLInterop_CheckArg checks: -1 (or 0 for the flags) leaves a property unchecked.
   DLInterop_ArgSpec() returns one that checks nothing. */
typedef struct {
  int32_t ndim;
  int32_t dtype_code;
  int32_t dtype_bits;
  int32_t device_type;
  int32_t c_contiguous;
  int32_t writable;
} DLInteropArgSpec;

/* The table. Entries are only ever appended, each with the minor version that added it;
   an entry's position and signature never change within a major version
   (dlinterop's CI compares them with the frozen list of every released entry). */
typedef struct DLInteropABI {
  /* 1.0 */
  uint32_t major;     /* DLINTEROP_ABI_MAJOR of the installed dlinterop */
  uint32_t minor;     /* its minor version: the entries up to it are there */
  uint64_t size;      /* sizeof(DLInteropABI) as the installed dlinterop has it */
  const char* version; /* the installed dlinterop's version, e.g. "0.1.0" */
  /* dl.from_dlpack(obj): a Tensor sharing the memory of a capsule or __dlpack__ object. */
  PyObject* (*tensor_from_object)(PyObject* obj);
  /* 1 when obj is a dlinterop Tensor (or a subclass), else 0; never fails. */
  int (*is_tensor)(PyObject* obj);
  /* The Tensor's DLTensor, borrowed (valid while the Tensor lives): its strides are always
     filled when ndim > 0. TypeError for anything that is not a dlinterop Tensor. */
  DLTensor* (*dltensor)(PyObject* tensor);
  /* A Tensor owning `managed`, whose deleter runs once when it dies (already when this
     fails). readonly: the memory must not be written through it. */
  PyObject* (*tensor_from_managed)(DLManagedTensorVersioned* managed, int readonly);
  /* A "dltensor_versioned" (versioned != 0) or "dltensor" capsule sharing the Tensor. */
  PyObject* (*to_capsule)(PyObject* tensor, int versioned);
  /* A new owned, C-contiguous, uninitialised Tensor (256-byte aligned). */
  PyObject* (*empty)(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice device);
  /* Fills *out with a view of obj's tensor (*readonly: whether it may be written) and
     returns what keeps *out valid: hold it while *out is used. */
  PyObject* (*borrow)(PyObject* obj, DLTensor* out, int* readonly);
  /* 0, or -1 with TypeError (dtype), ValueError (ndim, device, contiguity) or BufferError
     (writability) naming the argument `name`. */
  int (*check_arg)(const DLTensor* dl, int readonly, const char* name,
                   const DLInteropArgSpec* spec);
  /* A C-contiguous Tensor from like's framework's allocator where it publishes one, else
     dlinterop's; zeros_like fills it with zeros. */
  PyObject* (*empty_like)(PyObject* like, int32_t ndim, const int64_t* shape, DLDataType dtype,
                          DLDevice device);
  PyObject* (*zeros_like)(PyObject* like, int32_t ndim, const int64_t* shape, DLDataType dtype,
                          DLDevice device);
  /* An object of like's type (or framework) sharing the Tensor: dl.to_framework(t, like). */
  PyObject* (*to_framework)(PyObject* tensor, PyObject* like);
  /* The dl.DType of a DLDataType, and the DLDataType of anything dl.dtype() takes. */
  PyObject* (*dtype_object)(DLDataType dtype);
  int (*parse_dtype)(PyObject* obj, DLDataType* out);
  /* The dl.Device of a DLDevice, and the DLDevice of anything a device= argument takes. */
  PyObject* (*device_object)(DLDevice device);
  int (*parse_device)(PyObject* obj, DLDevice* out);
  /* dlinterop's exception raised when copy=False forbids a needed copy (a BufferError and
     ValueError), owned by the table. */
  PyObject* copy_error;
  /* Entries of later minor versions go here, each under a marker of its version. Their
     functions below check the installed table's minor version before calling (NULL or -1
     with NotImplementedError when it is older), since an extension built with a lower
     DLINTEROP_TARGET_MINOR may run on a table that lacks them. */
} DLInteropABI;

/* This translation unit's pointer to the installed table (NULL until imported). */
static const DLInteropABI* DLInterop_API = NULL;

/* The installed dlinterop's version, for messages ("unknown" when it cannot be read). */
static inline PyObject* DLInterop__InstalledVersion(void) {
  PyObject* version = NULL;
  PyObject* module = PyImport_ImportModule("dlinterop");
  if (module != NULL) {
    version = PyObject_GetAttrString(module, "__version__");
    Py_DECREF(module);
  }
  if (version == NULL) {
    PyErr_Clear();
    version = PyUnicode_FromString("unknown");
  }
  return version;
}

/* Imports the installed dlinterop's table and checks its version: 0, or -1 with an
   ImportError saying what to upgrade or rebuild. */
static inline int DLInterop_Import(void) {
  PyObject *module, *capsule, *version;
  const DLInteropABI* table;
  if (DLInterop_API != NULL) return 0;
  module = PyImport_ImportModule(DLINTEROP_ABI_MODULE);
  if (module == NULL) return -1;
  capsule = PyObject_GetAttrString(module, "abi_table");
  Py_DECREF(module);
  if (capsule == NULL) {
    PyErr_Clear();
    version = DLInterop__InstalledVersion();
    if (version == NULL) return -1;
    PyErr_Format(PyExc_ImportError,
                 "this extension was built for dlinterop's C ABI %d.%d, and the installed "
                 "dlinterop %U has no C ABI table: upgrade dlinterop",
                 DLINTEROP_ABI_MAJOR, DLINTEROP_TARGET_MINOR, version);
    Py_DECREF(version);
    return -1;
  }
  table = (const DLInteropABI*)PyCapsule_GetPointer(capsule, DLINTEROP_ABI_CAPSULE);
  Py_DECREF(capsule);
  if (table == NULL) return -1;
  if (table->major != DLINTEROP_ABI_MAJOR) {
    PyErr_Format(PyExc_ImportError,
                 "this extension was built for dlinterop's C ABI %d.x, and the installed "
                 "dlinterop %s has C ABI %u.%u: rebuild the extension against it, or install "
                 "a dlinterop with C ABI %d.x",
                 DLINTEROP_ABI_MAJOR, table->version, (unsigned)table->major,
                 (unsigned)table->minor, DLINTEROP_ABI_MAJOR);
    return -1;
  }
  if (table->minor < DLINTEROP_TARGET_MINOR) {
    PyErr_Format(PyExc_ImportError,
                 "this extension needs dlinterop's C ABI %d.%d or newer, and the installed "
                 "dlinterop %s has C ABI %u.%u: upgrade dlinterop (or build the extension "
                 "with DLINTEROP_TARGET_MINOR=%u, if it calls only what that version has)",
                 DLINTEROP_ABI_MAJOR, DLINTEROP_TARGET_MINOR, table->version,
                 (unsigned)table->major, (unsigned)table->minor, (unsigned)table->minor);
    return -1;
  }
  DLInterop_API = table;
  return 0;
}

/* The table, imported on first use: NULL with the ImportError when it cannot be. */
#define DLINTEROP__TABLE() (DLInterop_API != NULL || DLInterop_Import() == 0 ? DLInterop_API : NULL)

/* -- the entries, as functions (each needs the GIL) ------------------------------------- */

static inline PyObject* DLInterop_TensorFromObject(PyObject* obj) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->tensor_from_object(obj);
}

/* 1, 0, or -1 only when the table cannot be imported. */
static inline int DLInterop_IsTensor(PyObject* obj) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? -1 : api->is_tensor(obj);
}

static inline DLTensor* DLInterop_DLTensor(PyObject* tensor) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->dltensor(tensor);
}

static inline PyObject* DLInterop_TensorFromManaged(DLManagedTensorVersioned* managed,
                                                    int readonly) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  if (api == NULL) {
    /* Ownership moved all the same: the deleter runs now, as the entry's would. */
    if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
    return NULL;
  }
  return api->tensor_from_managed(managed, readonly);
}

static inline PyObject* DLInterop_ToCapsule(PyObject* tensor, int versioned) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->to_capsule(tensor, versioned);
}

static inline PyObject* DLInterop_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                        DLDevice device) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->empty(ndim, shape, dtype, device);
}

static inline PyObject* DLInterop_Borrow(PyObject* obj, DLTensor* out, int* readonly) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->borrow(obj, out, readonly);
}

/* A spec that checks nothing (no table needed). */
static inline DLInteropArgSpec DLInterop_ArgSpec(void) {
  DLInteropArgSpec spec;
  spec.ndim = -1;
  spec.dtype_code = -1;
  spec.dtype_bits = -1;
  spec.device_type = -1;
  spec.c_contiguous = 0;
  spec.writable = 0;
  return spec;
}

static inline int DLInterop_CheckArg(const DLTensor* dl, int readonly, const char* name,
                                     const DLInteropArgSpec* spec) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? -1 : api->check_arg(dl, readonly, name, spec);
}

static inline PyObject* DLInterop_EmptyLike(PyObject* like, int32_t ndim, const int64_t* shape,
                                            DLDataType dtype, DLDevice device) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->empty_like(like, ndim, shape, dtype, device);
}

static inline PyObject* DLInterop_ZerosLike(PyObject* like, int32_t ndim, const int64_t* shape,
                                            DLDataType dtype, DLDevice device) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->zeros_like(like, ndim, shape, dtype, device);
}

static inline PyObject* DLInterop_ToFramework(PyObject* tensor, PyObject* like) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->to_framework(tensor, like);
}

static inline PyObject* DLInterop_DTypeObject(DLDataType dtype) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->dtype_object(dtype);
}

static inline int DLInterop_ParseDType(PyObject* obj, DLDataType* out) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? -1 : api->parse_dtype(obj, out);
}

static inline PyObject* DLInterop_DeviceObject(DLDevice device) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? NULL : api->device_object(device);
}

static inline int DLInterop_ParseDevice(PyObject* obj, DLDevice* out) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  return api == NULL ? -1 : api->parse_device(obj, out);
}

/* dlinterop's CopyError class (a new reference); NULL only when the table cannot be
   imported. */
static inline PyObject* DLInterop_CopyError(void) {
  const DLInteropABI* api = DLINTEROP__TABLE();
  if (api == NULL) return NULL;
  Py_INCREF(api->copy_error);
  return api->copy_error;
}

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_ABI_H_ */
