# Provides: the core's side of the CUDA layer (dlinterop._cuda, loaded on first use): the
# hooks through which allocation, copies, fills, stream order and memory statistics reach
# memory the CPU alone cannot manage. CUDA IPC (cuda_ipc.pxi) calls the module's IPC
# functions itself, after _require_cuda.
# Uses: runtime.pxi, once.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi.

class CUDAError(RuntimeError):
    """A CUDA runtime failure: `code` is the cudaError_t value, the message the runtime's."""
    __module__ = "dlinterop.cuda"   # where users meet it (dl.cuda re-exports it)

    def __init__(self, code, message):
        super().__init__(f"CUDA error {code}: {message}")
        self.code = code


class CUDAOutOfMemoryError(CUDAError, MemoryError):
    """The CUDA allocator is out of memory."""
    __module__ = "dlinterop.cuda"


cdef object _cuda = None            # the dlinterop._cuda module once loaded
cdef const dli_cuda_table* _cuda_table = NULL
# SETUP_UNDECIDED until _load_cuda has published _cuda and _cuda_table (1), or found no
# module (0).
cdef Py_ssize_t _cuda_state = SETUP_UNDECIDED
_register_setup("cuda", &_cuda_state)


cdef object _load_cuda():
    """The dlinterop._cuda module, or None when it was not built. The import runs without a
    lock of ours (Python's import lock orders two threads importing it); the first thread
    to finish publishes it."""
    global _cuda, _cuda_table
    if dli_atomic_load(&_cuda_state) >= 0:
        return _cuda
    try:
        import dlinterop._cuda as module
    except ImportError:
        module = None
    if setup_claim(&_cuda_state):
        if module is not None:
            _cuda_table = <const dli_cuda_table*>PyCapsule_GetPointer(
                <PyObject*>module.c_table, "dlinterop._cuda.table")
            _cuda = module
        dli_atomic_store(&_cuda_state, module is not None)   # last: readers see the rest
    return module


def _cuda_module():
    """The dlinterop._cuda module, or None when it was not built: the one loader, which
    dlinterop.cuda uses too."""
    return _load_cuda()


cdef inline bint _cuda_streams_entered() noexcept:
    """True while a dl.cuda.Stream is entered on any thread (never without the module)."""
    return _cuda_table != NULL and _cuda_table.streams_entered() > 0


cdef int _cuda_consumer_wait(object obj) except -1:
    """For a capsule or a dl.Tensor on a CUDA device imported while a dl.cuda.Stream is
    current: that stream waits for dlinterop's own work on the device."""
    if type(obj) is Tensor and dli_device_cuda((<Tensor>obj).dl.device.device_type):
        _cuda.stream_wait((<Tensor>obj).dl.device.device_id, 0, 0)
    return 0


cdef str _host_hint(DLDevice device):
    """How to get memory on `device` to the host: dl's own copy for CUDA memory; for the
    devices dlinterop only carries (TPU, Ascend, ...), the framework that made it."""
    if dli_device_cuda(device.device_type):
        return "move it with .to('cpu') first"
    return (f"dlinterop carries memory on {_device_type_name(device.device_type)} but has no "
            "operations for it: copy it to the host with the framework that made it")


cdef object _require_cuda(DLDevice device):
    if not dli_device_cuda(device.device_type):
        raise BufferError(f"dlinterop cannot allocate or copy memory on "
                          f"{_device_type_name(device.device_type)}: it carries such memory "
                          "(import, export, views) but has no operations for that device")
    module = _load_cuda()
    if module is None:
        raise CUDAError(-1, f"memory on {device_from_dl(device)} needs the CUDA allocator, "
                            "and dlinterop was built without it")
    return module


cdef bint _can_copy_to(DLDevice src, DLDevice dst):
    """Whether _copy_tensor can copy memory on `src` to `dst`: by the host alone, or by the
    CUDA layer between devices dlinterop reaches, with a GPU."""
    if dli_device_host(dst.device_type) and dli_device_host_copies(src.device_type):
        return dst.device_id == 0
    if not (dli_device_reachable(src.device_type) and dli_device_reachable(dst.device_type)):
        return False
    module = _load_cuda()
    return module is not None and module.device_count() > 0


cdef void* _device_alloc(size_t nbytes, size_t alignment, bint zero, DLDevice device,
                         void** base) except NULL:
    # placement.pxi's _check_alignment refused an alignment CUDA cannot honour.
    module = _require_cuda(device)
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
    if _cuda_table == NULL or not dli_device_cuda(device.device_type):
        return NULL
    return _cuda_table.alloc_nogil(nbytes, device, base)


cdef void _device_free_nogil(void* base, size_t nbytes, DLDevice device) noexcept nogil:
    if _cuda_table != NULL:
        _cuda_table.free_nogil(base, nbytes, device)


cdef void* _cuda_current_stream_nogil(int32_t device_id) noexcept nogil:
    if _cuda_table == NULL:
        return NULL
    return _cuda_table.current_stream_nogil(device_id)


cdef int _device_fill(Tensor t, bytes pattern, int64_t count) except -1:
    module = _require_cuda(t.dl.device)
    module.fill(<uintptr_t>t.dl.data, pattern, count, t.dl.device.device_id)
    if dli_device_host_readable(t.dl.device.device_type):   # the host may read it at once
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
        # Memory the runtime does not know as its own (it says "host") is taken as the
        # device's, as the interface says.
        dev.device_type = <DLDeviceType><int>(device_type if dli_device_cuda(device_type)
                                              else kDLCUDA)
        dev.device_id = index
    return dev


cdef int _cuda_wait_external_stream(object stream, DLDevice device) except -1:
    """__cuda_array_interface__'s stream: our current stream waits for the producer's."""
    module = _load_cuda()
    if module is not None and module.device_count() > 0 and stream not in (None, -1):
        module.stream_wait(device.device_id, stream, 0)
    return 0


cdef bint _cuda_sync_exchange(const DLPackExchangeAPI* api, DLDevice device) except -1:
    """For device memory a producer's exchange table handed over: our current stream waits
    for the producer's current work stream. False when that cannot be done here (no CUDA
    layer, memory it does not manage, no stream from the producer)."""
    cdef void* producer = NULL
    if _load_cuda() is None or not dli_device_cuda(device.device_type):
        return False
    if api.current_work_stream == NULL or api.current_work_stream(
            device.device_type, device.device_id, &producer) != 0:
        PyErr_Clear()
        return False
    _cuda_wait_for_producer(device, producer)
    return True


cdef int order_for_consumer(Tensor t, const DLPackExchangeAPI* api) except -1:
    """Before a consumer that publishes `api` takes t's device memory without a stream
    argument (managed_tensor_to_py_object_no_sync): its current work stream waits for the
    work dlinterop issued. Nothing to do for host memory, or when dlinterop issued none."""
    cdef void* consumer = NULL
    if not dli_device_cuda(t.dl.device.device_type) or _cuda is None:
        return 0
    if api.current_work_stream == NULL:
        _cuda.synchronize(t.dl.device.device_id)
        return 0
    if api.current_work_stream(t.dl.device.device_type, t.dl.device.device_id, &consumer) != 0:
        return raise_pending_error()
    _cuda.stream_wait(t.dl.device.device_id, 0, <uintptr_t>consumer if consumer != NULL else 1)
    return 0


# The kind letter of a typestr per type code: dtypes.pxi's table, read the other way.
cdef dict _TYPESTR_KINDS = {code: kind for kind, code in _type_string_kinds.items()}


cdef dict _cuda_array_interface(Tensor self):
    """Tensor.__cuda_array_interface__: version 3 of Numba's CUDA array interface, for CUDA
    device and managed memory."""
    if not dli_device_cuda_gpu(self.dl.device.device_type):
        raise AttributeError(f"a tensor on {_device_of(self)} has no __cuda_array_interface__")
    cdef DType dt = dtype_from_dl(self.dl.dtype)
    typestr = _TYPESTR_KINDS.get(self.dl.dtype.code)
    if typestr is None or self.dl.dtype.lanes != 1:
        raise AttributeError(f"__cuda_array_interface__ cannot describe {dt.name}")
    stream = _cuda_current_stream(self.dl.device.device_id)
    return {
        "shape": _shape_of(self),
        "typestr": ("|" if dt.itemsize == 1 else "<") + typestr + str(dt.itemsize),
        "data": (<uintptr_t>self.dl.data + self.dl.byte_offset, _is_readonly(self)),
        "version": 3,
        "strides": None if is_c_contiguous(&self.dl) else tuple(
            [s * dt.itemsize for s in _strides_of(self)]),
        "stream": stream,
    }


cdef int _cuda_copy_bytes(uintptr_t dst, uintptr_t src, size_t nbytes, DLDevice gpu,
                          bint host_reads) except -1:
    """Copies nbytes between two addresses the runtime knows, on gpu's current stream; waits
    for it when the host reads the result."""
    _require_cuda(gpu).copy_contiguous(dst, src, nbytes, gpu.device_id, host_reads)
    return 0


cdef int _cuda_gather(uintptr_t dst, uintptr_t src, tuple shape, tuple strides,
                      size_t itemsize, DLDevice gpu) except -1:
    """Gathers a strided array gpu can read into contiguous memory it can write."""
    _require_cuda(gpu).gather(dst, src, shape, strides, itemsize, gpu.device_id)
    return 0


cdef int _cuda_wait_for_current(DLDevice gpu) except -1:
    """Blocks the host until gpu's current stream has done its work."""
    module = _require_cuda(gpu)
    module.stream_synchronize(module.current_stream_ptr(gpu.device_id))
    return 0


cdef object _cuda_enter_stream(DLDevice gpu, object stream):
    """Makes `stream` (DLPack's numbering: 1 legacy default, 2 per-thread default, else a
    cudaStream_t) gpu's current stream on this thread; returns what to restore."""
    module = _require_cuda(gpu)
    if stream == 0 or stream < -1:
        raise ValueError(f"invalid CUDA stream {stream}")
    return module.enter_stream(gpu.device_id, 0 if stream == 1 else stream)


cdef int _cuda_exit_stream(DLDevice gpu, object previous) except -1:
    _require_cuda(gpu).exit_stream(gpu.device_id, previous)
    return 0


cdef object _cuda_current_stream(int32_t device_id):
    """The stream dlinterop works on for a device, as DLPack numbers streams (1: the legacy
    default stream)."""
    return (_cuda.current_stream_ptr(device_id) or 1) if _cuda is not None else 1


cdef int _cuda_wait_for_producer(DLDevice device, void* producer) except -1:
    """Our current stream on `device` waits for the work so far on `producer` (NULL: the
    legacy default stream). Nothing to do before the CUDA layer is loaded."""
    if _cuda is not None:
        _cuda.stream_wait(device.device_id, <uintptr_t>producer if producer != NULL else 1, 0)
    return 0


cdef dict _cuda_stats(DLDevice device):
    module = _require_cuda(device)
    return module.memory_stats(<int>device.device_type, device.device_id)
