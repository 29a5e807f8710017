/*
 * The table of device kinds: one row per DLPack device type (DLDeviceType in
 * include/dlpack/dlpack.h), saying what every rule of dlinterop asks of memory on that
 * device. Placement, streams, host reads, copies, fills, allocation, CUDA IPC, the exchange
 * table, the integrations and the conformance checker read it, and nothing else answers
 * those questions: a new device is one row below (CONTRIBUTING.md, "A new device").
 *
 * The rows are a list macro, DLI_DEVICE_KINDS, read three ways: as the array
 * dli_device_kinds (names and columns, for cold code and the Python view in
 * dlinterop/core/devices.pxi, which also makes dl.DeviceType from it); as one bit mask of
 * device types per question, a compile-time constant (DLI_DEVICE_MASK); and by the
 * predicates at the end, which test a device type against a mask. A predicate on a hot path
 * costs what a comparison with a constant does: a mask of one device type compiles to that
 * comparison (the export's "plain host memory?"), a larger one to a bounds check and a shift.
 *
 * Included through dlinterop/_lib/device_kinds.pxd, so compiled into each module that
 * cimports it (dlinterop._core, dlinterop.testing._conformance), and by the core's C that
 * asks (src/numpy_route.c).
 */
#ifndef DLINTEROP_DEVICE_KINDS_H_
#define DLINTEROP_DEVICE_KINDS_H_

#include <stddef.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

/* What a row says of memory on its device: one bit per question. */
enum {
  /* Plain host memory, what malloc gives: dlinterop's host allocator makes, fills and frees
     it, memcpy copies it, no runtime orders it; one device, index 0. */
  DLI_KIND_HOST = 1 << 0,
  /* The CPU reads and writes it directly: values, the buffer protocol, NumPy arrays,
     pickling by value, assignment. NumPy's from_dlpack takes exactly these device types. */
  DLI_KIND_HOST_READABLE = 1 << 1,
  /* Page-locked host memory: its pages are taken when it is made. */
  DLI_KIND_PINNED = 1 << 2,
  /* A GPU runtime orders it by streams: stream= takes an int (-1: no ordering), where every
     other device takes None or -1 only (DLPack's Python specification). */
  DLI_KIND_STREAMS = 1 << 3,
  /* Stream 0 is its runtime's default stream (ROCm); with streams but without this bit, 0
     is refused as ambiguous (CUDA: 1 is the legacy default stream, 2 the per-thread one). */
  DLI_KIND_STREAM_ZERO = 1 << 4,
  /* The CUDA layer (dlinterop._cuda) allocates, copies and fills it, orders dlinterop's
     work on it, and counts it in memory_stats. */
  DLI_KIND_CUDA = 1 << 5,
  /* On one GPU, device_id its ordinal: it has that GPU's current stream (the exchange
     table's current_work_stream), and __cuda_array_interface__ describes it. */
  DLI_KIND_CUDA_GPU = 1 << 6,
  /* CUDA IPC hands it to another process (shared=True, dl.share, multiprocessing). */
  DLI_KIND_CUDA_IPC = 1 << 7,
};

/* The alignment the CUDA layer's allocations have, and the most it can honour. */
#define DLI_CUDA_ALIGNMENT 256

/* The rows, ROW(X, value, name, alignment, torch, flags), X passed through:
     value      the DLDeviceType;
     name       dl.DeviceType's member, lower case: Device.type and the name a device
                string starts with ("cuda_host:0");
     alignment  the alignment dlinterop's allocations there have, and the most they can be
                asked for; 0: any (the host's), or dlinterop allocates nothing there;
     torch      the torch.device type torch.from_dlpack gives such memory (in its CUDA and
                CPU builds; a ROCm build calls ROCm memory "cuda"); NULL: torch refuses it;
     flags      DLI_KIND_* bits (0: dlinterop carries such memory, and does nothing more).
   Only dlinterop's own answers are here; what NumPy calls a device follows from a flag (it
   takes host-readable memory, as "cpu"). */
/* clang-format off */
#define DLI_DEVICE_KINDS(ROW, X)                                                                   \
  ROW(X, kDLCPU, "cpu", 0, "cpu",                                                                  \
      DLI_KIND_HOST | DLI_KIND_HOST_READABLE)                                                      \
  ROW(X, kDLCUDA, "cuda", DLI_CUDA_ALIGNMENT, "cuda",                                              \
      DLI_KIND_STREAMS | DLI_KIND_CUDA | DLI_KIND_CUDA_GPU | DLI_KIND_CUDA_IPC)                    \
  ROW(X, kDLCUDAHost, "cuda_host", DLI_CUDA_ALIGNMENT, NULL,                                       \
      DLI_KIND_HOST_READABLE | DLI_KIND_PINNED | DLI_KIND_STREAMS | DLI_KIND_CUDA)                 \
  ROW(X, kDLOpenCL, "opencl", 0, "opencl", 0)                                                      \
  ROW(X, kDLVulkan, "vulkan", 0, NULL, 0)                                                          \
  ROW(X, kDLMetal, "metal", 0, "mps", 0)                                                           \
  ROW(X, kDLVPI, "vpi", 0, NULL, 0)                                                                \
  ROW(X, kDLROCM, "rocm", 0, "hip",                                                                \
      DLI_KIND_STREAMS | DLI_KIND_STREAM_ZERO)                                                     \
  ROW(X, kDLROCMHost, "rocm_host", 0, NULL,                                                        \
      DLI_KIND_HOST_READABLE | DLI_KIND_PINNED | DLI_KIND_STREAMS | DLI_KIND_STREAM_ZERO)          \
  ROW(X, kDLExtDev, "ext_dev", 0, "privateuseone", 0)                                              \
  ROW(X, kDLCUDAManaged, "cuda_managed", DLI_CUDA_ALIGNMENT, NULL,                                 \
      DLI_KIND_HOST_READABLE | DLI_KIND_STREAMS | DLI_KIND_CUDA | DLI_KIND_CUDA_GPU)               \
  ROW(X, kDLOneAPI, "oneapi", 0, "xpu", 0)                                                         \
  ROW(X, kDLWebGPU, "webgpu", 0, NULL, 0)                                                          \
  ROW(X, kDLHexagon, "hexagon", 0, NULL, 0)                                                        \
  ROW(X, kDLMAIA, "maia", 0, "maia", 0)                                                            \
  ROW(X, kDLTrn, "trn", 0, NULL, 0)                                                                \
  ROW(X, kDLTPU, "tpu", 0, NULL, 0)                                                                \
  ROW(X, kDLTPUHost, "tpu_host", 0, NULL, 0)                                                       \
  ROW(X, kDLAscend, "ascend", 0, NULL, 0)
/* clang-format on */

/* Every device type is below this: a mask is 32 bits (checked per row below). */
#define DLI_DEVICE_TYPES 32

typedef struct {
  const char* name; /* NULL where DLPack defines no device type of this value */
  uint32_t flags;
  uint32_t alignment;
  const char* torch;
} dli_device_kind;

#define DLI_KIND_ROW_(X, value, name, alignment, torch, flags) \
  [value] = {name, flags, alignment, torch},
static const dli_device_kind dli_device_kinds[DLI_DEVICE_TYPES] = {
    DLI_DEVICE_KINDS(DLI_KIND_ROW_, 0)};

#define DLI_KIND_CHECK_ROW_(X, value, name, alignment, torch, flags) \
  _Static_assert((value) > 0 && (value) < DLI_DEVICE_TYPES, "a device type outside the masks");
DLI_DEVICE_KINDS(DLI_KIND_CHECK_ROW_, 0)

/* The device types whose rows have every bit of `want` (0: every row, the device types DLPack
   defines), one bit per device type: a constant. */
#define DLI_KIND_MASK_ROW_(want, value, name, alignment, torch, flags) \
  | ((((flags) & (want)) == (want)) ? 1u << (value) : 0u)
#define DLI_DEVICE_MASK(want) (0u DLI_DEVICE_KINDS(DLI_KIND_MASK_ROW_, want))

/* Whether device_type (any int32: a C caller's or a producer's value) is in `mask`. */
static inline int dli_device_in(int32_t device_type, uint32_t mask) {
  return (uint32_t)device_type < DLI_DEVICE_TYPES && ((mask >> device_type) & 1u);
}

/* The row of device_type, or NULL where DLPack defines no such device type. */
static inline const dli_device_kind* dli_device_kind_of(int32_t device_type) {
  return dli_device_in(device_type, DLI_DEVICE_MASK(0)) ? &dli_device_kinds[device_type] : NULL;
}

/* The questions, one predicate each (the flags above say what each means). */
static inline int dli_device_known(int32_t t) { return dli_device_in(t, DLI_DEVICE_MASK(0)); }
static inline int dli_device_host(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_HOST));
}
static inline int dli_device_host_readable(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_HOST_READABLE));
}
static inline int dli_device_pinned(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_PINNED));
}
static inline int dli_device_streams(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_STREAMS));
}
static inline int dli_device_stream_zero(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_STREAM_ZERO));
}
static inline int dli_device_cuda(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_CUDA));
}
static inline int dli_device_cuda_gpu(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_CUDA_GPU));
}
static inline int dli_device_cuda_ipc(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_CUDA_IPC));
}

/* Memory dlinterop allocates, fills and copies: its host allocator's or the CUDA layer's. */
static inline int dli_device_reachable(int32_t t) {
  return dli_device_in(t, DLI_DEVICE_MASK(DLI_KIND_HOST) | DLI_DEVICE_MASK(DLI_KIND_CUDA));
}

/* Memory the host copies out of by itself, into plain host memory: plain host memory, and
   host-readable memory no layer of dlinterop manages (ROCm's: dlinterop has no ROCm
   runtime). The CUDA layer copies its own host-readable memory, in its stream order. */
static inline int dli_device_host_copies(int32_t t) {
  return dli_device_in(
      t, DLI_DEVICE_MASK(DLI_KIND_HOST) |
             (DLI_DEVICE_MASK(DLI_KIND_HOST_READABLE) & ~DLI_DEVICE_MASK(DLI_KIND_CUDA)));
}

#endif /* DLINTEROP_DEVICE_KINDS_H_ */
