# Provides: dl.empty, dl.zeros, dl.ones and dl.full (in shared memory with shared=True), with
# the encoding of values for every data type (sub-byte ones packed); dl.share; Tensors from
# Python data (dl.arange, and the nested sequences of numbers dl.tensor and dl.asarray take,
# counted as they are read, their type inferred and promoted).
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
    """One element of type dt holding `value`, as bytes (a sub-byte type's code in one
    byte's low bits)."""
    cdef uint8_t code = dt.dl.code
    if dt.buffer_format != NULL and code != kDLComplex:
        fmt = dt.buffer_format.decode()
        if code == kDLBool:
            return struct.pack("?", bool(value))
        if code == kDLFloat:
            return _pack_float(fmt, float(value))
        try:
            return struct.pack(fmt, _integral(value))
        except struct.error:
            raise OverflowError(f"{value!r} does not fit in {dt.name}") from None
    if code == kDLComplex:
        value = complex(value)
        part = {32: "e", 64: "f", 128: "d"}[dt.dl.bits]
        return _pack_float(part, value.real) + _pack_float(part, value.imag)
    if code == kDLBfloat:
        return struct.pack("<H", _bfloat16_bits(float(value)))
    if code == kDLBcomplex:
        value = complex(value)
        return struct.pack("<HH", _bfloat16_bits(value.real), _bfloat16_bits(value.imag))
    if code == kDLInt or code == kDLUInt:
        return bytes([_subbyte_int_code(dt, value)])
    from dlinterop._lib import minifloat as _minifloat
    name = "float4_e2m1fn" if dt is float4_e2m1fn_x2 else dt.name
    return bytes([_minifloat.encode(name, float(value))])


cdef object _integral(object value):
    """An int for an integer type: ints (and anything with __index__: NumPy integers) as
    they are, other real numbers truncated toward zero, as NumPy and PyTorch cast (NaN and
    inf raise)."""
    if isinstance(value, float) or (not hasattr(type(value), "__index__")
                                    and hasattr(type(value), "__float__")):
        return int(float(value))
    return operator.index(value)


cdef int _subbyte_int_code(DType dt, object value) except -1:
    """The code of a packed sub-byte integer (two's complement for int1/int2/int4)."""
    cdef int bits = dt.dl.bits
    v = _integral(value)
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.dl.code == kDLInt \
        else (0, (1 << bits) - 1)
    if not low <= v <= high:
        raise OverflowError(f"{value!r} does not fit in {dt.name} ({low} to {high})")
    return v & ((1 << bits) - 1)


cdef int _bfloat16_bits(double value) except -1:
    """value rounded to bfloat16 (the float32 pattern's top 16 bits, to nearest even; NaN
    stays NaN), as its bit pattern."""
    if value != value:
        return 0x7FC0
    cdef uint32_t bits32 = struct.unpack("<I", _pack_float("f", value))[0]
    bits32 += 0x7FFF + ((bits32 >> 16) & 1)
    return (bits32 >> 16) & 0xFFFF


cdef bytes _pack_float(str fmt, double value):
    try:
        return struct.pack("<" + fmt, value)
    except OverflowError:
        # Out of the format's range: infinity, as a cast in NumPy or PyTorch gives.
        return struct.pack("<" + fmt, math.copysign(math.inf, value))


cdef bytes _encode_values(DType dt, list values):
    """`values` (Python numbers, NumPy scalars) as dt's elements in C order: for a packed
    sub-byte type, their codes one per byte (the caller packs them). Linear in the number
    of values: struct packs them all at once wherever every value already suits its format,
    else each is encoded on its own."""
    cdef Py_ssize_t n = len(values)
    cdef uint8_t code = dt.dl.code
    if dt.buffer_format != NULL and code != kDLComplex:
        try:
            return struct.pack(f"<{n}{dt.buffer_format.decode()}", *values)
        except (struct.error, OverflowError, TypeError):
            pass    # out of range, or needs a conversion: one by one, with its message
    elif dt.buffer_format != NULL:
        parts = []
        try:
            for v in values:
                c = complex(v)
                parts.append(c.real)
                parts.append(c.imag)
            return struct.pack(f"<{2 * n}{'f' if dt.dl.bits == 64 else 'd'}", *parts)
        except OverflowError:
            pass
    if _is_packed_subbyte(dt.dl):
        return bytes([_encode_scalar(dt, v)[0] for v in values])
    return b"".join([_encode_scalar(dt, v) for v in values])


cdef int _store_values(Tensor t, list values, int64_t start) except -1:
    """Writes `values` into the C-contiguous host Tensor t from element `start` on (for a
    packed sub-byte type, `start` is a multiple of 8, so that it falls on a byte). The
    number of bytes written is checked against t's memory, never trusted."""
    cdef DType dt = dtype_from_dl(t.dl.dtype)
    cdef bytes payload = _encode_values(dt, values)
    cdef int64_t count = len(values)
    cdef int64_t capacity = element_count(&t.dl)
    cdef int64_t first_byte
    cdef int64_t shape[1]
    cdef int64_t stride[1]
    cdef const uint8_t* codes
    if start < 0 or count > capacity - start:
        raise ValueError(f"{count} values do not fit in a tensor of {capacity} elements "
                         f"from element {start}")
    if _is_packed_subbyte(t.dl.dtype):
        if len(payload) != count or (start * dt.dl.bits) % 8:
            raise ValueError("sub-byte values must start on a byte")
        first_byte = start * dt.dl.bits // 8
        shape[0] = count
        stride[0] = 1
        codes = <const uint8_t*>PyBytes_AS_STRING(payload)
        with nogil:
            dli_pack_codes(<uint8_t*>t.dl.data + t.dl.byte_offset + first_byte, codes, 1,
                           shape, stride, dt.dl.bits, 8)
        return 0
    if len(payload) != count * dt.itemsize:
        raise ValueError(f"{count} values of {dt.name} encoded to {len(payload)} bytes")
    memcpy(<char*>t.dl.data + t.dl.byte_offset + start * dt.itemsize,
           PyBytes_AS_STRING(payload), len(payload))
    return 0


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


# arange writes its values in chunks of this many (a multiple of 8, so that every chunk of
# a packed sub-byte type starts on a byte): memory follows the Tensor, not a list of them all.
cdef int64_t _ARANGE_CHUNK = 1 << 16


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
    cdef DType dt = float32 if dtype is None else _dtype_of(dtype)
    if dt.dl.lanes != 1:
        raise TypeError(f"{dt.name} is a vector type: build it with dl.full")
    # The Tensor first: a count no memory can hold fails here, before any value is made.
    cdef Tensor t = _new_from_python(count, dt, "cpu", DEFAULT_ALIGNMENT, False, False)
    cdef int64_t n = count, first
    for first in range(0, n, _ARANGE_CHUNK):
        _store_values(t, [start + i * step for i in range(first, min(first + _ARANGE_CHUNK, n))],
                      first)
    if device is None or device == "cpu":
        return t
    return _copy_tensor(t, _parse_device(device))


cdef int _kind_of(object value) except -1:
    """0 bool, 1 int, 2 float, 3 complex: the kinds of number an object that is not one of
    Python's own (a Fraction, a Decimal, an IntEnum) converts as."""
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


cdef DType _scalar_dtype(object value):
    """The type one number in Python data asks for: Python's bool, int, float and complex
    the types dl.full infers (bool, int64, float32, complex64: PyTorch's defaults), a NumPy
    scalar its own type (as torch.tensor reads np.float64 or np.bool_)."""
    cls = type(value)
    if cls is float:
        return _INFERRED_DTYPES[2]
    if cls is int:
        return _INFERRED_DTYPES[1]
    if cls is bool:
        return _INFERRED_DTYPES[0]
    if cls is complex:
        return _INFERRED_DTYPES[3]
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        try:
            return _dtype_from_numpy(value.dtype)
        except ValueError:
            raise TypeError(f"a tensor holds numbers; NumPy's {value.dtype} has no DLPack "
                            "data type") from None
    if hasattr(cls, "__len__") or hasattr(cls, "__iter__"):
        raise TypeError(f"a tensor holds numbers, not {cls.__name__} (Python data is nested "
                        "lists, tuples or ranges of numbers; dl.asarray takes arrays)")
    return _INFERRED_DTYPES[_kind_of(value)]


cdef int _category(DType dt) noexcept:
    """0 bool, 1 integer, 2 real floating point, 3 complex: the order promotion climbs."""
    cdef uint8_t code = dt.dl.code
    if code == kDLBool:
        return 0
    if code == kDLInt or code == kDLUInt:
        return 1
    if code == kDLComplex or code == kDLBcomplex:
        return 3
    return 2


cdef DType _promoted(DType a, DType b):
    """The type that holds both a's and b's values, as PyTorch and NumPy promote: the higher
    kind wins (bool < integer < real < complex); within a kind the wider type; a signed and
    an unsigned integer give a signed one wide enough for both (float64 past int64);
    differing floats that neither holds widen to float32 (float64 past 16 bits)."""
    if a is b:
        return a
    cdef int ca = _category(a), cb = _category(b)
    cdef DType wide, narrow
    cdef int bits
    if ca != cb:
        wide, narrow = (a, b) if ca > cb else (b, a)
        if _category(wide) == 3 and _category(narrow) == 2 and \
                wide.dl.bits < 2 * narrow.dl.bits:
            return complex128 if narrow.dl.bits > 32 else complex64
        return wide
    if ca == 1:
        if a.dl.code == b.dl.code:
            return a if a.dl.bits >= b.dl.bits else b
        signed, unsigned = (a, b) if a.dl.code == kDLInt else (b, a)
        if signed.dl.bits > unsigned.dl.bits:
            return signed
        bits = max(8, 2 * unsigned.dl.bits)
        return {8: int8, 16: int16, 32: int32, 64: int64}.get(bits, float64)
    if ca == 3:
        bits = max(a.dl.bits, b.dl.bits)
        return complex128 if bits > 64 else complex64
    # real floating point
    wide, narrow = (a, b) if a.dl.bits >= b.dl.bits else (b, a)
    if wide.dl.code == kDLFloat and wide.dl.bits > narrow.dl.bits:
        return wide
    return float32 if wide.dl.bits <= 16 else float64


cdef int _count_into(object data, list flat, list shape, int depth) except -1:
    """Appends the numbers of `data` (a number, or nested lists, tuples or ranges of them) to
    `flat` in C order and checks that they form a rectangle, whose extents `shape` holds
    once the first path down has set them. Every extent is what iterating yielded, counted
    here: len() may lie, and a sequence may change while it is read."""
    if isinstance(data, (list, tuple, range)):
        if depth == MAX_NDIM:
            raise ValueError(f"a tensor has at most {MAX_NDIM} dimensions")
        items = [item for item in data]   # one snapshot: no length hint, no second pass
        if depth == len(shape):
            if flat:
                raise ValueError(_ragged(depth, None, len(items)))
            shape.append(len(items))
        elif shape[depth] != len(items):
            raise ValueError(_ragged(depth, shape[depth], len(items)))
        for item in items:
            _count_into(item, flat, shape, depth + 1)
        return 0
    if isinstance(data, (str, bytes, bytearray)):
        raise TypeError(f"a tensor holds numbers, not {type(data).__name__}")
    if depth != len(shape):
        raise ValueError(_ragged(depth, shape[depth] if depth < len(shape) else None, None))
    flat.append(data)
    return 0


cdef str _ragged(int depth, object expected, object found):
    what = lambda n: "a number" if n is None else f"a sequence of {n}"
    return (f"the data is not rectangular: at depth {depth} it holds {what(found)} where "
            f"another part holds {what(expected)}")


cdef Tensor _tensor_from_data(object data, object dtype_like, object device):
    """A new Tensor holding Python data (a number, or nested lists, tuples or ranges of
    numbers, NumPy scalars among them)."""
    cdef list flat = []
    cdef list shape = []
    _count_into(data, flat, shape, 0)
    cdef DType dt
    cdef DType inferred
    if dtype_like is None:
        if flat:
            dt = _scalar_dtype(flat[0])
            for v in flat:
                inferred = _scalar_dtype(v)
                if inferred is not dt:
                    dt = _promoted(dt, inferred)
        else:
            dt = float32
    else:
        dt = dtype_like if type(dtype_like) is DType else _dtype_of(dtype_like)
        for v in flat:
            if type(v) is not float and type(v) is not int:
                _scalar_dtype(v)       # the same TypeError for what is not a number
    if dt.dl.lanes != 1:
        raise TypeError(f"{dt.name} is a vector type: build it with dl.full")
    cdef Tensor t = _new_from_python(tuple(shape), dt, "cpu", DEFAULT_ALIGNMENT, False, False)
    if flat:
        _store_values(t, flat, 0)
    if device is None or device == "cpu":
        return t
    return _copy_tensor(t, _parse_device(device))
