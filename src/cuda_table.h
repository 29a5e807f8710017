/*
 * The C entry points dlinterop._cuda publishes to dlinterop._core (as the capsule
 * "dlinterop._cuda.table"): what the core needs without the GIL or a Python call.
 */
#ifndef DLINTEROP_CUDA_TABLE_H_
#define DLINTEROP_CUDA_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

typedef struct {
  /* Device, pinned or managed memory for `device`; NULL on failure. */
  void* (*alloc_nogil)(size_t nbytes, DLDevice device, void** base);
  void (*free_nogil)(void* base, size_t nbytes, DLDevice device);
  /* The calling thread's current stream on a device (NULL: the legacy default stream). */
  void* (*current_stream_nogil)(int32_t device_id);
  /* How many dl.cuda.Stream contexts are entered, on all threads. */
  int (*streams_entered)(void);
} dli_cuda_table;

#endif /* DLINTEROP_CUDA_TABLE_H_ */
