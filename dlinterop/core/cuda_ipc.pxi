# Provides: CUDA Tensors that cross process boundaries through CUDA IPC: IPC-capable device
# memory (shared=True, dl.share on CUDA), the handle a sender makes (_cuda_ipc_handle) and
# the Tensor a receiver maps (_tensor_from_cuda_ipc).
# Uses: dtypes.pxi, devices.pxi, tensor_base.pxi, layouts.pxi, cuda.pxi, allocator.pxi,
# shared.pxi (the receivers' count).

cdef extern from "cuda_layer.h":
    enum: DLI_CUDA_DEVICE_IPC


@cython.final
@cython.no_gc
cdef class _CudaIpcBuffer:
    """Device memory from cudaMalloc, which CUDA IPC can hand to another process (the
    stream-ordered pool dlinterop allocates from otherwise cannot be): what a CUDA Tensor
    made with shared=True, or by dl.share, holds."""
    cdef uintptr_t ptr
    cdef size_t nbytes
    cdef int device

    def __dealloc__(self):
        if self.ptr and _cuda is not None:
            try:
                _cuda.release(self.ptr, self.nbytes, DLI_CUDA_DEVICE_IPC, self.device)
            except BaseException:
                pass
            self.ptr = 0


cdef Tensor _allocate_cuda_ipc(int ndim, const int64_t* shape, DLDataType dt, DLDevice device,
                               bint zero):
    """A new C-contiguous CUDA Tensor in IPC-capable device memory of its own."""
    if not dli_device_cuda_ipc(device.device_type):
        raise ValueError(f"shared=True makes host or CUDA device memory, not memory on "
                         f"{device_from_dl(device)}")
    cdef int64_t nbytes = checked_nbytes(ndim, shape, dt, device)
    module = _require_cuda(device)
    cdef _CudaIpcBuffer buffer = _CudaIpcBuffer.__new__(_CudaIpcBuffer)
    buffer.ptr = module.alloc(<size_t>nbytes, DLI_CUDA_DEVICE_IPC, device.device_id, zero)
    buffer.nbytes = <size_t>nbytes
    buffer.device = device.device_id
    return _new_contiguous(ndim, shape, dt, device, <void*>buffer.ptr, buffer)


cdef Tensor _share_cuda(Tensor src):
    """A copy of CUDA Tensor `src` in IPC-capable memory, issued on the current stream."""
    cdef Tensor out = _allocate_cuda_ipc(src.dl.ndim, src.dl.shape, src.dl.dtype, src.dl.device,
                                         False)
    cdef uintptr_t source = <uintptr_t>src.dl.data + src.dl.byte_offset
    if is_c_contiguous(&src.dl):
        _cuda_copy_bytes(<uintptr_t>out.dl.data, source, (<_CudaIpcBuffer>out.owner_ref).nbytes,
                         src.dl.device, False)
    elif _is_packed_subbyte(src.dl.dtype):
        raise BufferError("cannot copy a strided tensor of a packed sub-byte type")
    else:
        _cuda_gather(<uintptr_t>out.dl.data, source, _shape_of(src), _strides_of(src),
                     item_bytes(src.dl.dtype), src.dl.device)
    return out


def _share_cuda_tensor(Tensor t not None):
    """What multiprocessing sends for a CUDA Tensor whose memory CUDA IPC cannot hand out (a
    stream-ordered pool's): a copy in memory it can."""
    return _share_cuda(t)


cdef bint _is_cuda_ipc_memory(Tensor t):
    return type(_memory_owner(t)) is _CudaIpcBuffer


@cython.final
cdef class _CudaIpcMapping:
    """Another process's CUDA allocation mapped into this one (cudaIpcOpenMemHandle), once
    per process and handle; unmapped when the last Tensor over it goes."""
    cdef uintptr_t base
    cdef size_t size
    cdef int device
    cdef object __weakref__

    def __dealloc__(self):
        if self.base and _cuda is not None:
            try:
                _cuda.ipc_close(self.device, self.base)
            except BaseException:
                pass
            self.base = 0


@cython.final
cdef class _CudaIpcReceipt:
    """What a Tensor received through CUDA IPC holds: the mapping, and the sender's count of
    receivers (a shared int64), which goes down when it dies: the sender lets its memory go
    once the count is 0."""
    cdef object mapping
    cdef object counter

    def __dealloc__(self):
        counter, self.counter = self.counter, None
        if counter is not None:
            try:
                _shared_counter_add(counter, -1)
            except BaseException:
                pass


# handle -> its _CudaIpcMapping while a Tensor holds it (a handle is opened once per
# process); made on first use, so that import dlinterop does not import weakref (~0.9 ms).
cdef object _cuda_ipc_mappings = None


cdef object _ipc_mappings():
    global _cuda_ipc_mappings
    if _cuda_ipc_mappings is None:
        import weakref
        _cuda_ipc_mappings = weakref.WeakValueDictionary()
    return _cuda_ipc_mappings


def _cuda_ipc_handle(Tensor t not None):
    """What a CUDA Tensor gives CUDA IPC (a CudaIpcExport, dlinterop/_lib/handles.py). The
    event is recorded on this thread's current stream, so that the receiver's stream can
    wait for the work issued so far; the sender destroys it once every receiver is done."""
    from dlinterop._lib.handles import CudaIpcExport

    if not dli_device_cuda_ipc(t.dl.device.device_type):
        raise BufferError(f"only CUDA device memory crosses through CUDA IPC, not {_device_of(t)}")
    module = _require_cuda(t.dl.device)
    handle, offset, size = module.ipc_export(<uintptr_t>t.dl.data + t.dl.byte_offset,
                                             t.dl.device.device_id)
    event_handle, event = module.ipc_event_record(t.dl.device.device_id)
    return CudaIpcExport(handle, offset, event_handle, event)


def _tensor_from_cuda_ipc(bytes handle, offset, int device, bytes event_handle, shape, strides,
                          dtype_triple, readonly, counter):
    """The CUDA Tensor a CudaIpcHandle's fields describe (dlinterop/_lib/handles.py), over
    another process's memory; this thread's current stream waits for the sender's work
    first. Every part of the handle is checked (the allocation's size is the driver's, not
    the message's)."""
    cdef HandleLayout layout
    cdef _CudaIpcMapping mapping
    cdef _CudaIpcReceipt receipt
    if type(readonly) is not bool:
        raise TypeError("a CUDA Tensor's readonly is a bool (dlinterop/_lib/handles.py, "
                        f"CudaIpcHandle), not {readonly!r}")
    _read_handle_layout(offset, shape, strides, dtype_triple, &layout)
    _check_counter(counter)    # else the receipt would fail to count down, unseen, at its end
    module = _require_cuda(_cuda_device(device))
    mappings = _ipc_mappings()
    mapping = mappings.get(handle)
    if mapping is None:
        base, size = module.ipc_open(handle, device)
        mapping = _CudaIpcMapping.__new__(_CudaIpcMapping)
        mapping.base, mapping.size, mapping.device = base, size, device
        mappings[handle] = mapping
    cdef Tensor t = _tensor_from_handle(&layout, <void*>mapping.base, mapping.size,
                                        _cuda_device(device), readonly)
    module.ipc_event_wait(device, event_handle)
    receipt = _CudaIpcReceipt.__new__(_CudaIpcReceipt)
    receipt.mapping = mapping
    receipt.counter = counter
    t.owner_ref = receipt
    return t


cdef DLDevice _cuda_device(int device) except *:
    cdef DLDevice dev
    if device < 0:
        raise ValueError(f"negative CUDA device index {device}")
    dev.device_type = kDLCUDA
    dev.device_id = device
    return dev
