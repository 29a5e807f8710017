/*
 * An exact int's value read without a call: the version numbers a consumer passes in
 * __dlpack__'s max_version, checked on every export.
 *
 * Included by dlinterop/core/runtime.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_SMALL_LONG_H_
#define DLINTEROP_SMALL_LONG_H_

#include <Python.h>

/* An exact int's value when it fits one digit (every version number a consumer
   passes), read without a call: 1 with *out set, else 0 (use PyLong_AsLong...). */
#if PY_VERSION_HEX < 0x030B0000
#include "longintrepr.h" /* 3.10's Python.h leaves the digit layout out */
#endif
static inline int dli_small_long(PyObject* o, long* out) {
  if (!PyLong_CheckExact(o)) return 0;
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact((PyLongObject*)o)) return 0;
  *out = (long)PyUnstable_Long_CompactValue((PyLongObject*)o);
#else
  Py_ssize_t size = Py_SIZE(o);
  if (size < -1 || size > 1) return 0;
  *out = (long)size * (long)((PyLongObject*)o)->ob_digit[0];
#endif
  return 1;
}

#endif /* DLINTEROP_SMALL_LONG_H_ */
