# The core's side of the CUDA layer: every operation on memory the CPU cannot reach goes
# through these hooks. Without the CUDA allocator (dlinterop._cuda), they refuse cleanly.

cdef DLDevice _CPU
_CPU.device_type = kDLCPU
_CPU.device_id = 0


cdef bint _can_copy_to(DLDevice src, DLDevice dst):
    return _host_accessible(src.device_type) and dst.device_type == kDLCPU and dst.device_id == 0


cdef void* _device_alloc(size_t nbytes, size_t alignment, bint zero, DLDevice device,
                         void** base) except NULL:
    raise BufferError(f"dlinterop cannot allocate memory on {device_from_dl(device)}: "
                      "no allocator for that device is available")


cdef void _device_free(void* base, size_t nbytes, DLDevice device) noexcept:
    pass   # _device_alloc never succeeded, so there is nothing to free


cdef Tensor _device_copy(Tensor src, DLDevice target):
    raise BufferError(f"dlinterop cannot copy from {src.device} to {device_from_dl(target)}: "
                      "no allocator for that device is available")


cdef int _device_fill(Tensor t, bytes pattern, int64_t count) except -1:
    raise BufferError(f"dlinterop cannot write memory on {t.device}")


cdef int _cuda_stream_wait(Tensor t, object stream) except -1:
    return 0   # nothing is ever pending: dlinterop issues no CUDA work without the allocator


cdef DLDevice _cuda_device_of(uintptr_t pointer) except *:
    cdef DLDevice dev
    dev.device_type = kDLCUDA
    dev.device_id = 0   # without the CUDA runtime the pointer's device cannot be queried
    return dev


cdef int _cuda_wait_external_stream(object stream, DLDevice device) except -1:
    return 0


cdef void* _device_alloc_nogil(size_t nbytes, DLDevice device, void** base) noexcept nogil:
    return NULL   # no device allocator: the exchange API's allocator reports the failure


cdef void _device_free_nogil(void* base, size_t nbytes, DLDevice device) noexcept nogil:
    pass


cdef void* _cuda_current_stream_nogil(int32_t device_id) noexcept nogil:
    return NULL   # dlinterop issues no CUDA work without the allocator: the default stream


cdef bint _cuda_sync_exchange(const DLPackExchangeAPI* api,
                              DLManagedTensorVersioned* m) except -1:
    """Orders the consumer's stream after the producer's current work stream for a tensor
    imported through an exchange API. False when that cannot be done here."""
    return False
