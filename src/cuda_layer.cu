#include "cuda_layer.h"

#include <cuda_runtime.h>
#include <string.h>

#define DLI_MAX_DEVICES 64

static __thread void* current_streams[DLI_MAX_DEVICES];

/* Restores the calling thread's device on scope exit. */
struct DeviceGuard {
  int previous = -1;
  cudaError_t err = cudaSuccess;
  explicit DeviceGuard(int device) {
    err = cudaGetDevice(&previous);
    if (err == cudaSuccess && previous != device) err = cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous >= 0) cudaSetDevice(previous);
  }
};

extern "C" {

int dli_cuda_device_count(int* out) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  /* No driver or no device is an answer (0), not an error. */
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    *out = 0;
    return 0;
  }
  *out = err == cudaSuccess ? count : 0;
  return (int)err;
}

int dli_cuda_runtime_version(int* out) { return (int)cudaRuntimeGetVersion(out); }
int dli_cuda_driver_version(int* out) { return (int)cudaDriverGetVersion(out); }
const char* dli_cuda_error_name(int err) { return cudaGetErrorName((cudaError_t)err); }
const char* dli_cuda_error_string(int err) { return cudaGetErrorString((cudaError_t)err); }
int dli_cuda_is_out_of_memory(int err) { return err == cudaErrorMemoryAllocation; }

static int pools_supported(int device) {
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return supported;
}

int dli_cuda_malloc(int kind, int device, size_t nbytes, int zero, void* stream, void** out) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  cudaStream_t s = (cudaStream_t)stream;
  size_t n = nbytes ? nbytes : 1; /* never hand out NULL for an empty tensor */
  cudaError_t err;
  switch (kind) {
    case DLI_CUDA_DEVICE:
      err = pools_supported(device) ? cudaMallocAsync(out, n, s) : cudaMalloc(out, n);
      if (err == cudaSuccess && zero) err = cudaMemsetAsync(*out, 0, n, s);
      return (int)err;
    case DLI_CUDA_HOST:
      err = cudaHostAlloc(out, n, cudaHostAllocPortable);
      if (err == cudaSuccess && zero) memset(*out, 0, n);
      return (int)err;
    case DLI_CUDA_MANAGED:
      err = cudaMallocManaged(out, n, cudaMemAttachGlobal);
      if (err == cudaSuccess && zero) err = cudaMemsetAsync(*out, 0, n, s);
      return (int)err;
    case DLI_CUDA_DEVICE_IPC:
      err = cudaMalloc(out, n);
      if (err == cudaSuccess && zero) err = cudaMemsetAsync(*out, 0, n, s);
      return (int)err;
    default: return (int)cudaErrorInvalidValue;
  }
}

int dli_cuda_free(int kind, int device, void* ptr, void* stream) {
  if (ptr == NULL) return 0;
  DeviceGuard guard(device);
  cudaError_t err;
  switch (kind) {
    case DLI_CUDA_DEVICE:
      err = pools_supported(device) ? cudaFreeAsync(ptr, (cudaStream_t)stream) : cudaFree(ptr);
      break;
    case DLI_CUDA_HOST: err = cudaFreeHost(ptr); break;
    default: err = cudaFree(ptr); break;
  }
  /* At process exit the runtime may already be unloading: the memory goes with it. */
  if (err == cudaErrorCudartUnloading) err = cudaSuccess;
  return (int)err;
}

int dli_cuda_memcpy(void* dst, const void* src, size_t nbytes, void* stream) {
  if (nbytes == 0) return 0;
  return (int)cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, (cudaStream_t)stream);
}

struct GatherLayout {
  int ndim;
  int64_t shape[DLI_MAX_NDIM];
  int64_t strides[DLI_MAX_NDIM];
};

__global__ void gather_kernel(char* dst, const char* src, GatherLayout layout, size_t itemsize,
                              int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rest = i, offset = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      offset += (rest % layout.shape[d]) * layout.strides[d];
      rest /= layout.shape[d];
    }
    const char* from = src + offset * (int64_t)itemsize;
    char* to = dst + i * (int64_t)itemsize;
    for (size_t b = 0; b < itemsize; ++b) to[b] = from[b];
  }
}

int dli_cuda_gather(void* dst, const void* src, int ndim, const int64_t* shape,
                    const int64_t* strides, size_t itemsize, int device, void* stream) {
  if (ndim < 0 || ndim > DLI_MAX_NDIM) return (int)cudaErrorInvalidValue;
  GatherLayout layout;
  layout.ndim = ndim;
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    layout.shape[d] = shape[d];
    layout.strides[d] = strides[d];
    count *= shape[d];
  }
  if (count == 0) return 0;
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  int64_t blocks = (count + 255) / 256;
  gather_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, (cudaStream_t)stream>>>(
      (char*)dst, (const char*)src, layout, itemsize, count);
  return (int)cudaGetLastError();
}

__global__ void fill_kernel(char* dst, unsigned long long p0, unsigned long long p1,
                            size_t itemsize, int64_t count) {
  unsigned long long pattern[2] = {p0, p1};
  const char* bytes = (const char*)pattern;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    for (size_t b = 0; b < itemsize; ++b) dst[i * (int64_t)itemsize + b] = bytes[b];
  }
}

int dli_cuda_fill(void* dst, const void* pattern, size_t itemsize, int64_t count, int device,
                  void* stream) {
  if (itemsize == 0 || itemsize > 16) return (int)cudaErrorInvalidValue;
  if (count <= 0) return 0;
  unsigned long long words[2] = {0, 0};
  memcpy(words, pattern, itemsize);
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  int64_t blocks = (count + 255) / 256;
  fill_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, (cudaStream_t)stream>>>(
      (char*)dst, words[0], words[1], itemsize, count);
  return (int)cudaGetLastError();
}

int dli_cuda_stream_create(int device, void** out) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  return (int)cudaStreamCreateWithFlags((cudaStream_t*)out, cudaStreamNonBlocking);
}

int dli_cuda_stream_destroy(int device, void* stream) {
  DeviceGuard guard(device);
  cudaError_t err = cudaStreamDestroy((cudaStream_t)stream);
  return err == cudaErrorCudartUnloading ? 0 : (int)err;
}

int dli_cuda_stream_synchronize(void* stream) {
  return (int)cudaStreamSynchronize((cudaStream_t)stream);
}

int dli_cuda_device_synchronize(int device) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  return (int)cudaDeviceSynchronize();
}

int dli_cuda_stream_wait(int device, void* producer, void* consumer) {
  if (producer == consumer) return 0;
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  cudaEvent_t event;
  cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (err != cudaSuccess) return (int)err;
  err = cudaEventRecord(event, (cudaStream_t)producer);
  if (err == cudaSuccess) err = cudaStreamWaitEvent((cudaStream_t)consumer, event, 0);
  /* Destroying a recorded event is safe: the runtime frees it once the work completes. */
  cudaEventDestroy(event);
  return (int)err;
}

int dli_cuda_pointer_device(const void* ptr, int* device, int* device_type) {
  cudaPointerAttributes attributes;
  cudaError_t err = cudaPointerGetAttributes(&attributes, ptr);
  if (err != cudaSuccess) return (int)err;
  *device = attributes.device < 0 ? 0 : attributes.device;
  switch (attributes.type) {
    case cudaMemoryTypeDevice: *device_type = DLI_CUDA_DEVICE; break;
    case cudaMemoryTypeHost: *device_type = DLI_CUDA_HOST; break;
    case cudaMemoryTypeManaged: *device_type = DLI_CUDA_MANAGED; break;
    default: *device_type = 1; break;
  }
  return 0;
}

typedef int (*dli_mem_get_address_range_fn)(unsigned long long* base, size_t* size,
                                            unsigned long long ptr);

/* cuMemGetAddressRange from the driver the runtime loaded (no link against libcuda). */
static dli_mem_get_address_range_fn mem_get_address_range(void) {
  static dli_mem_get_address_range_fn fn = NULL;
  if (fn == NULL) {
    void* found = NULL;
    cudaDriverEntryPointQueryResult status;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &found, 12000, cudaEnableDefault,
                                         &status) == cudaSuccess &&
        status == cudaDriverEntryPointSuccess) {
      fn = (dli_mem_get_address_range_fn)found;
    } else {
      cudaGetLastError();
    }
  }
  return fn;
}

int dli_cuda_ipc_export(const void* ptr, int device, void* handle, size_t* offset, size_t* size) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  dli_mem_get_address_range_fn range = mem_get_address_range();
  unsigned long long base = 0;
  if (range == NULL) return (int)cudaErrorNotSupported;
  if (range(&base, size, (unsigned long long)(uintptr_t)ptr) != 0) {
    return (int)cudaErrorInvalidValue;
  }
  cudaIpcMemHandle_t h;
  cudaError_t err = cudaIpcGetMemHandle(&h, (void*)(uintptr_t)base);
  if (err != cudaSuccess) return (int)err;
  memcpy(handle, &h, sizeof h);
  *offset = (size_t)((uintptr_t)ptr - (uintptr_t)base);
  return 0;
}

int dli_cuda_ipc_open(const void* handle, int device, void** base, size_t* size) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  dli_mem_get_address_range_fn range = mem_get_address_range();
  unsigned long long start = 0;
  if (range == NULL) return (int)cudaErrorNotSupported;
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  cudaError_t err = cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) return (int)err;
  if (range(&start, size, (unsigned long long)(uintptr_t)*base) != 0) {
    cudaIpcCloseMemHandle(*base);
    return (int)cudaErrorInvalidValue;
  }
  return 0;
}

int dli_cuda_ipc_close(int device, void* base) {
  DeviceGuard guard(device);
  cudaError_t err = cudaIpcCloseMemHandle(base);
  if (err == cudaErrorCudartUnloading) err = cudaSuccess;
  return (int)err;
}

int dli_cuda_ipc_event_record(int device, void* stream, void* handle, void** event) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  cudaEvent_t e;
  cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming);
  if (err != cudaSuccess) return (int)err;
  err = cudaEventRecord(e, (cudaStream_t)stream);
  cudaIpcEventHandle_t h;
  if (err == cudaSuccess) err = cudaIpcGetEventHandle(&h, e);
  if (err != cudaSuccess) {
    cudaEventDestroy(e);
    return (int)err;
  }
  memcpy(handle, &h, sizeof h);
  *event = (void*)e;
  return 0;
}

int dli_cuda_ipc_event_wait(int device, const void* handle, void* stream) {
  DeviceGuard guard(device);
  if (guard.err != cudaSuccess) return (int)guard.err;
  cudaIpcEventHandle_t h;
  cudaEvent_t e;
  memcpy(&h, handle, sizeof h);
  cudaError_t err = cudaIpcOpenEventHandle(&e, h);
  if (err != cudaSuccess) return (int)err;
  err = cudaStreamWaitEvent((cudaStream_t)stream, e, 0);
  cudaEventDestroy(e);
  return (int)err;
}

int dli_cuda_event_destroy(int device, void* event) {
  DeviceGuard guard(device);
  cudaError_t err = cudaEventDestroy((cudaEvent_t)event);
  if (err == cudaErrorCudartUnloading) err = cudaSuccess;
  return (int)err;
}

void* dli_cuda_current_stream(int device) {
  return device >= 0 && device < DLI_MAX_DEVICES ? current_streams[device] : NULL;
}

void dli_cuda_set_current_stream(int device, void* stream) {
  if (device >= 0 && device < DLI_MAX_DEVICES) current_streams[device] = stream;
}

} /* extern "C" */
