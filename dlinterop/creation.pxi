# Provides: dl.empty, dl.zeros and dl.full (in shared memory with shared=True), with the
# encoding of a fill value for every data type (sub-byte ones packed); dl.share.
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


def empty(shape, dtype="float32", *, device="cpu", alignment=DEFAULT_ALIGNMENT, shared=False):
    """A new uninitialised Tensor. Its buffer is aligned to `alignment` bytes (256 by
    default, so that consumers with alignment rules, such as XLA, take it without copying).
    With shared=True it lies in shared memory: sent to another process through
    multiprocessing it arrives as a Tensor over the same memory (see dl.share)."""
    return _new_from_python(shape, dtype, device, alignment, False, shared)


def zeros(shape, dtype="float32", *, device="cpu", alignment=DEFAULT_ALIGNMENT, shared=False):
    """A new Tensor filled with zeros (in shared memory with shared=True)."""
    return _new_from_python(shape, dtype, device, alignment, True, shared)


cdef object _dtype_of = dtype   # dtype() under a name that full()'s dtype parameter cannot shadow


def full(shape, value, dtype=None, *, device="cpu", alignment=DEFAULT_ALIGNMENT,
         shared=False):
    """A new Tensor filled with `value` (in shared memory with shared=True). Without a dtype
    it is inferred from the value as PyTorch does: bool -> bool, int -> int64, float ->
    float32, complex -> complex64."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = bool_
        elif isinstance(value, int):
            dtype = int64
        elif isinstance(value, float):
            dtype = float32
        elif isinstance(value, complex):
            dtype = complex64
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
    process holds it. Pickled any other way it goes by value."""
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
