# Provides: dl.empty, dl.zeros, dl.ones and dl.full (in shared memory with shared=True), their
# common arguments read in C (_dims_fast, _dtype_arg), the types dl.full infers; dl.share.
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, cuda.pxi, allocator.pxi,
# copies.pxi, placement.pxi, shared.pxi, cuda_ipc.pxi, importer.pxi, numbers.pxi,
# encoding.pxi.

cdef inline DType _dtype_arg(object x):
    """The DType a creation call's dtype argument names: a DType, None (float32) and a
    registered name read here without a call; anything else through dtype()."""
    if type(x) is DType:
        return <DType>x
    if x is None:
        return _float32
    if type(x) is str:
        found = _dtype_by_name.get(x)
        if found is not None:
            return <DType>found
    return dtype(x)


cdef inline int _dims_fast(object shape, int64_t* dims) noexcept:
    """The ndim of a shape that is an exact int or a tuple of at most MAX_NDIM exact ints,
    each small enough to read without a call, with `dims` filled; -1 for any other shape,
    which dims_from_python reads (with the same results: this is its common case only).
    Negative values pass through: the size rule refuses them, as for every shape."""
    cdef long value
    cdef Py_ssize_t ndim, i
    if type(shape) is int:
        if not dli_small_long(<PyObject*>shape, &value):
            return -1
        dims[0] = value
        return 1
    if type(shape) is tuple:
        ndim = PyTuple_GET_SIZE(shape)
        if ndim > MAX_NDIM:
            return -1
        for i in range(ndim):
            if not dli_small_long(PyTuple_GET_ITEM(shape, i), &value):
                return -1
            dims[i] = value
        return <int>ndim
    return -1


cdef Tensor _new_from_python(object shape, object dtype_like, object device, object alignment,
                             bint zero, bint shared=False):
    cdef DType dt = _dtype_arg(dtype_like)
    cdef DLDevice dev
    cdef int64_t dims[MAX_NDIM]
    cdef int ndim
    cdef Py_ssize_t align
    cdef long small
    if device is None or device == "cpu":
        dev.device_type = kDLCPU
        dev.device_id = 0
    else:
        dev = _parse_device(device)
    if dli_small_long(<PyObject*>alignment, &small):
        align = small
    else:
        align = PyNumber_Index(alignment)
    if align <= 0 or (align & (align - 1)) != 0:
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    if align < dt.itemsize:
        raise ValueError(f"alignment {align} is smaller than the item size {dt.itemsize} of {dt}")
    ndim = _dims_fast(shape, dims)
    if ndim < 0:
        ndim = dims_from_python(shape, dims, False)
    if shared:
        if not dli_device_host(dev.device_type):
            _check_alignment(dev, align)
            return _allocate_cuda_ipc(ndim, dims, dt.dl, dev, zero)
        return _allocate_shared(ndim, dims, dt.dl, <size_t>align)   # zero-filled anyway
    if not dli_device_host(dev.device_type) and align > DEFAULT_ALIGNMENT:
        # In the order _allocate checks: the layout, then a runtime for the device.
        checked_nbytes(ndim, dims, dt.dl, dev)
        _require_cuda(dev)
        _check_alignment(dev, align)
    return _allocate(ndim, dims, dt.dl, dev, <size_t>align, zero)


def empty(shape, dtype="float32", *, device="cpu", alignment=256, shared=False):
    """A new uninitialised Tensor of `shape` (an int or a tuple of ints).

    dtype: a dl.DType, a name ("float64", "int32", "f4", ...) or anything dl.dtype takes;
    float32 by default, as PyTorch's (NumPy's default is float64). device: "cpu" (the
    default), "cuda", "cuda:1", "cuda_host" (pinned), "cuda_managed", a dl.Device or a
    (device_type, index) pair. The buffer is aligned to `alignment` bytes (256 by default,
    so that consumers with alignment rules, such as XLA, take it without copying; a power of
    two). With shared=True it lies in shared memory: sent to another process through
    multiprocessing it arrives as a Tensor over the same memory (see dl.share)."""
    return _new_from_python(shape, dtype, device, alignment, False, shared)


def zeros(shape, dtype="float32", *, device="cpu", alignment=256, shared=False):
    """A new Tensor of `shape` filled with zeros; float32 by default (NumPy's default is
    float64). The parameters are dl.empty's."""
    return _new_from_python(shape, dtype, device, alignment, True, shared)


cdef object _dtype_of = dtype   # dtype() under a name that full()'s dtype parameter cannot shadow
# The dtype inferred for each kind of Python number, as PyTorch infers it: bool, int, float,
# complex (dl.full, dl.tensor, dl.arange).
cdef tuple _INFERRED_DTYPES = (bool_, int64, float32, complex64)


def full(shape, value, dtype=None, *, device="cpu", alignment=256,
         shared=False):
    """A new Tensor of `shape` filled with `value` (a number: a NumPy scalar or a 0-d array
    counts as the Python number it holds, as in PyTorch). Without a dtype it is inferred
    from the value as PyTorch does: bool -> bool, int -> int64, float -> float32, complex ->
    complex64 (NumPy infers float64 and complex128). The other parameters are dl.empty's."""
    value = _number_of(value)
    if dtype is None:
        # Python's own number types only (their subclasses included), unlike dl.tensor's
        # _kind_of, which also reads objects that convert.
        if isinstance(value, bool):
            dtype = _INFERRED_DTYPES[0]
        elif isinstance(value, int):
            dtype = _INFERRED_DTYPES[1]
        elif isinstance(value, float):
            dtype = _INFERRED_DTYPES[2]
        elif isinstance(value, complex):
            dtype = _INFERRED_DTYPES[3]
        else:
            raise TypeError(f"cannot infer a dtype from {type(value).__name__}; pass dtype=")
    return _full(shape, value, _dtype_arg(dtype), device, alignment, shared)


def ones(shape, dtype="float32", *, device="cpu", alignment=256, shared=False):
    """A new Tensor of `shape` filled with ones; float32 by default (NumPy's default is
    float64). The parameters are dl.empty's."""
    # None names no type here (dl.full would infer one from the value): dtype() refuses it.
    cdef DType dt = _dtype_of(dtype) if dtype is None else _dtype_arg(dtype)
    return _full(shape, True if dt is bool_ else 1, dt, device, alignment, shared)


cdef Tensor _full(object shape, object value, DType dt, object device, object alignment,
                  bint shared):
    """full() once its type is known: the value encoded first (a value the type cannot hold
    is refused before any memory is taken), then the Tensor made and filled."""
    cdef uint64_t element[2]    # one element of up to 16 bytes, for the common cases
    cdef const char* pattern
    cdef bytes encoded
    cdef Tensor t
    cdef int64_t count
    if _encode_common(dt, value, <char*>element):
        pattern = <const char*>element
    else:
        encoded = _encode_scalar(dt, value)
        if dt.dl.bits < 8:
            return _full_packed(shape, encoded[0], dt, device, alignment, shared)
        pattern = PyBytes_AS_STRING(encoded)
    t = _new_from_python(shape, dt, device, alignment, False, shared)
    count = element_count(&t.dl)
    if dli_device_host(t.dl.device.device_type):
        dli_fill(<char*>t.dl.data, pattern, <size_t>dt.itemsize, count)
    else:
        _device_fill(t, PyBytes_FromStringAndSize(<char*>pattern, dt.itemsize), count)
    return t


cdef Tensor _full_packed(object shape, int code, DType dt, object device, object alignment,
                         bint shared):
    """full() for packed sub-byte types: codes of dt.bits bits, little bit-endian, every
    lane the same. One period of the bit pattern is lcm(bits, 8) bits long."""
    cdef int bits = dt.dl.bits
    cdef int period_bits = bits * 8 // math.gcd(bits, 8)
    cdef int per_period = period_bits // bits
    cdef bytes period = sum(code << (i * bits) for i in range(per_period)).to_bytes(
        period_bits // 8, "little")
    on_host = device is None or device == "cpu"
    cdef Tensor t = _new_from_python(shape, dt, "cpu", alignment, False, shared and on_host)
    cdef int64_t nbytes = storage_bytes(element_count(&t.dl), dt.dl)
    cdef int64_t whole = nbytes // len(period)
    dli_fill(<char*>t.dl.data, period, len(period), whole)
    memcpy(<char*>t.dl.data + whole * len(period), <const char*>period,
           nbytes - whole * len(period))
    if on_host:
        return t
    t = _on_device(t, device)
    return _share_cuda(t) if shared else t


# -- shared memory ----------------------------------------------------------------------


def share(x):
    """A Tensor in shared memory holding x's values: `x` itself when it is a dl.Tensor in
    shared memory already, else a copy (x: a dl.Tensor or anything dl.from_dlpack takes, in
    host memory, or in CUDA device memory: then the copy is in device memory CUDA IPC can
    hand to another process, made on the current stream). Sent to another process through
    multiprocessing (a Queue, a Pipe, a Pool, Process arguments,
    concurrent.futures.ProcessPoolExecutor), a shared Tensor arrives as a Tensor over the
    same memory: writes on either side are seen by the other, and the memory lives while any
    process holds it. Pickled any other way it goes by value. Host shared memory must fit in
    what this process can take now (MemoryError before any page is reserved otherwise), and
    needs memfd_create (OSError where the system has none); docs/processes.md has both
    rules."""
    cdef Tensor t = x if type(x) is Tensor else _from_dlpack(x, None, None, None)
    if _shared_memory_of(t) is not None or _is_cuda_ipc_memory(t):
        return t
    if dli_device_cuda_ipc(t.dl.device.device_type):
        return _share_cuda(t)
    if not dli_device_host_readable(t.dl.device.device_type):
        raise BufferError(f"dl.share takes host or CUDA device memory, not memory on "
                          f"{_device_of(t)}")
    cdef Tensor out = _allocate_shared(t.dl.ndim, t.dl.shape, t.dl.dtype, DEFAULT_ALIGNMENT)
    _copy_into(out, t)
    return out
