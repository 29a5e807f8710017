/*
 * Reads of shared interpreter state that stay safe where no GIL orders them (free-threaded
 * CPython) and cost nothing more where one does.
 *
 * Included through dlinterop/_lib/threadsafe.pxd, so compiled into each module that cimports it
 * (dlinterop._core, dlinterop._cuda, dlinterop.frameworks); src/atomics.h includes it for
 * DLI_FREE_THREADED.
 */
#ifndef DLINTEROP_THREADSAFE_H_
#define DLINTEROP_THREADSAFE_H_

#include <Python.h>

/* 1 on a free-threaded (no GIL) build of CPython: what a GIL would order needs an
   atomic, a lock or a critical section there. */
#ifdef Py_GIL_DISABLED
#define DLI_FREE_THREADED 1
#else
#define DLI_FREE_THREADED 0
#endif

/* dict.get(key) as a reference of the caller's own. PyDict_GetItemWithError (what
   Cython 3.3 compiles dict.get to, then Py_INCREF) lends its reference: without a GIL
   another thread that replaces or removes the entry can free the value between the
   two. PyDict_GetItemRef (3.13) takes the reference under the dict's lock.
   Py_None when absent; NULL with an exception set on failure. */
static inline PyObject* dli_dict_get(PyObject* d, PyObject* key) {
  PyObject* value;
#if PY_VERSION_HEX >= 0x030D0000
  if (PyDict_GetItemRef(d, key, &value) < 0) return NULL;
#else
  value = PyDict_GetItemWithError(d, key);
  if (value == NULL && PyErr_Occurred()) return NULL;
  Py_XINCREF(value);
#endif
  if (value == NULL) {
    value = Py_None;
    Py_INCREF(value);
  }
  return value;
}

/* A type's version tag while it is valid, else 0; it changes whenever one of the
   type's attributes (or a base's) does. CPython 3.13 stopped setting
   Py_TPFLAGS_VALID_VERSION_TAG: there a tag is valid when it is not 0 (PyType_Modified
   zeroes it), before 3.13 the flag says so. */
static inline unsigned int dli_type_version(PyObject* type) {
  PyTypeObject* tp = (PyTypeObject*)type;
#if PY_VERSION_HEX >= 0x030D0000
#ifdef Py_GIL_DISABLED
  return __atomic_load_n(&tp->tp_version_tag, __ATOMIC_ACQUIRE);
#else
  return tp->tp_version_tag;
#endif
#else
  return (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
#endif
}

#endif /* DLINTEROP_THREADSAFE_H_ */
