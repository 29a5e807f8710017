# Provides: dl.asarray, the bridge for objects without DLPack: __cuda_array_interface__,
# __array_interface__ and the buffer protocol, zero-copy wherever the source allows; then
# Python data; a cast where a dtype asks for one; dl.tensor (always a copy).
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, layouts.pxi, cuda.pxi,
# placement.pxi, consume.pxi, importer.pxi, numbers.pxi (_is_numpy_scalar), creation.pxi
# (_dtype_of), python_data.pxi, casts.pxi.

@cython.final
cdef class _BufferHolder:
    """Holds a Py_buffer for as long as a Tensor views its memory."""
    cdef Py_buffer view
    cdef bint held
    cdef readonly object source

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False
        # Here, not in the generated clean-up, so that the source's destructor never runs
        # with an exception pending (as release.pxi's _release_tensor drops a Tensor's owner).
        self.source = None


cdef int _byte_strides_to_elements(int64_t* out, object byte_strides, int ndim,
                                   Py_ssize_t itemsize) except -1:
    cdef int i
    for i in range(ndim):
        s = byte_strides[i]
        if s % itemsize:
            raise BufferError(f"byte stride {s} is not a multiple of the item size {itemsize}")
        out[i] = s // itemsize
    return 0


cdef Tensor _tensor_from_buffer(object obj):
    cdef _BufferHolder holder = _BufferHolder.__new__(_BufferHolder)
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef DType dt
    cdef int i
    cdef int64_t count, nbytes
    PyObject_GetBuffer(obj, &holder.view, PyBUF_RECORDS_RO)
    holder.held = True
    holder.source = obj
    cdef Py_buffer* v = &holder.view
    dt = _dtype_from_buffer_format(v.format, v.itemsize)
    if dt is None:
        fmt = (<bytes>v.format).decode() if v.format != NULL else "B"
        raise TypeError(f"buffer format {fmt!r} (item size {v.itemsize}) has no DLPack data type")
    if v.ndim < 0 or v.ndim > MAX_NDIM:
        refuse_ndim(v.ndim, BufferError)
    if v.ndim == 0:
        # A scalar buffer (a NumPy scalar, a 0-d array): shape and strides are NULL by the
        # buffer protocol's rules, and the tensor is 0-d, not (1,).
        count = 1
    elif v.shape == NULL:
        shape[0] = v.len // v.itemsize
        count = shape[0]
    else:
        count = 1
        for i in range(v.ndim):
            shape[i] = v.shape[i]
            if shape[i] < 0 or __builtin_mul_overflow(count, shape[i], &count):
                raise ValueError(f"buffer exporter {type(obj).__name__} gave a bad shape")
    # The buffer protocol's len is the product of shape and itemsize; an exporter whose
    # numbers disagree describes memory it may not have.
    if __builtin_mul_overflow(count, v.itemsize, &nbytes) or nbytes != v.len:
        raise ValueError(f"buffer exporter {type(obj).__name__} gave len {v.len}, which is "
                         f"not its shape's {count} elements of {v.itemsize} bytes")
    if v.ndim == 0:
        return _tensor_over(v.buf, 0, shape, NULL, dt, _CPU, v.readonly, holder)
    if v.shape == NULL:
        return _tensor_over(v.buf, 1, shape, NULL, dt, _CPU, v.readonly, holder)
    for i in range(v.ndim):
        if v.strides != NULL:
            if v.strides[i] % v.itemsize:
                raise BufferError(f"byte stride {v.strides[i]} is not a multiple of the item "
                                  f"size {v.itemsize}")
            strides[i] = v.strides[i] // v.itemsize
    return _tensor_over(v.buf, v.ndim, shape, strides if v.strides != NULL else NULL, dt,
                        _CPU, v.readonly, holder)


cdef DType _dtype_from_typestr(str typestr):
    """The DType of an array interface's typestr (byte order, kind, size: dtypes.pxi reads
    it, as it reads every NumPy type string)."""
    if len(typestr) < 3 or typestr[0] not in "<>|=":
        raise ValueError(f"malformed typestr {typestr!r}")
    found = _dtype_from_type_string(typestr)
    # dl.dtype("c4") is complex32, but no array-interface producer writes it (NumPy has no
    # complex32): an interface that says c4 describes memory nobody defined.
    if found is None or found is complex32:
        raise TypeError(f"typestr {typestr!r} has no DLPack data type")
    return found


cdef Tensor _tensor_from_interface(object obj, bint cuda):
    """A Tensor over the memory obj's __cuda_array_interface__ (cuda) or
    __array_interface__ describes. The interface dict holds the only references to what it
    names (a buffer object, say): it is dropped while an error is being handled, not
    pending, so that nothing's destructor runs with an exception in flight."""
    iface = obj.__cuda_array_interface__ if cuda else obj.__array_interface__
    try:
        if not cuda:
            t = _tensor_over_interface(obj, iface, _CPU)
            # The array interface has no packed sub-byte layout: an array of a sub-byte type
            # (ml_dtypes' int4, float4_e2m1fn, ... in NumPy) holds one element per byte.
            return _repacked(t) if _is_packed_subbyte(t.dl.dtype) else t
        t = _tensor_over_interface(obj, iface, _cuda_device_of(iface["data"][0]))
        if _is_packed_subbyte(t.dl.dtype):
            return _repacked(t)     # refused: device memory
        stream = iface.get("stream")
        if stream is not None:
            _cuda_wait_external_stream(stream, t.dl.device)
        return t
    except BaseException:
        iface = t = stream = None
        raise


cdef Tensor _tensor_from_numpy_scalar(object scalar):
    """A new 0-d Tensor holding a NumPy scalar's value in its own type (ml_dtypes' too).
    Never through the scalar's __array_interface__: NumPy builds that from a temporary
    array that it frees before returning, so its data pointer names freed memory (read
    back as garbage where NumPy keeps no cache of small buffers: free-threaded builds).
    NumPy's asarray makes a 0-d array that owns a copy; the Tensor views that array."""
    array = sys.modules["numpy"].asarray(scalar)
    try:
        return _from_dlpack(array, None, None, None)
    except BufferError:     # a type NumPy's DLPack export refuses (ml_dtypes')
        return _tensor_from_interface(array, False)


cdef Tensor _tensor_over_interface(object obj, dict iface, DLDevice device):
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef uintptr_t address
    cdef DType dt
    try:
        dt = _dtype_from_typestr(iface["typestr"])
    except TypeError:
        # A typestr such as '<V2' names no type; an array's own dtype may (ml_dtypes).
        if not hasattr(obj, "dtype"):
            raise
        dt = dtype(obj.dtype)
    cdef int ndim
    cdef int i
    if iface.get("mask") is not None:
        raise BufferError("masked array interfaces are not supported")
    dims = tuple(iface["shape"])
    ndim = len(dims)
    if ndim > MAX_NDIM:
        refuse_ndim(ndim, BufferError)
    for i in range(ndim):
        shape[i] = dims[i]
    data = iface.get("data")
    owner = obj
    readonly = False
    offset = iface.get("offset", 0)
    if type(offset) is not int or offset < 0:
        raise ValueError(f"array interface offset must be a non-negative int, got {offset!r}")
    byte_strides = iface.get("strides")
    if byte_strides is not None:
        _byte_strides_to_elements(strides, byte_strides, ndim, dt.itemsize)
    if isinstance(data, tuple):
        address, readonly = data[0], bool(data[1])
        if dli_device_host(device.device_type):
            address += offset
        return _tensor_over(<void*>address, ndim, shape,
                            strides if byte_strides is not None else NULL,
                            dt, device, readonly, owner)
    if not dli_device_host(device.device_type):
        raise TypeError("__cuda_array_interface__ 'data' must be a (pointer, read_only) tuple")
    # No data entry, or a buffer object: the memory is that buffer's, and the array must lie
    # inside it (as NumPy requires: "buffer is too small for requested array").
    cdef Tensor base = _tensor_from_buffer(obj if data is None else data)
    cdef Py_ssize_t start = offset
    if not is_c_contiguous(&base.dl):
        raise BufferError("an array interface's data buffer must be contiguous")
    t = _tensor_over(<char*>base.dl.data + start, ndim, shape,
                     strides if byte_strides is not None else NULL,
                     dt, device, _is_readonly(base), base.owner_ref)
    _check_inside(&t.dl, start, storage_bytes(element_count(&base.dl), base.dl.dtype))
    return t


cdef inline bint _is_python_data(type cls) noexcept:
    """The exact types dl.asarray and dl.tensor read as Python data first (a number, or
    nested lists, tuples or ranges of numbers): no memory to share, always a new Tensor."""
    return (cls is list or cls is tuple or cls is bool or cls is int or cls is float
            or cls is complex or cls is range)


cdef inline bint _is_python_data_subclass(object obj) noexcept:
    """Subclasses of those types (an IntEnum member, a list subclass), read as Python data
    once no array protocol claims them."""
    return isinstance(obj, (list, tuple, range, int, float, complex))


def asarray(obj, dtype=None, *, device=None, copy=None):
    """A Tensor from `obj`: DLPack first, then __cuda_array_interface__, then
    __array_interface__, then the buffer protocol (bytes, bytearray, array.array, mmap,
    memoryview), then Python data (nested lists or tuples of numbers, or a number: a new
    Tensor, as dl.tensor makes it; a NumPy scalar: a new 0-d Tensor of its type, as
    NumPy's asarray makes a new array). Shares memory whenever the source allows it. A `dtype`
    other than the source's casts its values as Tensor.astype does, into a new Tensor (so
    copy=False refuses it with CopyError); Python data is made in that type."""
    cdef Tensor t
    cdef DLDevice target
    check_copy_arg(copy)
    cls = type(obj)
    if cls is Tensor:
        t = <Tensor>obj
    elif PyCapsule_CheckExact(obj) or hasattr(cls, "__dlpack__"):
        try:
            if dtype is None:
                return _from_dlpack(obj, device, copy, None)
            t = _from_dlpack(obj, None, None, None)
        except BufferError:
            # DLPack refused (NumPy and ml_dtypes' bfloat16/float8, for one): the array
            # interface may still describe the memory.
            if PyCapsule_CheckExact(obj) or not hasattr(obj, "__array_interface__"):
                raise
            t = _tensor_from_interface(obj, False)
    elif _is_numpy_scalar(obj):
        if copy is False:
            raise CopyError(f"a Tensor from the NumPy scalar {obj!r} is a copy (as NumPy's "
                            "asarray makes one), and copy=False forbids a copy")
        t = _tensor_from_numpy_scalar(obj)
        copy = None     # already a new Tensor
    elif hasattr(obj, "__cuda_array_interface__"):
        t = _tensor_from_interface(obj, True)
    elif hasattr(obj, "__array_interface__"):
        t = _tensor_from_interface(obj, False)
    elif PyObject_CheckBuffer(obj):
        t = _tensor_from_buffer(obj)
    elif _is_python_data(cls) or _is_python_data_subclass(obj):
        # Python data has no memory to share: a new Tensor, as dl.tensor makes it.
        if copy is False:
            raise ValueError("copy=False: a Tensor made from Python data is always a copy")
        return _tensor_from_data(obj, dtype, device)
    else:
        raise TypeError(f"cannot make a tensor from {cls.__name__}: it has no __dlpack__, "
                        "__cuda_array_interface__, __array_interface__ or buffer, and is "
                        "not a list, tuple, range or Python number")
    if dtype is not None:
        return _cast_placed(t, _dtype_of(dtype), device, copy)
    return _placed(t, device, copy)


cdef Tensor _cast_placed(Tensor t, DType dt, object device, object copy):
    """The tail of asarray with a dtype: t placed as _placed places it when it has that
    type, else its values cast (on the host: before a move to a device, after one from
    it), which is a copy, so copy=False refuses it."""
    if _same_dtype(t.dl.dtype, dt.dl):
        return _placed(t, device, copy)
    if copy is False:
        raise CopyError(f"casting {dtype_from_dl(t.dl.dtype).name} to {dt.name} makes a new "
                        "Tensor, and copy=False forbids a copy")
    if dli_device_host_readable(t.dl.device.device_type):
        return _placed(_cast_copy(t, dt), device, None)
    return _cast_copy(_placed(t, device, None), dt)


def tensor(data, dtype=None, *, device="cpu"):
    """A new Tensor holding `data`, always a copy: Python data (a number gives a 0-d
    Tensor; nested lists, tuples or ranges of equal lengths give its shape), or anything
    dl.asarray takes. Without a dtype, Python data gets the widest kind it holds as dl.full
    infers it (bool, int64, float32, complex64; float32 when empty; NumPy scalars and 0-d
    arrays keep their own, promoted as PyTorch and NumPy promote: dl.tensor([np.float64(1),
    2.0]) is float64) and other sources keep theirs; a dtype that differs from another
    source's casts its values as Tensor.astype does."""
    cls = type(data)
    if _is_python_data(cls) or (_is_python_data_subclass(data) and not (
            hasattr(cls, "__dlpack__") or hasattr(cls, "__cuda_array_interface__")
            or hasattr(cls, "__array_interface__") or PyObject_CheckBuffer(data))):
        return _tensor_from_data(data, dtype, device)
    return asarray(data, dtype, device=device, copy=True)
