/*
 * How many dl.cuda.Stream contexts are entered, on all threads: a counter changed
 * atomically, since threads enter and leave streams at once where there is no GIL.
 * dlinterop._core reads it through the CUDA table (src/cuda_table.h, streams_entered).
 *
 * Included by dlinterop/_cuda.pyx (dlinterop._cuda only: the counter is static, one per
 * module that includes this).
 */
#ifndef DLINTEROP_STREAMS_ENTERED_H_
#define DLINTEROP_STREAMS_ENTERED_H_

static int dli_streams_entered_count = 0;
static inline void dli_streams_entered_add(int v) {
  __atomic_fetch_add(&dli_streams_entered_count, v, __ATOMIC_RELAXED);
}
static inline int dli_streams_entered_get(void) {
  return __atomic_load_n(&dli_streams_entered_count, __ATOMIC_RELAXED);
}

#endif /* DLINTEROP_STREAMS_ENTERED_H_ */
