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


cdef bint _valid_dtype_nogil(DLDataType dt) noexcept nogil:
    if dt.lanes != 1:
        return dt.code == kDLFloat4_e2m1fn and dt.bits == 4 and dt.lanes == 2
    if dt.code == kDLInt or dt.code == kDLUInt:
        return dt.bits == 8 or dt.bits == 16 or dt.bits == 32 or dt.bits == 64
    if dt.code == kDLFloat:
        return dt.bits == 16 or dt.bits == 32 or dt.bits == 64
    if dt.code == kDLBfloat:
        return dt.bits == 16
    if dt.code == kDLComplex:
        return dt.bits == 32 or dt.bits == 64 or dt.bits == 128
    if dt.code == kDLBool:
        return dt.bits == 8
    if kDLFloat8_e3m4 <= dt.code <= kDLFloat8_e8m0fnu:
        return dt.bits == 8
    if dt.code == kDLFloat6_e2m3fn or dt.code == kDLFloat6_e3m2fn:
        return dt.bits == 6
    if dt.code == kDLFloat4_e2m1fn:
        return dt.bits == 4
    return False


cdef int _xapi_to_managed(void* py_object, DLManagedTensorVersioned** out) noexcept with gil:
    """Owning export of a dl.Tensor, no stream synchronisation."""
    try:
        if type(<object>py_object) is not Tensor:
            raise TypeError(f"expected a dlinterop.Tensor, got {type(<object>py_object).__name__}")
        out[0] = _make_versioned_managed(<Tensor>py_object, DLPACK_MINOR_VERSION,
                                         (<Tensor>py_object).flags & DLPACK_FLAG_BITMASK_READ_ONLY)
        return 0
    except BaseException:
        return -1


cdef int _xapi_to_py(DLManagedTensorVersioned* tensor, void** out_py_object) noexcept with gil:
    """Steals `tensor` and returns a new reference to a dl.Tensor wrapping it."""
    try:
        t = tensor_from_managed(tensor, False)
    except BaseException:
        return -1
    Py_IncRef(<PyObject*>t)
    out_py_object[0] = <void*>t
    return 0


cdef int _xapi_view(void* py_object, DLTensor* out) noexcept with gil:
    """A non-owning DLTensor valid while the Tensor lives."""
    try:
        if type(<object>py_object) is not Tensor:
            raise TypeError(f"expected a dlinterop.Tensor, got {type(<object>py_object).__name__}")
    except BaseException:
        return -1
    out[0] = (<Tensor>py_object).dl
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
_exchange_api.managed_tensor_from_py_object_no_sync = _xapi_to_managed
_exchange_api.managed_tensor_to_py_object_no_sync = _xapi_to_py
_exchange_api.dltensor_from_py_object_no_sync = _xapi_view
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

# type -> the address of its exchange table, or 0 when it has none or it is unusable. The
# dict keeps every cached type alive, so the one-entry cache below can compare pointers.
cdef dict _exchange_api_cache = {}
cdef PyObject* _last_type = NULL
cdef const DLPackExchangeAPI* _last_api = NULL


cdef const DLPackExchangeAPI* _exchange_api_of(type cls) except? NULL:
    global _last_type, _last_api
    cdef const DLPackExchangeAPI* api
    if <PyObject*>cls == _last_type:
        return _last_api
    address = _exchange_api_cache.get(cls)
    if address is None:
        address = _lookup_exchange_api(cls)
        _exchange_api_cache[cls] = address
    api = <const DLPackExchangeAPI*><uintptr_t>address
    _last_type = <PyObject*>cls
    _last_api = api
    return api


cdef uintptr_t _lookup_exchange_api(type cls) except? 0:
    cdef const DLPackExchangeAPI* api = NULL
    table = getattr(cls, "__dlpack_c_exchange_api__", None)
    if table is not None and PyCapsule_CheckExact(table):
        api = <const DLPackExchangeAPI*>PyCapsule_GetPointer(<PyObject*>table, EXCHANGE_API_NAME)
        if api == NULL:
            PyErr_Clear()
    elif table is None:
        address = getattr(cls, "__c_dlpack_exchange_api__", None)
        if isinstance(address, int) and address > 0:
            api = <const DLPackExchangeAPI*><uintptr_t>address
    # Only a 1.x table has the layout declared in dlpack.h; anything else is ignored and
    # the import falls back to __dlpack__.
    if api == NULL or api.header.version.major != 1:
        return 0
    if api.managed_tensor_from_py_object_no_sync == NULL:
        return 0
    return <uintptr_t>api


cdef Tensor _import_through_exchange_api(const DLPackExchangeAPI* api, object obj):
    """Imports `obj` through its type's exchange table; None when the table cannot serve it
    (device memory whose stream order dlinterop cannot enforce)."""
    cdef DLManagedTensorVersioned* m = NULL
    if api.managed_tensor_from_py_object_no_sync(<void*>obj, &m) != 0:
        raise_pending_error()
    if m.dl_tensor.device.device_type != kDLCPU:
        if not _cuda_sync_exchange(api, m):
            if m.deleter != NULL:
                m.deleter(m)
            return None
    cdef Tensor t = tensor_from_managed(m, False)
    t.owner_ref = obj
    return t
