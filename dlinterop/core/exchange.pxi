# Provides: dlinterop's own DLPack 1.3 C exchange table, published on the Tensor type
# (__dlpack_c_exchange_api__); its allocator lives in allocator.pxi.
# Uses: runtime.pxi, cuda.pxi, allocator.pxi, export.pxi, consume.pxi, producers.pxi.

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
    if dli_device_cuda_gpu(device_type):
        out_current_stream[0] = _cuda_current_stream_nogil(device_id)
    else:
        out_current_stream[0] = NULL
    return 0


cdef DLPackExchangeAPI _exchange_api
_exchange_api.header.version.major = DLPACK_MAJOR_VERSION
_exchange_api.header.version.minor = DLPACK_MINOR_VERSION
_exchange_api.header.prev_api = NULL
_exchange_api.managed_tensor_allocator = _xapi_allocator
# Through void*: the table's types say noexcept nogil, these need the caller's thread state
# (which the exchange API requires of its callers) and report errors as -1.
_exchange_api.managed_tensor_from_py_object_no_sync = (
    <DLPackManagedTensorFromPyObjectNoSync><void*>_xapi_to_managed)
_exchange_api.managed_tensor_to_py_object_no_sync = (
    <DLPackManagedTensorToPyObjectNoSync><void*>_xapi_to_py)
_exchange_api.dltensor_from_py_object_no_sync = (
    <DLPackDLTensorFromPyObjectNoSync><void*>_xapi_view)
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
