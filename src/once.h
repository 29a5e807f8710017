/*
 * One-time set-ups that hold no lock while they run Python code: a state goes
 * DLI_SETUP_UNDECIDED -> DLI_SETUP_DECIDING (claimed by one thread with a compare-and-swap)
 * -> its answer. In a child made by fork() while a set-up was DECIDING, the thread running
 * it is gone: the child puts it back to UNDECIDED (pthread_atfork).
 *
 * Included by dlinterop/core/once.pxi (dlinterop._core only: the registered states are
 * static, one list per module that includes this).
 */
#ifndef DLINTEROP_ONCE_H_
#define DLINTEROP_ONCE_H_

#include <Python.h>
#include <pthread.h>

#define DLI_SETUP_UNDECIDED (-2)
#define DLI_SETUP_DECIDING (-3)
/* 1 when this thread moved *state from UNDECIDED to DECIDING and must decide it. */
static inline int dli_setup_claim(Py_ssize_t* state) {
  Py_ssize_t expected = DLI_SETUP_UNDECIDED;
  return __atomic_compare_exchange_n(state, &expected, DLI_SETUP_DECIDING, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}
static Py_ssize_t* dli_setup_states[8];
static int dli_setup_state_count = 0;
static void dli_setup_reset_in_child(void) {
  for (int i = 0; i < dli_setup_state_count; i++)
    if (*dli_setup_states[i] == DLI_SETUP_DECIDING) *dli_setup_states[i] = DLI_SETUP_UNDECIDED;
}
/* Registered once, at module import (single-threaded). */
static int dli_setup_register(Py_ssize_t* state) {
  if (dli_setup_state_count == 8) return -1;
  if (dli_setup_state_count == 0 && pthread_atfork(NULL, NULL, dli_setup_reset_in_child)) return -1;
  dli_setup_states[dli_setup_state_count++] = state;
  return 0;
}

#endif /* DLINTEROP_ONCE_H_ */
