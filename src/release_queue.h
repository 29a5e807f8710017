/*
 * What a dying Tensor lets go of: an imported managed tensor (either kind) and the
 * reference to its memory's owner. Released at once, unless this thread is already
 * DLI_RELEASE_DEPTH releases deep, in which case they are queued and released by the
 * outermost one, so that a long chain of Tensors held by other frameworks' tensors is
 * freed in a loop rather than by recursion that overflows the C stack.
 *
 * Included by dlinterop/core/tensor.pxi (dlinterop._core only: the depth and the queue are
 * static, one per module that includes this).
 */
#ifndef DLINTEROP_RELEASE_QUEUE_H_
#define DLINTEROP_RELEASE_QUEUE_H_

#include <Python.h>
#include <stdlib.h>

#include "dlpack/dlpack.h"

#define DLI_RELEASE_DEPTH 32
typedef struct dli_release {
  struct dli_release* next;
  DLManagedTensorVersioned* versioned;
  DLManagedTensor* legacy;
  PyObject* owner;
} dli_release;
/* Per thread where there is no GIL. With a GIL one depth and one queue serve every
   thread (and cost no thread-local lookup on every deallocation): a thread that finds
   the depth at 1 after its release drains the queue, and the last one out always does,
   since nothing lets the GIL go between that check and the decrement. */
#ifdef Py_GIL_DISABLED
static _Thread_local int dli_release_depth = 0;
static _Thread_local dli_release* dli_release_queue = NULL;
#else
static int dli_release_depth = 0;
static dli_release* dli_release_queue = NULL;
#endif

static void dli_release_now(DLManagedTensorVersioned* versioned, DLManagedTensor* legacy,
                            PyObject* owner) {
  if (versioned != NULL && versioned->deleter != NULL) versioned->deleter(versioned);
  if (legacy != NULL && legacy->deleter != NULL) legacy->deleter(legacy);
  Py_XDECREF(owner);
}

/* 1 when a release now would be DLI_RELEASE_DEPTH deep: queue it instead. */
static inline int dli_release_too_deep(void) { return dli_release_depth >= DLI_RELEASE_DEPTH; }

/* Queues a release (taking the reference to owner); releases at once if out of memory.
   Rare: kept out of line, so the common deallocation stays small. */
static __attribute__((noinline, cold)) void dli_release_later(DLManagedTensorVersioned* versioned,
                                                              DLManagedTensor* legacy,
                                                              PyObject* owner) {
  dli_release* later = (dli_release*)malloc(sizeof(dli_release));
  if (later == NULL) {
    dli_release_now(versioned, legacy, owner); /* deeper than we would like */
    return;
  }
  later->versioned = versioned;
  later->legacy = legacy;
  later->owner = owner;
  later->next = dli_release_queue;
  dli_release_queue = later;
}

static inline void dli_release_enter(void) { dli_release_depth++; }

static __attribute__((noinline, cold)) void dli_release_drain(void) {
  while (dli_release_queue != NULL) {
    dli_release* next = dli_release_queue;
    dli_release_queue = next->next;
    dli_release_now(next->versioned, next->legacy, next->owner);
    free(next);
  }
}

/* The outermost release of the thread drains what deeper ones queued. */
static inline void dli_release_leave(void) {
  if (dli_release_depth == 1 && dli_release_queue != NULL) dli_release_drain();
  dli_release_depth--;
}

#endif /* DLINTEROP_RELEASE_QUEUE_H_ */
