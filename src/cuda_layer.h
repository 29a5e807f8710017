/*
 * dlinterop's CUDA layer: plain C entry points over the CUDA runtime, compiled by nvcc into a
 * static library and linked (with the CUDA runtime linked statically) into dlinterop._cuda.
 * Every function that calls the runtime returns a cudaError_t value as an int (0 is
 * success); the error's name and text, the out-of-memory test and the current stream's
 * getter and setter answer directly. None touches Python, so any of them may run without
 * the GIL.
 */
#ifndef DLINTEROP_CUDA_LAYER_H_
#define DLINTEROP_CUDA_LAYER_H_

#include <stddef.h>
#include <stdint.h>

#include "runtime.h" /* DLI_MAX_NDIM */

#ifdef __cplusplus
extern "C" {
#endif

/* Memory kinds, numbered as DLPack's device types; DLI_CUDA_DEVICE_IPC is device memory
 * from cudaMalloc (not the stream-ordered pool DLI_CUDA_DEVICE uses where the device has
 * one), which CUDA IPC can hand to another process. */
enum {
  DLI_CUDA_DEVICE = 2,
  DLI_CUDA_HOST = 3,
  DLI_CUDA_MANAGED = 13,
  DLI_CUDA_DEVICE_IPC = 0x10002
};

int dli_cuda_device_count(int* out);
int dli_cuda_runtime_version(int* out);
int dli_cuda_driver_version(int* out);
const char* dli_cuda_error_name(int err);
const char* dli_cuda_error_string(int err);
int dli_cuda_is_out_of_memory(int err);

int dli_cuda_malloc(int kind, int device, size_t nbytes, int zero, void* stream, void** out);
int dli_cuda_free(int kind, int device, void* ptr, void* stream);

/* Copies n bytes between any two pointers the runtime knows (unified addressing). */
int dli_cuda_memcpy(void* dst, const void* src, size_t nbytes, void* stream);
/* Gathers an n-d strided array (strides in elements) that the device can read into a
 * C-contiguous destination the device can write. */
int dli_cuda_gather(void* dst, const void* src, int ndim, const int64_t* shape,
                    const int64_t* strides, size_t itemsize, int device, void* stream);
int dli_cuda_fill(void* dst, const void* pattern, size_t itemsize, int64_t count, int device,
                  void* stream);

int dli_cuda_stream_create(int device, void** out);
int dli_cuda_stream_destroy(int device, void* stream);
int dli_cuda_stream_synchronize(void* stream);
int dli_cuda_device_synchronize(int device);
/* Makes `consumer` wait for the work issued so far on `producer` (event record + wait),
 * without blocking the host. A no-op when both are the same stream. */
int dli_cuda_stream_wait(int device, void* producer, void* consumer);

/* The device a pointer belongs to, and its DLPack device type (2, 3 or 13; 1 for plain
 * host memory). */
int dli_cuda_pointer_device(const void* ptr, int* device, int* device_type);

/* CUDA IPC. A handle is DLI_CUDA_IPC_HANDLE_BYTES opaque bytes another process opens. */
enum { DLI_CUDA_IPC_HANDLE_BYTES = 64 };
/* The allocation device memory `ptr` lies in, as a handle: *offset is ptr's offset into
 * it, *size its size. Memory from a stream-ordered pool (cudaMallocAsync) has no such
 * handle: cudaErrorInvalidValue. */
int dli_cuda_ipc_export(const void* ptr, int device, void* handle, size_t* offset, size_t* size);
/* Maps a handle another process made: *base is the allocation's start in this process and
 * *size its size (as the driver knows it, whatever the sender said). A handle is opened
 * once per process; close it with dli_cuda_ipc_close. */
int dli_cuda_ipc_open(const void* handle, int device, void** base, size_t* size);
int dli_cuda_ipc_close(int device, void* base);
/* An interprocess event recorded on `stream` (its handle, and the event to destroy once
 * the receiver no longer needs it), and a receiver's `stream` made to wait for one. */
int dli_cuda_ipc_event_record(int device, void* stream, void* handle, void** event);
int dli_cuda_ipc_event_wait(int device, const void* handle, void* stream);
int dli_cuda_event_destroy(int device, void* event);

/* The stream dlinterop issues its own work on, per device and per thread. NULL is the
 * legacy default stream. */
void* dli_cuda_current_stream(int device);
void dli_cuda_set_current_stream(int device, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_CUDA_LAYER_H_ */
