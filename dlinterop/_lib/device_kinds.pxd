# The table of device kinds (src/device_kinds.h): one row per DLPack device type, with what
# every rule asks of memory there (host-readable, streams, who allocates and copies it, CUDA
# IPC, the names). Inline C, compiled into each module that cimports this file; no module of
# its own (as threadsafe.pxd). The core's Python view of it is in core/devices.pxi.
from libc.stdint cimport int32_t, uint32_t


cdef extern from "device_kinds.h" nogil:
    enum:
        DLI_KIND_HOST
        DLI_KIND_HOST_READABLE
        DLI_KIND_PINNED
        DLI_KIND_STREAMS
        DLI_KIND_STREAM_ZERO
        DLI_KIND_CUDA
        DLI_KIND_CUDA_GPU
        DLI_KIND_CUDA_IPC
        DLI_DEVICE_TYPES

    ctypedef struct dli_device_kind:
        const char* name
        uint32_t flags
        uint32_t alignment
        const char* torch

    const dli_device_kind* dli_device_kind_of(int32_t device_type) noexcept
    bint dli_device_known(int32_t device_type) noexcept
    bint dli_device_host(int32_t device_type) noexcept
    bint dli_device_host_readable(int32_t device_type) noexcept
    bint dli_device_pinned(int32_t device_type) noexcept
    bint dli_device_streams(int32_t device_type) noexcept
    bint dli_device_stream_zero(int32_t device_type) noexcept
    bint dli_device_cuda(int32_t device_type) noexcept
    bint dli_device_cuda_gpu(int32_t device_type) noexcept
    bint dli_device_cuda_ipc(int32_t device_type) noexcept
    bint dli_device_reachable(int32_t device_type) noexcept
    bint dli_device_host_copies(int32_t device_type) noexcept
