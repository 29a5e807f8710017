# Provides: copies between devices and layouts (_copy_tensor, _copy_on_stream) and
# zero_fill; placement.pxi decides when they are made.
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, cuda.pxi, allocator.pxi.

cdef Tensor _copy_tensor(Tensor src, DLDevice target):
    """A new C-contiguous copy of `src` on `target`: made by the host into plain host memory
    from memory it copies out of itself (the table's dli_device_host_copies), else by the
    CUDA layer."""
    cdef Tensor out
    if not (dli_device_host(target.device_type)
            and dli_device_host_copies(src.dl.device.device_type)):
        return _device_copy(src, target)
    out = _allocate(src.dl.ndim, src.dl.shape, src.dl.dtype, target, DEFAULT_ALIGNMENT, False)
    _copy_into(out, src)
    return out


cdef int _copy_into(Tensor out, Tensor src) except -1:
    """Copies host memory `src` (any strides) into `out`, a new C-contiguous tensor of its
    shape and type."""
    cdef int64_t nbytes
    if _is_packed_subbyte(src.dl.dtype):
        if is_c_contiguous(&src.dl):
            nbytes = storage_bytes(element_count(&src.dl), src.dl.dtype)
            memcpy(out.dl.data, <char*>src.dl.data + src.dl.byte_offset, <size_t>nbytes)
        else:
            with nogil:
                dli_pack_codes(<uint8_t*>out.dl.data,
                               <const uint8_t*>src.dl.data + src.dl.byte_offset, src.dl.ndim,
                               src.dl.shape, src.dl.strides, src.dl.dtype.bits,
                               src.dl.dtype.bits)
    else:
        with nogil:
            dli_copy_to_contiguous(<char*>out.dl.data, <char*>src.dl.data + src.dl.byte_offset,
                                   src.dl.ndim, src.dl.shape, src.dl.strides,
                                   item_bytes(src.dl.dtype))
    return 0


cdef Tensor _device_copy(Tensor src, DLDevice target):
    """Copies to or from memory the CUDA runtime manages, on the current stream."""
    cdef DLDevice gpu = src.dl.device if dli_device_host(target.device_type) else target
    _require_cuda(gpu)
    cdef Tensor staged = src
    cdef Tensor out
    if dli_device_host(src.dl.device.device_type) and not is_c_contiguous(&src.dl):
        staged = _copy_tensor(src, _CPU)   # gather on the host first
    out = _allocate(src.dl.ndim, src.dl.shape, src.dl.dtype, target, DEFAULT_ALIGNMENT, False)
    cdef uintptr_t source = <uintptr_t>staged.dl.data + staged.dl.byte_offset
    cdef size_t itemsize = item_bytes(src.dl.dtype)
    host_reads = dli_device_host_readable(target.device_type)
    if is_c_contiguous(&staged.dl):
        _cuda_copy_bytes(<uintptr_t>out.dl.data, source, out.alloc_nbytes, gpu, host_reads)
    else:
        if _is_packed_subbyte(src.dl.dtype):
            raise BufferError("cannot copy a strided tensor of a packed sub-byte type")
        # Gather on the source's device into the output (when the device can write it), or
        # into a device buffer first.
        if dli_device_host(target.device_type):
            tmp = _allocate(src.dl.ndim, src.dl.shape, src.dl.dtype, src.dl.device,
                            DEFAULT_ALIGNMENT, False)
            _cuda_gather(<uintptr_t>tmp.dl.data, source, _shape_of(staged), _strides_of(staged),
                         itemsize, src.dl.device)
            _cuda_copy_bytes(<uintptr_t>out.dl.data, <uintptr_t>tmp.dl.data, out.alloc_nbytes,
                             src.dl.device, True)
        else:
            _cuda_gather(<uintptr_t>out.dl.data, source, _shape_of(staged), _strides_of(staged),
                         itemsize, gpu)
            if host_reads:
                _cuda_wait_for_current(gpu)
    return out


cdef Tensor _copy_on_stream(Tensor src, DLDevice target, object stream):
    """_copy_tensor with `stream` (1: legacy default, 2: per-thread default, else a
    cudaStream_t) current on the GPU's device for the copy, as dl.cuda.Stream makes it."""
    cdef DLDevice gpu = target if dli_device_cuda(target.device_type) else src.dl.device
    previous = _cuda_enter_stream(gpu, stream)
    try:
        return _copy_tensor(src, target)
    finally:
        _cuda_exit_stream(gpu, previous)


cdef int zero_fill(Tensor t) except -1:
    """Fills a C-contiguous tensor's memory with zero bytes, on its device."""
    cdef int64_t nbytes = storage_bytes(element_count(&t.dl), t.dl.dtype)
    if t.flags & DLPACK_FLAG_BITMASK_READ_ONLY:
        raise BufferError("cannot fill a read-only tensor")
    if nbytes == 0:
        return 0
    if dli_device_host(t.dl.device.device_type):
        memset(<char*>t.dl.data + t.dl.byte_offset, 0, <size_t>nbytes)
    else:
        _device_fill(t, b"\0", nbytes)
    return 0
