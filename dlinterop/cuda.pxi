# The core's side of the CUDA layer: every operation on memory the CPU alone cannot manage
# goes through these hooks, which call dlinterop._cuda (loaded on first use). Without it,
# they refuse with a clear exception; device_count() is then 0.

cdef DLDevice _CPU
_CPU.device_type = kDLCPU
_CPU.device_id = 0

cdef object _cuda = None            # the dlinterop._cuda module once loaded
cdef bint _cuda_tried = False
cdef const dli_cuda_table* _cuda_table = NULL


cdef inline bint _is_cuda_memory(DLDeviceType device_type) noexcept nogil:
    return (device_type == kDLCUDA or device_type == kDLCUDAHost
            or device_type == kDLCUDAManaged)


cdef object _load_cuda():
    """The dlinterop._cuda module, or None when it was not built."""
    global _cuda, _cuda_tried, _cuda_table
    if not _cuda_tried:
        with _cuda_lock:
            if not _cuda_tried:
                try:
                    import dlinterop._cuda as module
                except ImportError:
                    module = None
                if module is not None:
                    _cuda_table = <const dli_cuda_table*>PyCapsule_GetPointer(
                        <PyObject*>module.c_table, "dlinterop._cuda.table")
                    _cuda = module
                _cuda_tried = True    # last: a thread that sees it sees the module too
    return _cuda


cdef inline bint _cuda_streams_entered() noexcept:
    """True while a dl.cuda.Stream is entered on any thread (never without the module)."""
    return _cuda_table != NULL and _cuda_table.streams_entered() > 0


cdef int _cuda_consumer_wait(object obj) except -1:
    """For a capsule or a dl.Tensor on a CUDA device imported while a dl.cuda.Stream is
    current: that stream waits for dlinterop's own work on the device."""
    if type(obj) is Tensor and _is_cuda_memory((<Tensor>obj).dl.device.device_type):
        _cuda.stream_wait((<Tensor>obj).dl.device.device_id, 0, 0)
    return 0


cdef object _require_cuda(DLDevice device):
    if not _is_cuda_memory(device.device_type):
        raise BufferError(f"dlinterop has no allocator for {device_from_dl(device)}")
    module = _load_cuda()
    if module is None:
        from dlinterop.cuda import CUDAError
        raise CUDAError(-1, f"memory on {device_from_dl(device)} needs the CUDA allocator, "
                            "and dlinterop was built without it")
    return module


cdef bint _can_copy_to(DLDevice src, DLDevice dst):
    if src.device_type == kDLCPU and dst.device_type == kDLCPU:
        return dst.device_id == 0
    if not (_is_cuda_memory(src.device_type) or src.device_type == kDLCPU):
        return False
    if not (_is_cuda_memory(dst.device_type) or dst.device_type == kDLCPU):
        return False
    module = _load_cuda()
    return module is not None and module.device_count() > 0


cdef void* _device_alloc(size_t nbytes, size_t alignment, bint zero, DLDevice device,
                         void** base) except NULL:
    module = _require_cuda(device)
    if alignment > 256:
        raise ValueError(f"CUDA allocations are 256-byte aligned; alignment={alignment} "
                         "cannot be honoured")
    cdef uintptr_t ptr = module.alloc(nbytes, <int>device.device_type, device.device_id, zero)
    base[0] = <void*>ptr
    return <void*>ptr


cdef void _device_free(void* base, size_t nbytes, DLDevice device) noexcept:
    # Called from Tensor.__dealloc__ with the GIL held; an error here can only be reported.
    try:
        if _cuda is not None:
            _cuda.release(<uintptr_t>base, nbytes, <int>device.device_type, device.device_id)
    except BaseException:
        pass


cdef void* _device_alloc_nogil(size_t nbytes, DLDevice device, void** base) noexcept nogil:
    if _cuda_table == NULL or not _is_cuda_memory(device.device_type):
        return NULL
    return _cuda_table.alloc_nogil(nbytes, device, base)


cdef void _device_free_nogil(void* base, size_t nbytes, DLDevice device) noexcept nogil:
    if _cuda_table != NULL:
        _cuda_table.free_nogil(base, nbytes, device)


cdef void* _cuda_current_stream_nogil(int32_t device_id) noexcept nogil:
    if _cuda_table == NULL:
        return NULL
    return _cuda_table.current_stream_nogil(device_id)


cdef Tensor _device_copy(Tensor src, DLDevice target):
    """Copies to or from memory the CUDA runtime manages, on the current stream."""
    cdef DLDevice gpu = target if target.device_type != kDLCPU else src.dl.device
    module = _require_cuda(gpu)
    cdef Tensor staged = src
    cdef Tensor out
    if src.dl.device.device_type == kDLCPU and not _is_c_contiguous(&src.dl):
        staged = _copy_tensor(src, _CPU)   # gather on the host first
    out = _allocate(src.dl.ndim, src.dl.shape, src.dl.dtype, target, DEFAULT_ALIGNMENT, False)
    cdef uintptr_t source = <uintptr_t>staged.dl.data + staged.dl.byte_offset
    cdef size_t itemsize = (src.dl.dtype.bits * src.dl.dtype.lanes + 7) // 8
    host_reads = target.device_type != kDLCUDA
    if _is_c_contiguous(&staged.dl):
        module.copy_contiguous(<uintptr_t>out.dl.data, source, out.alloc_nbytes,
                               gpu.device_id, host_reads)
    else:
        if _is_packed_subbyte(src.dl.dtype):
            raise BufferError("cannot copy a strided tensor of a packed sub-byte type")
        # Gather on the source's device into the output (when the device can write it), or
        # into a device buffer first.
        if target.device_type == kDLCPU:
            tmp = _allocate(src.dl.ndim, src.dl.shape, src.dl.dtype, src.dl.device,
                            DEFAULT_ALIGNMENT, False)
            module.gather(<uintptr_t>tmp.dl.data, source, staged.shape, staged.strides,
                          itemsize, src.dl.device.device_id)
            module.copy_contiguous(<uintptr_t>out.dl.data, <uintptr_t>tmp.dl.data,
                                   out.alloc_nbytes, src.dl.device.device_id, True)
        else:
            module.gather(<uintptr_t>out.dl.data, source, staged.shape, staged.strides,
                          itemsize, gpu.device_id)
            if host_reads:
                module.stream_synchronize(module.current_stream_ptr(gpu.device_id))
    return out


cdef int _device_fill(Tensor t, bytes pattern, int64_t count) except -1:
    module = _require_cuda(t.dl.device)
    module.fill(<uintptr_t>t.dl.data, pattern, count, t.dl.device.device_id)
    if t.dl.device.device_type != kDLCUDA:
        module.stream_synchronize(module.current_stream_ptr(t.dl.device.device_id))
    return 0


cdef int _cuda_stream_wait(Tensor t, object stream) except -1:
    """Makes the consumer's stream wait for the work dlinterop issued for this tensor.
    Without the CUDA module loaded, dlinterop never issued any."""
    if _cuda is None or stream == -1:
        return 0
    _cuda.stream_wait(t.dl.device.device_id, 0, stream)
    return 0


cdef DLDevice _cuda_device_of(uintptr_t pointer) except *:
    cdef DLDevice dev
    dev.device_type = kDLCUDA
    dev.device_id = 0
    module = _load_cuda()
    if module is not None and module.device_count() > 0:
        device_type, index = module.pointer_device(pointer)
        dev.device_type = <DLDeviceType><int>(device_type if device_type != kDLCPU else kDLCUDA)
        dev.device_id = index
    return dev


cdef int _cuda_wait_external_stream(object stream, DLDevice device) except -1:
    """__cuda_array_interface__'s stream: our current stream waits for the producer's."""
    module = _load_cuda()
    if module is not None and module.device_count() > 0 and stream not in (None, -1):
        module.stream_wait(device.device_id, stream, 0)
    return 0


cdef bint _cuda_sync_exchange(const DLPackExchangeAPI* api,
                              DLManagedTensorVersioned* m) except -1:
    """For a tensor imported through an exchange API: our current stream waits for the
    producer's current work stream. False when that cannot be done here."""
    cdef void* producer = NULL
    module = _load_cuda()
    if module is None or not _is_cuda_memory(m.dl_tensor.device.device_type):
        return False
    if api.current_work_stream == NULL or api.current_work_stream(
            m.dl_tensor.device.device_type, m.dl_tensor.device.device_id, &producer) != 0:
        PyErr_Clear()
        return False
    module.stream_wait(m.dl_tensor.device.device_id,
                       <uintptr_t>producer if producer != NULL else 1, 0)
    return True


cdef dict _cuda_stats(DLDevice device):
    module = _require_cuda(device)
    return module.memory_stats(<int>device.device_type, device.device_id)
