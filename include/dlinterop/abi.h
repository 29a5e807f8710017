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
 * both versions, and the first dlinterop release with the table needed, when the installed
 * table is of another major version or older than the minor version this extension targets.
 * The target is DLINTEROP_TARGET_MINOR, by default 0, the oldest, as NumPy's
 * NPY_TARGET_VERSION: an extension runs on every dlinterop with this major version, and the
 * entries a later minor version added are not declared (using one is a compile error
 * naming the minor version it needs). Define DLINTEROP_TARGET_MINOR to that version to use
 * them and require it; or define DLINTEROP_ALLOW_NEWER_ENTRIES to use them on any table,
 * each one failing with NotImplementedError where the installed table lacks it (ask
 * DLInterop_ABIMinor() first).
 *
 * Every function below needs the GIL (the table's functions create and inspect Python
 * objects) and follows CPython's convention: NULL or -1 with an exception set on failure; a
 * returned object is a new reference. A function called before DLInterop_Import() imports
 * it. */
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
#define DLINTEROP_ABI_MINOR 1

/* The oldest table this extension accepts: the minor version whose entries it calls. */
#ifndef DLINTEROP_TARGET_MINOR
#define DLINTEROP_TARGET_MINOR 0
#endif
#if DLINTEROP_TARGET_MINOR > DLINTEROP_ABI_MINOR
#error "DLINTEROP_TARGET_MINOR is newer than this dlinterop/abi.h"
#endif
#if DLINTEROP_TARGET_MINOR < 0
#error "DLINTEROP_TARGET_MINOR cannot be negative"
#endif

/* The first dlinterop release with each minor version of the table (CHANGELOG.md): what a
   dependent declares (dlinterop>=that release, <1) and what the ImportError asks for. */
#define DLINTEROP_ABI_1_0_RELEASE "0.1.0"
#define DLINTEROP_ABI_1_1_RELEASE "0.2.0"
#if DLINTEROP_TARGET_MINOR == 0
#define DLINTEROP_TARGET_RELEASE_ "dlinterop " DLINTEROP_ABI_1_0_RELEASE " or newer"
#elif DLINTEROP_TARGET_MINOR == 1
#define DLINTEROP_TARGET_RELEASE_ "dlinterop " DLINTEROP_ABI_1_1_RELEASE " or newer"
#else
#define DLINTEROP_TARGET_RELEASE_ "a newer dlinterop"
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
  /* 1.1 */
  /* dl.from_dlpack(obj, device=..., copy=...): *device (NULL: where obj is), copy -1 for
     None (copy only if needed), 0 for False (never: dl.CopyError), 1 for True (always). */
  PyObject* (*from_dlpack)(PyObject* obj, const DLDevice* device, int copy);
  /* Sets *flags to the DLPack flags that apply to the Tensor's memory
     (DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_IS_COPIED): 0, or -1 with TypeError
     for anything that is not a dlinterop Tensor. */
  int (*tensor_flags)(PyObject* tensor, uint64_t* flags);
  /* The DLPack 1.3 exchange table whose functions take objects of `type`, borrowed (valid
     for the process): dl.exchange_api_for(type)'s, cached per type. NULL with TypeError for
     a type whose objects have no __dlpack__ (or for anything that is not a type). */
  const DLPackExchangeAPI* (*exchange_api_for)(PyTypeObject* type);
  /* Entries of later minor versions go here, each under a marker of its version; their
     functions below are declared only for a target that has them (or with
     DLINTEROP_ALLOW_NEWER_ENTRIES, checking the installed table's minor version first). */
} DLInteropABI;

/* This translation unit's pointer to the installed table (NULL until imported). */
static const DLInteropABI* DLInterop_API = NULL;

/* A cast that is C's in C and static_cast in C++ (as Python.h's _Py_CAST), so that the
   header compiles cleanly with -Wold-style-cast. */
#ifdef __cplusplus
#define DLINTEROP_CAST(type, value) (static_cast<type>(value))
#else
#define DLINTEROP_CAST(type, value) ((type)(value))
#endif

/* The installed dlinterop's version, for messages ("unknown" when it cannot be read). */
static inline PyObject* DLInterop_InstalledVersion_(void) {
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
  unsigned int major, minor; /* the table's uint32_t, as the messages' %u reads them */
  if (DLInterop_API != NULL) return 0;
  module = PyImport_ImportModule(DLINTEROP_ABI_MODULE);
  if (module == NULL) return -1;
  capsule = PyObject_GetAttrString(module, "abi_table");
  Py_DECREF(module);
  if (capsule == NULL) {
    PyErr_Clear();
    version = DLInterop_InstalledVersion_();
    if (version == NULL) return -1;
    PyErr_Format(PyExc_ImportError,
                 "this extension was built for dlinterop's C ABI %d.%d, and the installed "
                 "dlinterop %U has no C ABI table: upgrade dlinterop",
                 DLINTEROP_ABI_MAJOR, DLINTEROP_TARGET_MINOR, version);
    Py_DECREF(version);
    return -1;
  }
  table = DLINTEROP_CAST(const DLInteropABI*,
                         PyCapsule_GetPointer(capsule, DLINTEROP_ABI_CAPSULE));
  Py_DECREF(capsule);
  if (table == NULL) return -1;
  major = table->major;
  minor = table->minor;
  if (major != DLINTEROP_ABI_MAJOR) {
    PyErr_Format(PyExc_ImportError,
                 "this extension was built for dlinterop's C ABI %d.x, and the installed "
                 "dlinterop %s has C ABI %u.%u: rebuild the extension against it, or install "
                 "a dlinterop with C ABI %d.x",
                 DLINTEROP_ABI_MAJOR, table->version, major, minor, DLINTEROP_ABI_MAJOR);
    return -1;
  }
#if DLINTEROP_TARGET_MINOR > 0 /* every table is at least 1.0: and `minor < 0` on an
                                 unsigned value is what -Wextra (-Wtype-limits) reports */
  if (minor < DLINTEROP_CAST(unsigned int, DLINTEROP_TARGET_MINOR)) {
    PyErr_Format(PyExc_ImportError,
                 "this extension needs dlinterop's C ABI %d.%d or newer (%s), and the "
                 "installed dlinterop %s has C ABI %u.%u: upgrade dlinterop "
                 "(or build the extension with DLINTEROP_TARGET_MINOR=%u, if it calls only "
                 "what that version has)",
                 DLINTEROP_ABI_MAJOR, DLINTEROP_TARGET_MINOR, DLINTEROP_TARGET_RELEASE_,
                 table->version, major, minor, minor);
    return -1;
  }
#endif
  DLInterop_API = table;
  return 0;
}

/* The table, imported on first use: NULL with the ImportError when it cannot be. */
#define DLINTEROP_TABLE_() \
  (DLInterop_API != NULL || DLInterop_Import() == 0 ? DLInterop_API : NULL)

/* -- the entries, as functions (each needs the GIL) ------------------------------------- */

static inline PyObject* DLInterop_TensorFromObject(PyObject* obj) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->tensor_from_object(obj);
}

/* 1, 0, or -1 only when the table cannot be imported. */
static inline int DLInterop_IsTensor(PyObject* obj) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? -1 : api->is_tensor(obj);
}

static inline DLTensor* DLInterop_DLTensor(PyObject* tensor) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->dltensor(tensor);
}

static inline PyObject* DLInterop_TensorFromManaged(DLManagedTensorVersioned* managed,
                                                    int readonly) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  if (api == NULL) {
    /* Ownership moved all the same: the deleter runs now, as the entry's would. */
    if (managed != NULL && managed->deleter != NULL) managed->deleter(managed);
    return NULL;
  }
  return api->tensor_from_managed(managed, readonly);
}

static inline PyObject* DLInterop_ToCapsule(PyObject* tensor, int versioned) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->to_capsule(tensor, versioned);
}

static inline PyObject* DLInterop_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                        DLDevice device) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->empty(ndim, shape, dtype, device);
}

static inline PyObject* DLInterop_Borrow(PyObject* obj, DLTensor* out, int* readonly) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
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
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? -1 : api->check_arg(dl, readonly, name, spec);
}

static inline PyObject* DLInterop_EmptyLike(PyObject* like, int32_t ndim, const int64_t* shape,
                                            DLDataType dtype, DLDevice device) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->empty_like(like, ndim, shape, dtype, device);
}

static inline PyObject* DLInterop_ZerosLike(PyObject* like, int32_t ndim, const int64_t* shape,
                                            DLDataType dtype, DLDevice device) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->zeros_like(like, ndim, shape, dtype, device);
}

static inline PyObject* DLInterop_ToFramework(PyObject* tensor, PyObject* like) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->to_framework(tensor, like);
}

static inline PyObject* DLInterop_DTypeObject(DLDataType dtype) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->dtype_object(dtype);
}

static inline int DLInterop_ParseDType(PyObject* obj, DLDataType* out) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? -1 : api->parse_dtype(obj, out);
}

static inline PyObject* DLInterop_DeviceObject(DLDevice device) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? NULL : api->device_object(device);
}

static inline int DLInterop_ParseDevice(PyObject* obj, DLDevice* out) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? -1 : api->parse_device(obj, out);
}

/* dlinterop's CopyError class (a new reference); NULL only when the table cannot be
   imported. */
static inline PyObject* DLInterop_CopyError(void) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  if (api == NULL) return NULL;
  Py_INCREF(api->copy_error);
  return api->copy_error;
}

/* The minor version of the installed table (its entries up to that version are there), or
   -1 with the ImportError when it cannot be imported. */
static inline int DLInterop_ABIMinor(void) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  return api == NULL ? -1 : DLINTEROP_CAST(int, api->minor);
}

/* -- entries of table 1.1 --------------------------------------------------------------- */

#if DLINTEROP_TARGET_MINOR >= 1 || defined(DLINTEROP_ALLOW_NEWER_ENTRIES)

/* The table when it has the entries of minor version `minor`: else NULL with
   NotImplementedError (or the ImportError). */
static inline const DLInteropABI* DLInterop_TableWith_(unsigned int minor, const char* release,
                                                       const char* entry) {
  const DLInteropABI* api = DLINTEROP_TABLE_();
  unsigned int installed;
  if (api == NULL) return NULL;
  installed = api->minor;
  if (installed < minor) {
    PyErr_Format(PyExc_NotImplementedError,
                 "%s needs dlinterop's C ABI %d.%u (dlinterop %s or newer), and the "
                 "installed dlinterop %s has C ABI %d.%u: upgrade dlinterop",
                 entry, DLINTEROP_ABI_MAJOR, minor, release, api->version,
                 DLINTEROP_ABI_MAJOR, installed);
    return NULL;
  }
  return api;
}

static inline PyObject* DLInterop_FromDLPack(PyObject* obj, const DLDevice* device, int copy) {
  const DLInteropABI* api = DLInterop_TableWith_(1, DLINTEROP_ABI_1_1_RELEASE,
                                                   "DLInterop_FromDLPack");
  return api == NULL ? NULL : api->from_dlpack(obj, device, copy);
}

static inline int DLInterop_TensorFlags(PyObject* tensor, uint64_t* flags) {
  const DLInteropABI* api = DLInterop_TableWith_(1, DLINTEROP_ABI_1_1_RELEASE,
                                                   "DLInterop_TensorFlags");
  return api == NULL ? -1 : api->tensor_flags(tensor, flags);
}

static inline const DLPackExchangeAPI* DLInterop_ExchangeAPIFor(PyTypeObject* type) {
  const DLInteropABI* api = DLInterop_TableWith_(1, DLINTEROP_ABI_1_1_RELEASE,
                                                   "DLInterop_ExchangeAPIFor");
  return api == NULL ? NULL : api->exchange_api_for(type);
}

#else
/* Not in the targeted table: a use names what to define. */
#define DLInterop_FromDLPack(...) DLInterop_FromDLPack_is_ABI_1_1_define_DLINTEROP_TARGET_MINOR_1
#define DLInterop_TensorFlags(...) DLInterop_TensorFlags_is_ABI_1_1_define_DLINTEROP_TARGET_MINOR_1
#define DLInterop_ExchangeAPIFor(...) \
  DLInterop_ExchangeAPIFor_is_ABI_1_1_define_DLINTEROP_TARGET_MINOR_1
#endif

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_ABI_H_ */
