# Provides: import: from_dlpack and tensor_from_object, through a producer's exchange
# table, the native NumPy route or __dlpack__; the exchange API's consumer side (borrow_dltensor).
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, layouts.pxi, cuda.pxi, placement.pxi,
# consume.pxi, torch_bits.pxi, numpy_route.pxi, producers.pxi.

cdef tuple _KW_MAX_VERSION = ("max_version",)
cdef str _DLPACK_METHOD = "__dlpack__"


cdef Tensor _import_from_producer(object obj, object kwargs, _Producer producer=None):
    """Imports the capsule obj.__dlpack__(max_version=(1, 3), **kwargs) returns.

    dlinterop usually holds that capsule's last reference, so a rejected capsule dies here.
    It is dropped while the exception is being handled rather than pending: its destructor
    may run Python code (a ctypes or pure-Python producer's), which must not find an
    exception in flight, or it fails and may skip the deleter (numpy/numpy#32697)."""
    capsule = _call_dlpack_method(obj, kwargs, producer)
    try:
        if not PyCapsule_CheckExact(capsule):
            raise TypeError(f"{type(obj).__name__}.__dlpack__ returned "
                            f"{type(capsule).__name__}, not a DLPack capsule")
        return _tensor_from_capsule(capsule)
    except BaseException:
        capsule = None
        raise


cdef object _call_dlpack_method(object obj, object kwargs, _Producer producer):
    """obj.__dlpack__(max_version=(1, 3), **kwargs), falling back to the pre-1.0 signature
    (stream only) for producers that reject the new keywords with TypeError."""
    cdef PyObject* args[2]
    cdef PyObject* result
    cdef PyObject *exc_type
    cdef PyObject *exc_value
    cdef PyObject *exc_tb
    if kwargs is None:
        args[0] = <PyObject*>obj
        args[1] = <PyObject*>_MAX_VERSION
        if producer is None:
            producer = _producer_of(type(obj))
        # Python may have run since the producer was looked up (and changed the type): the
        # borrowed method is used only while the type's version tag still vouches for it.
        if producer.dlpack != NULL and _still_valid(type(obj), producer.version_tag):
            result = PyObject_Vectorcall_raw(producer.dlpack, args, 1,
                                             <PyObject*>_KW_MAX_VERSION)
        else:
            result = PyObject_VectorcallMethod_raw(<PyObject*>_DLPACK_METHOD, args, 1,
                                                   <PyObject*>_KW_MAX_VERSION)
        if result != NULL:
            capsule = <object>result
            Py_DecRef(result)
            return capsule
        # The rare paths. Keep the exception aside while asking the type about __dlpack__.
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb)
        has_method = hasattr(type(obj), "__dlpack__")
        PyErr_Restore(exc_type, exc_value, exc_tb)
        if not has_method:
            PyErr_Clear()
            raise TypeError(f"{type(obj).__name__} object is neither a DLPack capsule nor "
                            "has __dlpack__; use dl.asarray for other array-likes")
        if PyErr_ExceptionMatches(<PyObject*>TypeError):
            PyErr_Clear()
            return obj.__dlpack__()
        _raise_with_hint(obj)
    method = getattr(obj, "__dlpack__", None)
    if method is None:
        raise TypeError(f"{type(obj).__name__} object is neither a DLPack capsule nor has "
                        "__dlpack__; use dl.asarray for other array-likes")
    try:
        return method(max_version=_MAX_VERSION, **kwargs)
    except TypeError:
        legacy = {"stream": kwargs["stream"]} if "stream" in kwargs else {}
        return method(**legacy)
    except BufferError as error:
        _raise_hinted(obj, error)


cdef int _raise_with_hint(object obj) except -1:
    """Raises the pending error of obj.__dlpack__, hinted (_raise_hinted)."""
    try:
        raise_pending_error()
    except BufferError as error:
        _raise_hinted(obj, error)
    return 0


cdef int _raise_hinted(object obj, object error) except -1:
    """Raises `error`, obj.__dlpack__'s; a plain BufferError from an object that also has
    __array_interface__ says that dl.asarray reads it that way (NumPy refuses to export the
    ml_dtypes types, bfloat16, float8, int4 and the others, through DLPack)."""
    if type(error) is not BufferError or not hasattr(type(obj), "__array_interface__"):
        raise error
    raise BufferError(f"{error} ({type(obj).__name__} has __array_interface__: "
                      "dl.asarray reads it through that instead)") from error


def from_dlpack(obj, *, device=None, copy=None, stream=None):
    """Import `obj` (a DLPack capsule, or any object with __dlpack__) as a Tensor, sharing
    its memory unless a copy is requested (copy=True) or needed (another device=)."""
    return _from_dlpack(obj, device, copy, stream)


cdef Tensor tensor_from_object(object obj):
    return _from_dlpack(obj, None, None, None)


cdef Tensor tensor_from_producer(object obj):
    return _import_from_producer(obj, None)


cdef Tensor _from_dlpack(object obj, object device, object copy, object stream):
    cdef Tensor t
    cdef DLDevice target
    cdef dict kwargs = None
    cdef type cls = type(obj)
    cdef _Producer producer
    cdef bint current_stream = False
    cdef int fault
    if stream is not None:
        _check_stream_type(stream)
    elif _cuda_streams_entered():
        # A dl.cuda.Stream is current somewhere: CUDA producers must order their work
        # before it, so the consumer passes it (found below, once the device is known).
        current_stream = True
    elif device is None and copy is None:
        if cls is Tensor:
            return _view_of(<Tensor>obj)
        if PyCapsule_CheckExact(obj):
            return _tensor_from_capsule(obj)
        producer = _producer_of(cls)
        if dli_san_on():
            dli_san_note_producer(<PyObject*>cls)   # once per type: memory it cannot watch
        if producer.numpy_native != 0:
            if producer.numpy_native < 0:
                # Recorded while the route was being decided: ask again.
                producer.numpy_native = _numpy_native_for(cls)
            if producer.numpy_native > 0:
                t = _import_numpy_native(obj)
                if t is not None:
                    return t
            return _import_from_producer(obj, None, producer)
        if producer.torch:
            _refuse_torch_tensor(&producer.torch_native_offset, obj)
        if producer.api != NULL:
            t = _import_through_exchange_api(producer, obj)
            if t is not None:
                return t
        return _import_from_producer(obj, None, producer)
    check_copy_arg(copy)
    if device is not None:
        target = _parse_device(device)
    if cls is Tensor or PyCapsule_CheckExact(obj):
        if stream is not None:
            raise ValueError("stream= cannot be applied to a capsule or a dl.Tensor")
        if current_stream:
            _cuda_consumer_wait(obj)
        t = _view_of(<Tensor>obj) if cls is Tensor else _tensor_from_capsule(obj)
    else:
        producer = _producer_of(cls)
        if dli_san_on():
            dli_san_note_producer(<PyObject*>cls)
        if not producer.torch:
            pass
        elif copy is not True:
            _refuse_torch_tensor(&producer.torch_native_offset, obj)
        elif _torch_requires_grad_set(&producer.torch_native_offset, obj):
            _raise_requires_grad()
        elif _torch_view_bits_set(&producer.torch_native_offset, obj):
            # A copy is wanted anyway: let PyTorch make one holding the values the view
            # means, rather than trust the producer's copy (or its lack of one) to.
            obj = obj.resolve_conj().resolve_neg()
        kwargs = {}
        if copy is not None:
            kwargs["copy"] = copy
        if current_stream:
            src_type, src_index = obj.__dlpack_device__()
            if dli_device_cuda_gpu(_device_type_value(src_type)):
                kwargs["stream"] = _cuda_current_stream(src_index)
        elif stream is not None:
            src_type, src_index = obj.__dlpack_device__()
            fault = _stream_fault(stream, <DLDeviceType><int>src_type)
            if fault:
                _refuse_stream(stream, fault,
                               f"memory on {_device_type_name(src_type)}:{src_index}")
            if dli_device_streams(<int>src_type):
                kwargs["stream"] = stream
        if device is not None:
            kwargs["dl_device"] = (<int>target.device_type, target.device_id)
            try:
                t = _import_from_producer(obj, kwargs)
            except BufferError:
                # The producer cannot reach that device: import as is and copy ourselves.
                if copy is False:
                    raise
                del kwargs["dl_device"]
                t = _import_from_producer(obj, kwargs)
        else:
            t = _import_from_producer(obj, kwargs)
    return _placed(t, device, copy)


cdef Tensor _import_through_exchange_api(_Producer producer, object obj):
    """Imports `obj` through its type's exchange table; None when the table cannot serve it
    (device memory whose stream order dlinterop cannot enforce), or refuses it: the caller
    then asks __dlpack__, whose error is the producer's documented one (PyTorch's table
    raises RuntimeError with a C++ stack trace where its __dlpack__ raises a one-line
    BufferError naming the problem: a sparse layout, a quantized dtype)."""
    cdef const DLPackExchangeAPI* api = producer.api
    cdef DLManagedTensorVersioned* m = NULL
    cdef PyObject *exc_type
    cdef PyObject *exc_value
    cdef PyObject *exc_tb
    if api.managed_tensor_from_py_object_no_sync(<void*>obj, &m) != 0:
        # KeyboardInterrupt and the like propagate; an ordinary error means "ask __dlpack__".
        fallback = PyErr_Occurred() == NULL or PyErr_ExceptionMatches(<PyObject*>Exception)
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb)
        if m != NULL and m.deleter != NULL:
            m.deleter(m)   # a table that failed should not hand one out; never leak it
        if not fallback:
            PyErr_Restore(exc_type, exc_value, exc_tb)
            raise_pending_error()
        Py_DecRef(exc_type)
        Py_DecRef(exc_value)
        Py_DecRef(exc_tb)
        return None
    if m != NULL and not dli_device_host(m.dl_tensor.device.device_type):
        if not _cuda_sync_exchange(api, m.dl_tensor.device):
            if m.deleter != NULL:
                m.deleter(m)
            return None
    cdef Tensor t = tensor_from_managed(m, False)
    t.owner_ref = obj
    return t


cdef int borrow_dltensor(object obj, DLTensor* out, bint sharing) except -1:
    """Fills `out` with a non-owning view of obj's tensor through its type's exchange table
    (dltensor_from_py_object_no_sync: PyTorch), valid while obj lives unchanged. 1 when
    done; 0 when the table cannot serve it (none published, a refusal, device memory whose
    stream order cannot be kept), and the caller then imports obj as usual, which raises
    the producer's own error where there is one. With `sharing`, the memory will be read or
    written, and PyTorch tensors that must not be shared are refused as an import refuses
    them; without, only the layout is read (empty_like)."""
    cdef _Producer producer = _producer_of(type(obj))
    cdef const DLPackExchangeAPI* api = producer.api if sharing else producer.layout_api
    if api == NULL or api.dltensor_from_py_object_no_sync == NULL:
        return 0
    if sharing and producer.torch:
        _refuse_torch_tensor(&producer.torch_native_offset, obj)
    if api.dltensor_from_py_object_no_sync(<void*>obj, out) != 0:
        if not (PyErr_Occurred() == NULL or PyErr_ExceptionMatches(<PyObject*>Exception)):
            return raise_pending_error()
        PyErr_Clear()
        return 0
    if _check_dltensor(out) != LAYOUT_OK or _is_packed_subbyte(out.dtype):
        # The ordinary import says what is wrong with it; and a DLTensor has no flags, so
        # sub-byte data, which may be padded, comes through a managed tensor that says.
        return 0
    if not dli_device_host(out.device.device_type):
        if not _cuda_sync_exchange(api, out.device):
            return 0
    return 1
