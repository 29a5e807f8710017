/* A DLPack consumer with the lifetime bugs dlinterop's sanitizer exists to catch, loaded
 * with ctypes by tests/lifetime_sanitizer/: it keeps the data pointer of a managed tensor after
 * releasing it, releases it twice, or releases it from a C atexit handler, after the
 * interpreter has finalised. Plain C: it knows DLPack's structs, nothing of Python. */
#include <stdlib.h>

#include "dlpack/dlpack.h"

static DLManagedTensorVersioned* kept;
static unsigned char* kept_data;

/* Takes ownership of a managed tensor (the caller renamed its capsule used_*). */
void keeper_take(DLManagedTensorVersioned* managed) {
  kept = managed;
  kept_data = (unsigned char*)managed->dl_tensor.data + managed->dl_tensor.byte_offset;
}

static void report_error(void* context, const char* kind, const char* message) {
  (void)context;
  (void)kind;
  (void)message;
}

/* A new uint8 tensor of n elements from a producer's C exchange table (its allocator),
 * kept as keeper_take keeps one. 0 on success. */
int keeper_allocate(DLPackExchangeAPI* api, long n) {
  int64_t shape[1] = {n};
  DLTensor prototype = {0};
  prototype.ndim = 1;
  prototype.shape = shape;
  prototype.dtype.code = kDLUInt;
  prototype.dtype.bits = 8;
  prototype.dtype.lanes = 1;
  prototype.device.device_type = kDLCPU;
  DLManagedTensorVersioned* managed = NULL;
  if (api->managed_tensor_allocator(&prototype, &managed, NULL, report_error) != 0) return -1;
  keeper_take(managed);
  return 0;
}

/* Done with it: calls its deleter, but (the bug) keeps the data pointer. */
void keeper_release(void) { kept->deleter(kept); }

/* One byte of the data, read through the pointer kept. */
int keeper_read(long index) { return ((volatile unsigned char*)kept_data)[index]; }

static void release_at_exit(void) { kept->deleter(kept); }

/* Calls the deleter from a C atexit handler: after Python has shut down. */
void keeper_release_at_exit(void) { atexit(release_at_exit); }
