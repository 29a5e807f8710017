/*
 * The core's counters and one-time set-up states, read and written safely where no GIL
 * orders them (free-threaded CPython): atomics there; with a GIL, which orders these
 * already, plain accesses with no locked instruction (a lock-prefixed add costs tens of
 * cycles on every export and release).
 *
 * Included by dlinterop/core/runtime.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_ATOMICS_H_
#define DLINTEROP_ATOMICS_H_

#include <Python.h>

#include "threadsafe.h" /* DLI_FREE_THREADED */

static inline void dli_atomic_add(Py_ssize_t* p, Py_ssize_t v) {
#if DLI_FREE_THREADED
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#else
  *p += v;
#endif
}
static inline Py_ssize_t dli_atomic_load(const Py_ssize_t* p) {
#if DLI_FREE_THREADED
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#else
  return *(const volatile Py_ssize_t*)p;
#endif
}
static inline void dli_atomic_store(Py_ssize_t* p, Py_ssize_t v) {
#if DLI_FREE_THREADED
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#else
  *(volatile Py_ssize_t*)p = v;
#endif
}

#endif /* DLINTEROP_ATOMICS_H_ */
