# Import: from_dlpack and the capsule consumer. A capsule is validated completely before it
# is consumed; a rejected capsule keeps its name, so its own destructor later calls the
# producer's deleter exactly once.

cdef tuple _MAX_VERSION = (1, DLPACK_MINOR_VERSION)
cdef tuple _KW_MAX_VERSION = ("max_version",)
cdef str _DLPACK_METHOD = "__dlpack__"


# What is wrong with a DLTensor, found without the GIL or any Python object: the check runs
# on every import, and the messages are built only when one fails.
cdef enum DLTensorProblem:
    DLTENSOR_OK = 0
    BAD_NDIM
    NULL_SHAPE
    BAD_LANES
    BAD_DTYPE
    BAD_DEVICE_TYPE
    BAD_DEVICE_ID
    NEGATIVE_DIM
    COUNT_OVERFLOW
    NULL_DATA
    EXTENT_OVERFLOW


cdef DLTensorProblem _check_dltensor(const DLTensor* dl) noexcept nogil:
    cdef int64_t count = 1
    cdef int64_t extent = 0
    cdef int64_t span
    cdef int64_t stride
    cdef int i
    if dl.ndim < 0 or dl.ndim > MAX_NDIM:
        return BAD_NDIM
    if dl.ndim > 0 and dl.shape == NULL:
        return NULL_SHAPE
    if not _valid_dtype_nogil(dl.dtype):
        return BAD_LANES if dl.dtype.lanes != 1 else BAD_DTYPE
    if not _known_device_type(dl.device.device_type):
        return BAD_DEVICE_TYPE
    if dl.device.device_id < 0:
        return BAD_DEVICE_ID
    for i in range(dl.ndim):
        if dl.shape[i] < 0:
            return NEGATIVE_DIM
        if __builtin_mul_overflow(count, dl.shape[i], &count):
            return COUNT_OVERFLOW
    if count == 0:
        return DLTENSOR_OK
    if dl.data == NULL:
        return NULL_DATA
    # The furthest element from element 0, in bytes, must be addressable.
    if dl.strides == NULL:
        extent = count - 1
    else:
        for i in range(dl.ndim):
            stride = dl.strides[i]
            if (stride == INT64_MIN
                    or __builtin_mul_overflow(dl.shape[i] - 1, stride if stride >= 0 else -stride,
                                              &span)
                    or __builtin_add_overflow(extent, span, &extent)):
                return EXTENT_OVERFLOW
    if (extent == INT64_MAX or __builtin_mul_overflow(extent + 1,
                               <int64_t>((dl.dtype.bits * dl.dtype.lanes + 7) // 8), &extent)
            or dl.byte_offset > <uint64_t>INT64_MAX
            or __builtin_add_overflow(extent, <int64_t>dl.byte_offset, &extent)):
        return EXTENT_OVERFLOW
    return DLTENSOR_OK


cdef inline int _validate_dltensor(const DLTensor* dl) except -1:
    """Raises BufferError unless the DLTensor is one dlinterop can represent safely."""
    cdef DLTensorProblem problem = _check_dltensor(dl)
    if problem != DLTENSOR_OK:
        _raise_dltensor_problem(dl, problem)
    return 0


cdef int _raise_dltensor_problem(const DLTensor* dl, DLTensorProblem problem) except -1:
    if problem == BAD_NDIM:
        raise BufferError(f"DLTensor ndim must be between 0 and {MAX_NDIM}, got {dl.ndim}")
    if problem == NULL_SHAPE:
        raise BufferError(f"DLTensor has ndim {dl.ndim} but a NULL shape")
    if problem == BAD_LANES:
        raise BufferError(f"DLTensor data type has {dl.dtype.lanes} lanes; dlinterop "
                          "imports single-lane types only (and PyTorch's float4_e2m1fn_x2)")
    if problem == BAD_DTYPE:
        raise BufferError(f"unsupported DLPack data type (code={dl.dtype.code}, "
                          f"bits={dl.dtype.bits}, lanes={dl.dtype.lanes})")
    if problem == BAD_DEVICE_TYPE:
        raise BufferError(f"unknown DLPack device type {<int>dl.device.device_type}")
    if problem == BAD_DEVICE_ID:
        raise BufferError(f"negative device index {dl.device.device_id}")
    if problem == NEGATIVE_DIM:
        raise BufferError("negative dimension in DLTensor shape "
                          f"{[dl.shape[i] for i in range(dl.ndim)]}")
    if problem == COUNT_OVERFLOW:
        raise BufferError("DLTensor element count overflows int64")
    if problem == NULL_DATA:
        raise BufferError("DLTensor has a NULL data pointer and a non-zero element count")
    raise BufferError("DLTensor byte extent overflows int64")


cdef Tensor _wrap_dltensor(const DLTensor* dl, uint64_t flags):
    """A Tensor viewing a validated DLTensor, with its own copy of shape and strides."""
    cdef Tensor t = Tensor.__new__(Tensor)
    _reserve_shape(t, dl.ndim)
    t.dl.data = dl.data
    t.dl.device = dl.device
    t.dl.dtype = dl.dtype
    t.dl.byte_offset = dl.byte_offset
    if dl.ndim > 0:
        memcpy(t.dl.shape, dl.shape, dl.ndim * sizeof(int64_t))
        if dl.strides != NULL:
            memcpy(t.dl.strides, dl.strides, dl.ndim * sizeof(int64_t))
        else:
            _fill_c_strides(t.dl.strides, dl.shape, dl.ndim)
    t.flags = flags & (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED)
    return t


cdef Tensor _wrap_versioned(const DLManagedTensorVersioned* m):
    """A Tensor viewing a versioned managed tensor once its version and layout are checked;
    it does not take ownership (the callers do, each in its own way)."""
    if m.version.major != 1:
        raise BufferError(f"unsupported DLPack major version {m.version.major}; "
                          "dlinterop implements 1.x")
    _validate_dltensor(&m.dl_tensor)
    return _wrap_dltensor(&m.dl_tensor, m.flags)


cdef Tensor tensor_from_managed(DLManagedTensorVersioned* m, bint readonly):
    """Takes ownership of `m`: on success the Tensor calls its deleter when it dies; on
    failure the deleter has already been called when the exception is raised."""
    cdef Tensor t
    try:
        if m == NULL:
            raise ValueError("NULL DLManagedTensorVersioned")
        t = _wrap_versioned(m)
    except BaseException:
        if m != NULL and m.deleter != NULL:
            m.deleter(m)
        raise
    if readonly:
        t.flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    t.managed_versioned = m
    return t


cdef Tensor _tensor_from_capsule(object capsule):
    # Checking the name, validating and renaming are one step for other threads: two that
    # consume one capsule end with one owner (the other finds it consumed). With the GIL
    # the critical section costs nothing more.
    with cython.critical_section(capsule):
        return _consume_capsule(capsule)


cdef Tensor _consume_capsule(object capsule):
    cdef const char* name = PyCapsule_GetName(capsule)
    cdef DLManagedTensorVersioned* mv
    cdef DLManagedTensor* ml
    cdef Tensor t
    if name == NULL:
        raise ValueError("capsule has no name; expected a 'dltensor' or 'dltensor_versioned' "
                         "DLPack capsule")
    if strcmp(name, NAME_VERSIONED) == 0:
        mv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(<PyObject*>capsule, NAME_VERSIONED)
        t = _wrap_versioned(mv)
        # Consume: from here the Tensor owns the managed tensor. SetName cannot fail on a
        # valid capsule.
        PyCapsule_SetName(capsule, NAME_USED_VERSIONED)
        t.managed_versioned = mv
    elif strcmp(name, NAME_LEGACY) == 0:
        ml = <DLManagedTensor*>PyCapsule_GetPointer(<PyObject*>capsule, NAME_LEGACY)
        _validate_dltensor(&ml.dl_tensor)
        # A legacy capsule cannot say whether its memory may be written: assume not, and
        # remember that this is an assumption (a legacy re-export may pass it on).
        t = _wrap_dltensor(&ml.dl_tensor, DLPACK_FLAG_BITMASK_READ_ONLY)
        t.flags |= FLAG_READ_ONLY_ASSUMED
        PyCapsule_SetName(capsule, NAME_USED_LEGACY)
        t.managed_legacy = ml
    elif strcmp(name, NAME_USED_VERSIONED) == 0 or strcmp(name, NAME_USED_LEGACY) == 0:
        raise ValueError("DLPack capsule already consumed: a capsule can be imported once")
    else:
        raise ValueError(f"capsule named {(<bytes>name).decode(errors='replace')!r} is not "
                         "a DLPack capsule ('dltensor' or 'dltensor_versioned')")
    t.owner_ref = capsule
    return t


cdef Tensor _view_of(Tensor src):
    """A new Tensor sharing src's memory, as exporting and importing it would give."""
    cdef Tensor t = _wrap_dltensor(&src.dl, src.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    t.flags |= src.flags & FLAG_READ_ONLY_ASSUMED
    t.owner_ref = src
    return t


# ---- producer types -----------------------------------------------------------------

@cython.final
@cython.no_gc
cdef class _Producer:
    """What the importer needs to know about a producer type, looked up once per type and
    trusted while the type's version tag (which CPython changes whenever one of the type's
    attributes does) stays the same."""
    cdef unsigned int version_tag
    cdef const DLPackExchangeAPI* api   # the type's exchange table, or NULL
    cdef object dlpack    # the type's __dlpack__ as a plain function or method descriptor,
                          # called unbound with the object first; None: look it up per call
    # For PyTorch tensor types: the unbound is_conj and is_neg methods, asked before each
    # import that would share memory (PyTorch exports lazily conjugated or negated views
    # with the stored values); None for other types. When torch_native_offset is >= 0 the
    # bits are read natively instead, from the at::Tensor at that offset (exchange.pxi).
    cdef object torch_is_conj
    cdef object torch_is_neg
    cdef Py_ssize_t torch_native_offset
    # numpy.ndarray itself (not subclasses) when the native NumPy route is usable.
    cdef bint numpy_native


# type -> _Producer; the dict keeps every cached type alive, so the one-entry cache in
# front of it can compare type pointers.
cdef dict _producers = {}
cdef PyObject* _last_producer_type = NULL
cdef _Producer _last_producer = None
# How many times a producer type has been described (a testing aid's count, atomic where
# there is no GIL: ThreadSanitizer found the plain increment racing).
cdef Py_ssize_t _producer_descriptions = 0


def _producer_descriptions_made():
    """Testing aid: how many times the importer has described a producer type (its
    per-type cache missed, or the type changed since)."""
    return dli_atomic_load(&_producer_descriptions)


cdef inline bint _still_valid(type cls, unsigned int tag) noexcept:
    return tag != 0 and type_version(cls) == tag


cdef _Producer _producer_of(type cls):
    global _last_producer_type, _last_producer
    cdef _Producer p
    # The one-entry cache is two globals: without a GIL another thread could change one
    # between our reads of the two, so free-threaded builds use the dict alone, through
    # dict_get (a reference of our own: another thread may replace the entry meanwhile).
    if (not FREE_THREADED and <PyObject*>cls == _last_producer_type
            and _still_valid(cls, _last_producer.version_tag)):
        return _last_producer
    p = dict_get(_producers, cls)
    if p is None or not _still_valid(cls, p.version_tag):
        p = _describe_producer(cls)
        _producers[cls] = p
    if not FREE_THREADED:
        _last_producer_type = <PyObject*>cls
        _last_producer = p
    return p


cdef _Producer _describe_producer(type cls):
    cdef _Producer p = _Producer.__new__(_Producer)
    p.api = <const DLPackExchangeAPI*>_lookup_exchange_api(cls)
    method = None
    for base in cls.__mro__:
        method = base.__dict__.get("__dlpack__")
        if method is not None:
            break
    # Only these are called with the object as first argument; a staticmethod, a property
    # or another descriptor goes through ordinary attribute lookup on every call.
    p.dlpack = method if type(method) in _UNBOUND_CALLABLE_TYPES else None
    if _is_torch_tensor_type(cls):
        p.torch_is_conj = cls.is_conj
        p.torch_is_neg = cls.is_neg
        p.torch_native_offset = _torch_native_offset_for(cls)
    else:
        p.torch_native_offset = TORCH_BITS_UNUSABLE
    numpy = sys.modules.get("numpy")
    p.numpy_native = (numpy is not None and cls is getattr(numpy, "ndarray", None)
                      and _numpy_route_usable(numpy))
    getattr(cls, "__dlpack__", None)   # a type lookup assigns the version tag if it has none
    p.version_tag = type_version(cls)
    dli_atomic_add(&_producer_descriptions, 1)
    return p


cdef tuple _UNBOUND_CALLABLE_TYPES = (
    type(lambda: None),            # a function defined in a class body
    type(str.join),                # a C method descriptor (NumPy, PyTorch)
    type(_Producer.__reduce__),    # a Cython method
)


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
        if producer.dlpack is not None:
            result = PyObject_Vectorcall_raw(<PyObject*>producer.dlpack, args, 1,
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
        raise_pending_error()
    method = getattr(obj, "__dlpack__", None)
    if method is None:
        raise TypeError(f"{type(obj).__name__} object is neither a DLPack capsule nor has "
                        "__dlpack__; use dl.asarray for other array-likes")
    try:
        return method(max_version=_MAX_VERSION, **kwargs)
    except TypeError:
        legacy = {"stream": kwargs["stream"]} if "stream" in kwargs else {}
        return method(**legacy)


def from_dlpack(obj, *, device=None, copy=None, stream=None):
    """Import `obj` (a DLPack capsule, or any object with __dlpack__) as a Tensor, sharing
    its memory unless a copy is requested (copy=True) or needed (another device=)."""
    return _from_dlpack(obj, device, copy, stream)


cdef Tensor tensor_from_object(object obj):
    return _from_dlpack(obj, None, None, None)


cdef Tensor _from_dlpack(object obj, object device, object copy, object stream):
    cdef Tensor t
    cdef DLDevice target
    cdef dict kwargs = None
    cdef type cls = type(obj)
    cdef _Producer producer
    cdef bint current_stream = False
    if stream is None and _cuda_streams_entered():
        # A dl.cuda.Stream is current somewhere: CUDA producers must order their work
        # before it, so the consumer passes it (found below, once the device is known).
        current_stream = True
    elif device is None and copy is None and stream is None:
        if cls is Tensor:
            return _view_of(<Tensor>obj)
        if PyCapsule_CheckExact(obj):
            return _tensor_from_capsule(obj)
        producer = _producer_of(cls)
        if producer.numpy_native:
            t = _import_numpy_native(obj)
            if t is not None:
                return t
            return _import_from_producer(obj, None, producer)
        _refuse_torch_view_bits(producer, obj)
        if producer.api != NULL:
            t = _import_through_exchange_api(producer, obj)
            if t is not None:
                return t
        return _import_from_producer(obj, None, producer)
    _check_copy_arg(copy)
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
        if copy is not True:
            _refuse_torch_view_bits(producer, obj)
        elif _torch_view_bits_set(producer, obj):
            # A copy is wanted anyway: let PyTorch make one holding the values the view
            # means, rather than trust the producer's copy (or its lack of one) to.
            obj = obj.resolve_conj().resolve_neg()
        kwargs = {}
        if copy is not None:
            kwargs["copy"] = copy
        if current_stream:
            src_type, src_index = obj.__dlpack_device__()
            if src_type in (kDLCUDA, kDLCUDAManaged):
                kwargs["stream"] = _cuda.current_stream_ptr(src_index) or 1
        elif stream is not None:
            src_type = obj.__dlpack_device__()[0]
            if src_type in (kDLCUDA, kDLCUDAManaged, kDLROCM):
                kwargs["stream"] = stream
            elif stream != -1:
                raise ValueError(f"stream must be None or -1 for memory on device {src_type}")
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
    if device is not None and not (target.device_type == t.dl.device.device_type
                                   and target.device_id == t.dl.device.device_id):
        if copy is False:
            raise CopyError(f"importing from {t.device} to {device_from_dl(target)} needs a "
                            "copy, and copy=False was given")
        return _copy_tensor(t, target)
    if copy is True and not (t.flags & DLPACK_FLAG_BITMASK_IS_COPIED):
        # Nobody said this memory is a private copy (a capsule, a legacy producer, or one
        # that ignored copy=True): make one.
        return _copy_tensor(t, t.dl.device)
    return t


# ---- the native NumPy route ------------------------------------------------------------
#
# NumPy publishes no exchange table, so an exact numpy.ndarray is read through NumPy's C
# API instead (src/numpy_route.c), with no Python call: what its __dlpack__ would put in a
# capsule, the array itself as owner. Arrays that route cannot describe exactly as NumPy
# would (user dtypes such as ml_dtypes', byte-swapped, long double, strides that are not
# whole items, memory NumPy imported from elsewhere) take the __dlpack__ route.

cdef extern from "numpy_route.h":
    int dli_numpy_built() noexcept
    int dli_numpy_init() noexcept
    int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim,
                       int* readonly) noexcept
    PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base) noexcept

cdef enum:
    NUMPY_ROUTE_UNDECIDED = -1
    NUMPY_ROUTE_OFF = 0
    NUMPY_ROUTE_ON = 1
cdef int _numpy_route_state = NUMPY_ROUTE_UNDECIDED
# The way back (dl.to_framework(t, like=numpy)): an ndarray made through the same C API,
# with the Tensor as its base, once probes show it equal to np.from_dlpack's. Decided on
# its own: it does not depend on how this NumPy's __dlpack__ writes strides.
cdef int _numpy_handback_state = NUMPY_ROUTE_UNDECIDED


cdef Tensor _import_numpy_native(object array):
    """The Tensor the __dlpack__ route would give for `array`, or None to take that route."""
    cdef DLTensor dl
    cdef int64_t storage[2 * MAX_NDIM]
    cdef int readonly = 0
    if dli_numpy_view(<PyObject*>array, &dl, storage, MAX_NDIM, &readonly) != 0:
        return None
    _validate_dltensor(&dl)
    cdef Tensor t = _wrap_dltensor(&dl, DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0)
    t.owner_ref = array
    return t


cdef bint _numpy_route_usable(object numpy) except -1:
    """Sets the route up once per process: NumPy's C API, then probes on which the route
    must agree with this NumPy's own __dlpack__ (NumPy versions differ, in the strides of
    dimensions of size 0 or 1 for one). Any disagreement leaves __dlpack__ in charge."""
    if _numpy_route_state != NUMPY_ROUTE_UNDECIDED:
        return _numpy_route_state == NUMPY_ROUTE_ON
    with _numpy_lock:
        if _numpy_route_state == NUMPY_ROUTE_UNDECIDED:
            _set_up_numpy_route(numpy)
    return _numpy_route_state == NUMPY_ROUTE_ON


cdef bint _numpy_api_ready():
    """NumPy's C API imported (a no-op once done); False where the build lacks it."""
    if not dli_numpy_built():
        return False
    if dli_numpy_init() != 0:
        PyErr_Clear()
        return False
    return True


cdef list _numpy_probe_arrays(object numpy):
    """The layouts, dtypes and flags on which both NumPy routes must agree with NumPy."""
    base = numpy.arange(24, dtype=numpy.float32).reshape(2, 3, 4)
    frozen = numpy.arange(6, dtype=numpy.int16)
    frozen.flags.writeable = False
    return [base, base[:, ::2, 1:], base.transpose(2, 0, 1), base[:, :1, ::3],
            base[:0, :, ::2], base[:1, 1:2, ::4], base[1, 2, 3:3], base[1, 2, 3, ...],
            base[::-1, :1, ::-3], numpy.zeros((), bool), frozen,
            numpy.zeros(3, numpy.complex64)[::-1]]


cdef int _set_up_numpy_route(object numpy) except -1:
    global _numpy_route_state
    _numpy_route_state = NUMPY_ROUTE_OFF
    if not _numpy_api_ready():
        return 0
    try:
        probes = _numpy_probe_arrays(numpy)
        for probe in probes:
            native = _import_numpy_native(probe)
            exported = _tensor_from_capsule(probe.__dlpack__(max_version=_MAX_VERSION))
            if native is None or not _same_view(native, exported):
                return 0
    except Exception:
        return 0
    _numpy_route_state = NUMPY_ROUTE_ON
    return 0


cdef int _set_up_numpy_handback(object numpy) except -1:
    global _numpy_handback_state
    cdef Tensor probe
    _numpy_handback_state = NUMPY_ROUTE_OFF
    if not _numpy_api_ready():
        return 0
    try:
        arrays = _numpy_probe_arrays(numpy)
        for array in arrays:
            probe = _tensor_from_capsule(array.__dlpack__(max_version=_MAX_VERSION))
            ours = _wrap_as_ndarray(probe)
            theirs = numpy.from_dlpack(probe)
            if (ours is None or type(ours) is not numpy.ndarray or ours.dtype != theirs.dtype
                    or ours.shape != theirs.shape or ours.strides != theirs.strides
                    or ours.flags.writeable != theirs.flags.writeable
                    or ours.__array_interface__["data"] != theirs.__array_interface__["data"]):
                return 0
    except Exception:
        return 0
    _numpy_handback_state = NUMPY_ROUTE_ON
    return 0


cdef object _wrap_as_ndarray(Tensor t):
    cdef PyObject* raw = dli_numpy_wrap(
        &t.dl, (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, <PyObject*>t)
    if raw == NULL:
        if PyErr_Occurred() != NULL:
            raise_pending_error()
        return None
    result = <object>raw
    Py_DecRef(raw)
    return result


cdef object numpy_array_from(Tensor t):
    """An exact numpy.ndarray sharing t's memory (t is its base), equal to what
    numpy.from_dlpack(t) makes but with no Python call; None where NumPy's from_dlpack
    must decide (NumPy not imported, a device other than the CPU, a dtype outside NumPy's
    builtin table, the route off)."""
    if _numpy_handback_state != NUMPY_ROUTE_ON:
        if _numpy_handback_state == NUMPY_ROUTE_OFF:
            return None
        numpy = sys.modules.get("numpy")
        if numpy is None:
            return None
        with _numpy_lock:
            if _numpy_handback_state == NUMPY_ROUTE_UNDECIDED:
                _set_up_numpy_handback(numpy)
        if _numpy_handback_state != NUMPY_ROUTE_ON:
            return None
    return _wrap_as_ndarray(t)


cdef bint _same_view(Tensor a, Tensor b):
    cdef int i
    if (a.dl.data != b.dl.data or a.dl.byte_offset != b.dl.byte_offset
            or a.dl.ndim != b.dl.ndim or a.dl.dtype.code != b.dl.dtype.code
            or a.dl.dtype.bits != b.dl.dtype.bits or a.flags != b.flags):
        return False
    for i in range(a.dl.ndim):
        if a.dl.shape[i] != b.dl.shape[i] or a.dl.strides[i] != b.dl.strides[i]:
            return False
    return True


def _numpy_route():
    """Testing aid: True when exact numpy.ndarray objects are imported natively, False when
    they take __dlpack__, None while undecided (NumPy not imported or no import yet)."""
    if _numpy_route_state == NUMPY_ROUTE_UNDECIDED:
        return None
    return _numpy_route_state == NUMPY_ROUTE_ON


def _numpy_handback():
    """Testing aid: True when dl.to_framework(t, like=numpy) makes the ndarray natively."""
    return _numpy_handback_state == NUMPY_ROUTE_ON


def _set_numpy_route(bint enabled):
    """Testing aid: switch the native NumPy route on (where it is built and its probes
    pass) or off, so that tests run through both routes; returns the previous setting."""
    global _numpy_route_state, _last_producer_type, _last_producer, _numpy_handback_state
    previous = _numpy_route_state == NUMPY_ROUTE_ON
    _numpy_route_state = NUMPY_ROUTE_UNDECIDED if enabled else NUMPY_ROUTE_OFF
    _numpy_handback_state = NUMPY_ROUTE_UNDECIDED if enabled else NUMPY_ROUTE_OFF
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        _producers.pop(numpy.ndarray, None)
        _last_producer_type = NULL
        _last_producer = None
    return previous
