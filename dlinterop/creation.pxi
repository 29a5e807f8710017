# Provides: dl.empty, dl.zeros, dl.ones and dl.full (in shared memory with shared=True), with
# the encoding of a value for every data type (sub-byte ones packed); dl.share; Tensors from
# Python data (dl.arange, and the numbers dl.tensor and dl.asarray take).
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, cuda.pxi, allocator.pxi, copies.pxi,
# shared.pxi, cuda_ipc.pxi, importer.pxi.

cdef Tensor _new_from_python(object shape, object dtype_like, object device, object alignment,
                             bint zero, bint shared=False):
    cdef DType dt = _float32 if dtype_like is None else dtype(dtype_like)
    cdef DLDevice dev
    cdef int64_t dims[MAX_NDIM]
    cdef int ndim
    cdef Py_ssize_t align
    if device is None or device == "cpu":
        dev.device_type = kDLCPU
        dev.device_id = 0
    else:
        dev = _parse_device(device)
    align = operator.index(alignment)
    if align <= 0 or (align & (align - 1)) != 0:
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    if align < dt.itemsize:
        raise ValueError(f"alignment {align} is smaller than the item size {dt.itemsize} of {dt}")
    ndim = dims_from_python(shape, dims, False)
    if shared:
        if dev.device_type != kDLCPU:
            if align > 256:
                raise ValueError(f"CUDA allocations are 256-byte aligned; alignment={align} "
                                 "cannot be honoured")
            return _allocate_cuda_ipc(ndim, dims, dt.dl, dev, zero)
        return _allocate_shared(ndim, dims, dt.dl, <size_t>align)   # zero-filled anyway
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
    """A new Tensor of `shape` filled with `value`. Without a dtype it is inferred from the
    value as PyTorch does: bool -> bool, int -> int64, float -> float32, complex ->
    complex64 (NumPy infers float64 and complex128). The other parameters are dl.empty's."""
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
    cdef DType dt = dtype if type(dtype) is DType else _dtype_of(dtype)
    cdef bytes pattern = _encode_scalar(dt, value)
    cdef Tensor t
    cdef int64_t count, tail
    if dt.dl.bits < 8:
        return _full_packed(shape, pattern[0], dt, device, alignment, shared)
    t = _new_from_python(shape, dt, device, alignment, False, shared)
    count = element_count(&t.dl)
    if t.dl.device.device_type == kDLCPU:
        dli_fill(<char*>t.dl.data, pattern, len(pattern), count)
    else:
        _device_fill(t, pattern, count)
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
    memcpy(<char*>t.dl.data + whole * len(period), <const char*>period, nbytes - whole * len(period))
    if on_host:
        return t
    t = _copy_tensor(t, _parse_device(device))
    return _share_cuda(t) if shared else t


cdef bytes _encode_scalar(DType dt, object value):
    cdef uint8_t code = dt.dl.code
    if dt.buffer_format != NULL and code != kDLComplex:
        fmt = dt.buffer_format.decode()
        if code == kDLBool:
            return struct.pack("?", bool(value))
        if code == kDLFloat:
            return _pack_float(fmt, float(value))
        if isinstance(value, float):
            # Truncates toward zero, as NumPy and PyTorch do; NaN and inf raise.
            value = int(value)
        try:
            return struct.pack(fmt, operator.index(value))
        except struct.error:
            raise OverflowError(f"{value!r} does not fit in {dt.name}") from None
    if code == kDLComplex:
        value = complex(value)
        part = {32: "e", 64: "f", 128: "d"}[dt.dl.bits]
        return _pack_float(part, value.real) + _pack_float(part, value.imag)
    if code == kDLBfloat:
        # Round the float32 pattern to its top 16 bits, to nearest even; NaN stays NaN.
        value = float(value)
        if value != value:
            return struct.pack("<H", 0x7FC0)
        bits32 = struct.unpack("<I", _pack_float("f", value))[0]
        bits32 += 0x7FFF + ((bits32 >> 16) & 1)
        return struct.pack("<H", (bits32 >> 16) & 0xFFFF)
    from dlinterop import _minifloat
    name = "float4_e2m1fn" if dt is float4_e2m1fn_x2 else dt.name
    return bytes([_minifloat.encode(name, float(value))])


cdef bytes _pack_float(str fmt, double value):
    try:
        return struct.pack("<" + fmt, value)
    except OverflowError:
        # Out of the format's range: infinity, as a cast in NumPy or PyTorch gives.
        return struct.pack("<" + fmt, math.copysign(math.inf, value))


# -- copies -----------------------------------------------------------------------------


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
    if t.dl.device.device_type == kDLCUDA:
        return _share_cuda(t)
    if not host_accessible(t.dl.device.device_type):
        raise BufferError(f"dl.share takes host or CUDA device memory, not memory on "
                          f"{t.device}")
    cdef Tensor out = _allocate_shared(t.dl.ndim, t.dl.shape, t.dl.dtype, DEFAULT_ALIGNMENT)
    _copy_into(out, t)
    return out


# -- from Python data ---------------------------------------------------------------------


def ones(shape, dtype="float32", *, device="cpu", alignment=256, shared=False):
    """A new Tensor of `shape` filled with ones; float32 by default (NumPy's default is
    float64). The parameters are dl.empty's."""
    return full(shape, True if _dtype_of(dtype) is bool_ else 1, dtype, device=device,
                alignment=alignment, shared=shared)


def arange(start, stop=None, step=1, *, dtype=None, device="cpu"):
    """Evenly spaced values in [start, stop), as NumPy's arange (one argument: [0, start)).
    Without a dtype: int64 when start, stop and step are ints, else float32 (dl.full's rule)."""
    if stop is None:
        start, stop = 0, start
    for name, value in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(value, (bool, complex)) or not isinstance(value, (int, float)) and \
                not hasattr(type(value), "__index__"):
            raise TypeError(f"arange's {name} is a real number, not {type(value).__name__}")
    if step == 0:
        raise ValueError("arange's step cannot be 0")
    count = max(0, math.ceil((stop - start) / step))
    if dtype is None and all(hasattr(type(v), "__index__") for v in (start, stop, step)):
        dtype = int64
        start, step = operator.index(start), operator.index(step)
    values = [start + i * step for i in range(count)]
    return _tensor_from_data(values, float32 if dtype is None else dtype, device, (count,))


cdef int _kind_of(object value) except -1:
    """0 bool, 1 int, 2 float, 3 complex: the kinds dl.full infers bool, int64, float32,
    complex64 from."""
    if isinstance(value, bool):
        return 0
    if hasattr(type(value), "__index__"):
        return 1
    if isinstance(value, float) or hasattr(type(value), "__float__") and \
            not isinstance(value, complex):
        return 2
    if isinstance(value, complex) or hasattr(type(value), "__complex__"):
        return 3
    raise TypeError(f"a tensor holds numbers, not {type(value).__name__}")


cdef tuple _data_shape(object data, list flat, int depth):
    """The shape of nested lists or tuples (equal lengths at each depth), their numbers
    appended to `flat` in C order."""
    if isinstance(data, (list, tuple)):
        if depth == MAX_NDIM:
            raise ValueError(f"a tensor has at most {MAX_NDIM} dimensions")
        inner = None
        for item in data:
            shape = _data_shape(item, flat, depth + 1)
            if inner is None:
                inner = shape
            elif shape != inner:
                raise ValueError(f"the sequences at depth {depth + 1} have different shapes "
                                 f"({inner} and {shape}): a tensor is rectangular")
        return (len(data),) + (inner if inner is not None else ())
    if isinstance(data, (str, bytes, bytearray)):
        raise TypeError(f"a tensor holds numbers, not {type(data).__name__}")
    _kind_of(data)
    flat.append(data)
    return ()


cdef Tensor _tensor_from_data(object data, object dtype_like, object device, object shape=None):
    """A new Tensor holding Python data (a number, or nested lists or tuples of numbers)."""
    cdef list flat = []
    if shape is None:
        shape = _data_shape(data, flat, 0)
    else:
        flat = data
        for value in flat:
            _kind_of(value)
    cdef DType dt
    if dtype_like is None:
        kind = max([_kind_of(v) for v in flat], default=2)
        dt = _INFERRED_DTYPES[kind]
    else:
        dt = dtype_like if type(dtype_like) is DType else _dtype_of(dtype_like)
    if dt.dl.lanes != 1:
        raise TypeError(f"{dt.name} is a vector type: build it with dl.full")
    if dt.dl.bits % 8:
        codes = [_encode_scalar(dt, v)[0] for v in flat]
        payload = sum(code << (i * dt.dl.bits) for i, code in enumerate(codes)).to_bytes(
            (len(codes) * dt.dl.bits + 7) // 8, "little")
    else:
        payload = b"".join([_encode_scalar(dt, v) for v in flat])
    cdef Tensor t = _new_from_python(shape, dt, "cpu", DEFAULT_ALIGNMENT, False, False)
    if len(payload):
        memcpy(t.dl.data, <const char*>payload, len(payload))
    if device is None or device == "cpu":
        return t
    return _copy_tensor(t, _parse_device(device))
