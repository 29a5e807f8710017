# The DLPack 1.3 C exchange API: dlinterop's own table (published on the Tensor type), and
# the consumer side that from_dlpack uses for producer types that publish one (PyTorch).

cdef const char* EXCHANGE_API_NAME = "dlpack_exchange_api"


# ---- producer -------------------------------------------------------------------------

ctypedef struct AllocatedTensor:
    # One malloc: the managed tensor the allocator hands out, the buffer's base pointer and
    # size for the free, then shape and strides.
    DLManagedTensorVersioned managed
    void* base
    size_t nbytes


cdef void _allocated_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    # Pure C, so that it is safe on any thread at any time, interpreter or not.
    cdef AllocatedTensor* block = <AllocatedTensor*>m
    if block == NULL:
        return
    if block.managed.dl_tensor.device.device_type == kDLCPU:
        dli_host_free(block.base, block.nbytes)
    else:
        _device_free_nogil(block.base, block.nbytes, block.managed.dl_tensor.device)
    free(block)


cdef int _xapi_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                         void (*set_error)(void*, const char*, const char*) noexcept nogil
                         ) noexcept nogil:
    """A new C-contiguous tensor shaped like `prototype`, without touching Python."""
    cdef AllocatedTensor* block
    cdef int64_t count = 1
    cdef int i
    cdef int ndim = prototype.ndim
    if ndim < 0 or ndim > MAX_NDIM or (ndim > 0 and prototype.shape == NULL):
        set_error(error_ctx, "ValueError", "dlinterop allocator: bad ndim or NULL shape")
        return -1
    if not _valid_dtype_nogil(prototype.dtype):
        set_error(error_ctx, "ValueError", "dlinterop allocator: unsupported data type")
        return -1
    for i in range(ndim):
        if prototype.shape[i] < 0 or __builtin_mul_overflow(count, prototype.shape[i], &count):
            set_error(error_ctx, "ValueError", "dlinterop allocator: bad shape")
            return -1
    if count > (INT64_MAX - 7) // (prototype.dtype.bits * prototype.dtype.lanes):
        set_error(error_ctx, "ValueError", "dlinterop allocator: tensor too large")
        return -1
    block = <AllocatedTensor*>malloc(sizeof(AllocatedTensor) + 2 * ndim * sizeof(int64_t))
    if block == NULL:
        set_error(error_ctx, "MemoryError", "dlinterop allocator: out of memory")
        return -1
    block.nbytes = <size_t>_storage_bytes(count, prototype.dtype)
    if prototype.device.device_type == kDLCPU:
        block.managed.dl_tensor.data = dli_host_alloc(block.nbytes, DEFAULT_ALIGNMENT, 0,
                                                      &block.base)
    else:
        block.managed.dl_tensor.data = _device_alloc_nogil(block.nbytes, prototype.device,
                                                           &block.base)
    if block.managed.dl_tensor.data == NULL:
        free(block)
        set_error(error_ctx, "MemoryError",
                  "dlinterop allocator: cannot allocate the tensor on its device")
        return -1
    block.managed.version.major = DLPACK_MAJOR_VERSION
    block.managed.version.minor = DLPACK_MINOR_VERSION
    block.managed.manager_ctx = NULL
    block.managed.deleter = _allocated_deleter
    block.managed.flags = 0
    block.managed.dl_tensor.device = prototype.device
    block.managed.dl_tensor.ndim = ndim
    block.managed.dl_tensor.dtype = prototype.dtype
    block.managed.dl_tensor.byte_offset = 0
    if ndim > 0:
        block.managed.dl_tensor.shape = <int64_t*>(block + 1)
        block.managed.dl_tensor.strides = block.managed.dl_tensor.shape + ndim
        memcpy(block.managed.dl_tensor.shape, prototype.shape, ndim * sizeof(int64_t))
        _fill_c_strides(block.managed.dl_tensor.strides, prototype.shape, ndim)
    else:
        block.managed.dl_tensor.shape = NULL
        block.managed.dl_tensor.strides = NULL
    out[0] = &block.managed
    return 0


# The three functions below take Python objects, so their callers hold the GIL (as they
# must for PyTorch's table too). Declared `except -1`, they return -1 with the exception
# set, as the exchange API requires; the table stores them cast to its noexcept pointer
# types, which have the same C signature.

cdef int _xapi_to_managed(void* py_object, DLManagedTensorVersioned** out) except -1:
    """Owning export of a dl.Tensor, no stream synchronisation."""
    _check_tensor_object(<object>py_object)
    out[0] = _make_versioned_managed(<Tensor>py_object, DLPACK_MINOR_VERSION,
                                     (<Tensor>py_object).flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    return 0


cdef int _xapi_to_py(DLManagedTensorVersioned* tensor, void** out_py_object) except -1:
    """Steals `tensor` and returns a new reference to a dl.Tensor wrapping it."""
    t = tensor_from_managed(tensor, False)
    Py_IncRef(<PyObject*>t)
    out_py_object[0] = <void*>t
    return 0


cdef int _xapi_view(void* py_object, DLTensor* out) except -1:
    """A non-owning DLTensor valid while the Tensor lives."""
    _check_tensor_object(<object>py_object)
    out[0] = (<Tensor>py_object).dl
    return 0


cdef int _check_tensor_object(object obj) except -1:
    if type(obj) is not Tensor:
        raise TypeError(f"dlinterop's exchange API takes dlinterop.Tensor objects, "
                        f"got {type(obj).__name__}")
    return 0


cdef int _xapi_current_stream(DLDeviceType device_type, int32_t device_id,
                              void** out_current_stream) noexcept nogil:
    if device_type == kDLCUDA or device_type == kDLCUDAManaged:
        out_current_stream[0] = _cuda_current_stream_nogil(device_id)
    else:
        out_current_stream[0] = NULL
    return 0


cdef DLPackExchangeAPI _exchange_api
_exchange_api.header.version.major = DLPACK_MAJOR_VERSION
_exchange_api.header.version.minor = DLPACK_MINOR_VERSION
_exchange_api.header.prev_api = NULL
_exchange_api.managed_tensor_allocator = _xapi_allocator
_exchange_api.managed_tensor_from_py_object_no_sync = (
    <DLPackManagedTensorFromPyObjectNoSync>_xapi_to_managed)
_exchange_api.managed_tensor_to_py_object_no_sync = (
    <DLPackManagedTensorToPyObjectNoSync>_xapi_to_py)
_exchange_api.dltensor_from_py_object_no_sync = <DLPackDLTensorFromPyObjectNoSync>_xapi_view
_exchange_api.current_work_stream = _xapi_current_stream


cdef int _publish_exchange_api() except -1:
    # Consumers look the table up on the type; a cdef class's dict is filled once, here.
    cdef PyObject* type_dict = (<PyTypeObject*>Tensor).tp_dict
    capsule = PyCapsule_New_raw(&_exchange_api, EXCHANGE_API_NAME, NULL)
    if capsule == NULL:
        raise MemoryError()
    try:
        PyDict_SetItemString(<object>type_dict, "__dlpack_c_exchange_api__", <object>capsule)
    finally:
        Py_DecRef(capsule)
    # The DLPack 1.2 spelling: the table's address as an int.
    PyDict_SetItemString(<object>type_dict, "__c_dlpack_exchange_api__",
                         <uintptr_t>&_exchange_api)
    PyType_Modified(<PyTypeObject*>Tensor)
    return 0


_publish_exchange_api()


# ---- consumer -------------------------------------------------------------------------

cdef uintptr_t _lookup_exchange_api(type cls) except? 0:
    cdef const DLPackExchangeAPI* api = NULL
    table = getattr(cls, "__dlpack_c_exchange_api__", None)
    if table is None:
        table = getattr(cls, "__c_dlpack_exchange_api__", None)   # the DLPack 1.2 spelling
    if table is not None and PyCapsule_CheckExact(table):
        api = <const DLPackExchangeAPI*>PyCapsule_GetPointer(<PyObject*>table, EXCHANGE_API_NAME)
        if api == NULL:
            PyErr_Clear()
    elif isinstance(table, int) and not isinstance(table, bool) and 0 < table < 2**64:
        api = <const DLPackExchangeAPI*><uintptr_t>table
    # Only a 1.x table has the layout declared in dlpack.h; anything else is ignored and
    # the import falls back to __dlpack__.
    if api == NULL or api.header.version.major != 1:
        return 0
    if api.managed_tensor_from_py_object_no_sync == NULL:
        return 0
    return <uintptr_t>api


cdef bint _torch_view_bits_set(_Producer producer, object tensor, bint complex_dtype) except -1:
    """True for a lazily conjugated or negated PyTorch view: sharing its memory would hand
    out the stored values, not the ones the view means (torch's own __dlpack__ does so for
    negated views). Only complex tensors carry the conjugate bit."""
    cdef PyObject* args[1]
    args[0] = <PyObject*>tensor
    return ((complex_dtype and _call_is_true(producer.torch_is_conj, args))
            or _call_is_true(producer.torch_is_neg, args))


cdef int _raise_torch_view_bits(object tensor) except -1:
    if tensor.is_conj():
        raise BufferError("a PyTorch tensor with the conjugate bit set cannot be shared; "
                          "call .resolve_conj() first")
    raise BufferError("a PyTorch tensor with the negative bit set cannot be shared; "
                      "call .resolve_neg() first")


cdef object _TRUE = True


cdef bint _call_is_true(object method, PyObject** args) except -1:
    """method(*args) is True, calling an unbound method without a lookup."""
    cdef PyObject* result = PyObject_Vectorcall_raw(<PyObject*>method, args, 1, NULL)
    if result == NULL:
        return raise_pending_error()
    Py_DecRef(result)   # the interpreter keeps True alive: comparing after is safe
    return result == <PyObject*>_TRUE


cdef bint _is_torch_tensor_type(type cls):
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(cls, torch.Tensor)


cdef Tensor _import_through_exchange_api(_Producer producer, object obj):
    """Imports `obj` through its type's exchange table; None when the table cannot serve it
    (device memory whose stream order dlinterop cannot enforce)."""
    cdef const DLPackExchangeAPI* api = producer.api
    cdef DLManagedTensorVersioned* m = NULL
    if api.managed_tensor_from_py_object_no_sync(<void*>obj, &m) != 0:
        raise_pending_error()
    if producer.torch_is_neg is not None and _torch_view_bits_set(
            producer, obj, m.dl_tensor.dtype.code == kDLComplex):
        if m.deleter != NULL:
            m.deleter(m)
        _raise_torch_view_bits(obj)
    if m != NULL and m.dl_tensor.device.device_type != kDLCPU:
        if not _cuda_sync_exchange(api, m):
            if m.deleter != NULL:
                m.deleter(m)
            return None
    cdef Tensor t = tensor_from_managed(m, False)
    t.owner_ref = obj
    return t
