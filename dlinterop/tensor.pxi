# The Tensor class: owned, aligned buffers or imported managed tensors, their attributes,
# the buffer protocol, copies and pickling. Export lives in export.pxi, import in
# importer.pxi; the methods here only forward to them.

# Host-accessible device types: the CPU can read and write them directly.
cdef inline bint _host_accessible(DLDeviceType device_type) noexcept nogil:
    return device_type == kDLCPU or device_type == kDLCUDAHost or device_type == kDLCUDAManaged


cdef inline int64_t _element_count(const DLTensor* dl) noexcept nogil:
    cdef int64_t n = 1
    cdef int i
    for i in range(dl.ndim):
        n *= dl.shape[i]
    return n


cdef inline int64_t _storage_bytes(int64_t count, DLDataType dt) noexcept nogil:
    # Packed sub-byte data takes ceil(count * bits * lanes / 8) bytes.
    return (count * dt.bits * dt.lanes + 7) // 8


# No GC support, like NumPy's ndarray: a Tensor's only object reference is its owner,
# which never refers back to it in any way dlinterop creates, and GC tracking would cost
# every import a collection check.
@cython.no_gc
@cython.freelist(64)
cdef class Tensor:
    """An n-dimensional array of any DLPack data type and device.

    Made by dl.empty / dl.zeros / dl.full, dl.from_dlpack, dl.asarray or Tensor.copy; it
    either owns an aligned buffer or holds an imported DLPack tensor whose deleter it calls
    exactly once."""

    def __cinit__(self):
        # A valid empty float32 vector until a creator fills in the real layout, so that
        # even Tensor.__new__(Tensor) is safe to use.
        self.shape_strides = self.inline_storage
        self.inline_storage[0] = 0
        self.inline_storage[1] = 1
        self.dl.ndim = 1
        self.dl.shape = self.inline_storage
        self.dl.strides = self.inline_storage + 1
        self.dl.dtype.code = kDLFloat
        self.dl.dtype.bits = 32
        self.dl.dtype.lanes = 1
        self.dl.device.device_type = kDLCPU

    def __init__(self, *args, **kwargs):
        raise TypeError("Tensor cannot be constructed directly; use dl.empty, dl.zeros, "
                        "dl.full, dl.from_dlpack or dl.asarray")

    def __dealloc__(self):
        cdef DLManagedTensorVersioned* mv = self.managed_versioned
        cdef DLManagedTensor* ml = self.managed_legacy
        self.managed_versioned = NULL
        self.managed_legacy = NULL
        if mv != NULL and mv.deleter != NULL:
            mv.deleter(mv)
        if ml != NULL and ml.deleter != NULL:
            ml.deleter(ml)
        if self.alloc_base != NULL:
            if self.dl.device.device_type == kDLCPU:
                dli_host_free(self.alloc_base, self.alloc_nbytes)
            else:
                _device_free(self.alloc_base, self.alloc_nbytes, self.dl.device)
            self.alloc_base = NULL
        if self.shape_strides != self.inline_storage:
            free(self.shape_strides)
            self.shape_strides = self.inline_storage
        # Drop the owner here, where Cython keeps any pending exception aside, not in the
        # generated clean-up after this method: an owner's destructor (a foreign capsule's,
        # say) may run Python code, which must not see an exception in flight.
        self.owner_ref = None

    cdef DLTensor* dltensor(self) noexcept nogil:
        return &self.dl

    # -- attributes ---------------------------------------------------------------------

    @property
    def shape(self):
        return tuple([self.dl.shape[i] for i in range(self.dl.ndim)])

    @property
    def strides(self):
        """Strides in elements (DLPack's unit, not NumPy's bytes)."""
        return tuple([self.dl.strides[i] for i in range(self.dl.ndim)])

    @property
    def dtype(self):
        return dtype_from_dl(self.dl.dtype)

    @property
    def device(self):
        return device_from_dl(self.dl.device)

    @property
    def ndim(self):
        return self.dl.ndim

    @property
    def size(self):
        return _element_count(&self.dl)

    @property
    def nbytes(self):
        # In Python ints: a broadcast (zero-stride) view can hold more than 2**63 bytes' worth.
        return (<object>_element_count(&self.dl) * self.dl.dtype.bits * self.dl.dtype.lanes + 7) // 8

    @property
    def itemsize(self):
        return (self.dl.dtype.bits * self.dl.dtype.lanes + 7) // 8

    @property
    def data_ptr(self):
        """Address of element 0 (data + byte_offset)."""
        return <uintptr_t>self.dl.data + self.dl.byte_offset

    @property
    def readonly(self):
        return (self.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0

    @property
    def readonly_reason(self):
        """Why the Tensor is read-only: "flag" when its producer said so (DLPack's READ_ONLY
        flag, a read-only buffer or array) or dlinterop made it so, "legacy" when it came
        from a legacy "dltensor" capsule, which cannot say whether its memory may be
        written; None when it is writable. A "legacy" Tensor may be exported as a legacy
        capsule again, a "flag" one only as a versioned capsule or a copy."""
        if not (self.flags & DLPACK_FLAG_BITMASK_READ_ONLY):
            return None
        return "legacy" if self.flags & FLAG_READ_ONLY_ASSUMED else "flag"

    @property
    def is_copied(self):
        """True when the producer reported (IS_COPIED) that it made this memory a copy."""
        return (self.flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0

    @property
    def owner(self):
        """The object keeping the memory alive, or None when the Tensor owns its buffer."""
        return self.owner_ref

    def is_contiguous(self):
        """True when the elements are laid out in C order (always for zero-size tensors)."""
        return _is_c_contiguous(&self.dl)

    def __len__(self):
        if self.dl.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.dl.shape[0]

    def __repr__(self):
        reason = self.readonly_reason
        return (f"Tensor(shape={self.shape}, dtype={self.dtype}, "
                f"device={device_from_dl(self.dl.device)}"
                + (")" if reason is None else f", readonly={reason!r})"))

    # -- DLPack (export.pxi) ------------------------------------------------------------

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule; see SPEC section 6.1 for every rule."""
        return _export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        return _dlpack_device_tuple(self.dl.device)

    # -- copies -------------------------------------------------------------------------

    def copy(self, *, device=None):
        """A new owned, C-contiguous Tensor with the same values, on `device` (default:
        the same device)."""
        cdef DLDevice target = self.dl.device if device is None else _parse_device(device)
        return _copy_tensor(self, target)

    def to(self, device, *, copy=None, stream=None):
        """This Tensor when it already lives on `device` and copy is not True, else a copy."""
        cdef DLDevice target = _parse_device(device)
        _check_copy_arg(copy)
        same = (target.device_type == self.dl.device.device_type
                and target.device_id == self.dl.device.device_id)
        if same and copy is not True:
            return self
        if copy is False:
            raise CopyError(f"moving a tensor from {self.device} to "
                            f"{device_from_dl(target)} needs a copy, and copy=False was given")
        return _copy_tensor(self, target)

    @property
    def __cuda_array_interface__(self):
        """Version 3 of Numba's CUDA array interface, for CUDA device and managed memory."""
        if self.dl.device.device_type != kDLCUDA and self.dl.device.device_type != kDLCUDAManaged:
            raise AttributeError(f"a tensor on {self.device} has no __cuda_array_interface__")
        cdef DType dt = dtype_from_dl(self.dl.dtype)
        typestr = _TYPESTR_KINDS.get(self.dl.dtype.code)
        if typestr is None or self.dl.dtype.lanes != 1:
            raise AttributeError(f"__cuda_array_interface__ cannot describe {dt.name}")
        stream = 1   # the legacy default stream, where dlinterop works unless told otherwise
        if _cuda is not None:
            stream = _cuda.current_stream_ptr(self.dl.device.device_id) or 1
        return {
            "shape": self.shape,
            "typestr": ("|" if dt.itemsize == 1 else "<") + typestr + str(dt.itemsize),
            "data": (self.data_ptr, self.readonly),
            "version": 3,
            "strides": None if _is_c_contiguous(&self.dl) else tuple(
                [s * dt.itemsize for s in self.strides]),
            "stream": stream,
        }

    # -- buffer protocol ----------------------------------------------------------------

    def __getbuffer__(self, Py_buffer* buf, int flags):
        cdef DType dt = dtype_from_dl(self.dl.dtype)
        cdef Py_ssize_t* byte_strides = NULL
        cdef int64_t length
        cdef int i
        if not _host_accessible(self.dl.device.device_type):
            raise BufferError(f"memory on {self.device} is not host-accessible; "
                              "use .to('cpu') first")
        if dt.buffer_format == NULL:
            raise BufferError(f"the buffer protocol has no format for {dt.name}; "
                              "use DLPack (from_dlpack) to exchange it")
        if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE and self.readonly:
            raise BufferError("tensor is read-only")
        contiguous = _is_c_contiguous(&self.dl)
        if (flags & PyBUF_STRIDES) != PyBUF_STRIDES or (
                flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS:
            if not contiguous:
                raise BufferError("tensor is not C-contiguous")
        if (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS and self.dl.ndim > 1:
            raise BufferError("tensor is not Fortran-contiguous")
        if (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS and not contiguous:
            raise BufferError("tensor is not contiguous")
        if __builtin_mul_overflow(_element_count(&self.dl), dt.itemsize, &length):
            # A broadcast view can name more bytes than an address space holds.
            raise BufferError(f"a buffer of {self.size} x {dt.itemsize} bytes cannot be described")
        if self.dl.ndim > 0 and (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            byte_strides = <Py_ssize_t*>malloc(self.dl.ndim * sizeof(Py_ssize_t))
            if byte_strides == NULL:
                raise MemoryError()
            for i in range(self.dl.ndim):
                byte_strides[i] = self.dl.strides[i] * dt.itemsize
        buf.buf = <char*>self.dl.data + self.dl.byte_offset
        buf.obj = self
        buf.len = length
        buf.readonly = self.readonly
        buf.itemsize = dt.itemsize
        buf.format = <char*>dt.buffer_format if (flags & PyBUF_FORMAT) == PyBUF_FORMAT else NULL
        buf.ndim = self.dl.ndim
        buf.shape = <Py_ssize_t*>self.dl.shape if (flags & PyBUF_ND) == PyBUF_ND else NULL
        buf.strides = byte_strides
        buf.suboffsets = NULL
        buf.internal = byte_strides

    def __releasebuffer__(self, Py_buffer* buf):
        free(buf.internal)
        buf.internal = NULL

    # -- pickle -------------------------------------------------------------------------

    def __reduce_ex__(self, protocol):
        if not _host_accessible(self.dl.device.device_type):
            raise TypeError(f"a tensor on {self.device} cannot be pickled; "
                            "move it with .to('cpu') first")
        src = self if _is_c_contiguous(&self.dl) else _copy_tensor(self, self.dl.device)
        meta = (self.shape, (self.dl.dtype.code, self.dl.dtype.bits, self.dl.dtype.lanes),
                self.readonly)
        raw = _RawBytes.__new__(_RawBytes)
        (<_RawBytes>raw).tensor = src
        if protocol >= 5:
            from pickle import PickleBuffer
            # Out-of-band when the pickler has a buffer_callback: zero-copy.
            return (_rebuild_tensor, (PickleBuffer(raw),) + meta)
        return (_rebuild_tensor, (bytes(memoryview(raw)),) + meta)


@cython.final
cdef class _RawBytes:
    """The bytes of a C-contiguous host Tensor as a flat, format-less buffer: pickle's
    vehicle for every dtype, including those the buffer protocol has no format for."""
    cdef Tensor tensor

    def __getbuffer__(self, Py_buffer* buf, int flags):
        cdef Tensor t = self.tensor
        if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE and t.readonly:
            raise BufferError("tensor is read-only")
        buf.buf = <char*>t.dl.data + t.dl.byte_offset
        buf.obj = self
        buf.len = _storage_bytes(_element_count(&t.dl), t.dl.dtype)
        buf.readonly = t.readonly
        buf.itemsize = 1
        buf.format = <char*>"B" if (flags & PyBUF_FORMAT) == PyBUF_FORMAT else NULL
        buf.ndim = 1
        buf.shape = &buf.len if (flags & PyBUF_ND) == PyBUF_ND else NULL
        buf.strides = &buf.itemsize if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass


def _rebuild_tensor(data, shape, dtype_triple, readonly):
    """Unpickle: wrap the received buffer without copying when it is writable (or the
    tensor was read-only) and suitably aligned; copy otherwise."""
    cdef DType dt = dtype(tuple(dtype_triple))
    cdef Tensor t
    view = memoryview(data).cast("B")
    if view.readonly and not readonly:
        view = memoryview(bytearray(view))
    t = _tensor_from_raw_buffer(view, tuple(shape), dt)
    if readonly:
        t.flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    return t


cdef dict _TYPESTR_KINDS = {kDLBool: "b", kDLInt: "i", kDLUInt: "u", kDLFloat: "f",
                            kDLComplex: "c"}


cdef bint _is_c_contiguous(const DLTensor* dl) noexcept nogil:
    cdef int64_t expected = 1
    cdef int i
    for i in range(dl.ndim):
        if dl.shape[i] == 0:
            return True
    for i in range(dl.ndim - 1, -1, -1):
        if dl.shape[i] != 1 and dl.strides[i] != expected:
            return False
        expected *= dl.shape[i]
    return True


cdef int _check_copy_arg(object copy) except -1:
    if copy is not None and copy is not True and copy is not False:
        raise TypeError(f"copy must be True, False or None, got {copy!r}")
    return 0


# -- creation ---------------------------------------------------------------------------

cdef int _reserve_shape(Tensor t, int ndim) except -1:
    """Points t.dl.shape/strides at storage for ndim entries each."""
    if ndim > 4:
        t.shape_strides = <int64_t*>malloc(2 * ndim * sizeof(int64_t))
        if t.shape_strides == NULL:
            t.shape_strides = t.inline_storage
            raise MemoryError()
    t.dl.ndim = ndim
    if ndim > 0:
        t.dl.shape = t.shape_strides
        t.dl.strides = t.shape_strides + ndim
    else:
        t.dl.shape = NULL
        t.dl.strides = NULL
    return 0


cdef inline void _fill_c_strides(int64_t* strides, const int64_t* shape, int ndim) noexcept nogil:
    cdef int64_t step = 1
    cdef int i
    for i in range(ndim - 1, -1, -1):
        strides[i] = step
        if shape[i] > 1:
            # Unsigned: the product wraps (instead of signed-overflow UB) only for an empty
            # tensor with a 0 dim in front, whose strides address nothing.
            step = <int64_t>(<uint64_t>step * <uint64_t>shape[i])


cdef Tensor _allocate(int ndim, const int64_t* shape, DLDataType dt, DLDevice device,
                      size_t alignment, bint zero):
    cdef Tensor t = Tensor.__new__(Tensor)
    cdef int64_t count = 1
    cdef int i
    if ndim < 0 or ndim > MAX_NDIM:
        raise ValueError(f"ndim must be between 0 and {MAX_NDIM}, got {ndim}")
    for i in range(ndim):
        if shape[i] < 0:
            raise ValueError(f"negative dimension {shape[i]} in shape")
        if __builtin_mul_overflow(count, shape[i], &count):
            raise ValueError("shape is too large: its element count overflows int64")
    if count > (INT64_MAX - 7) // (dt.bits * dt.lanes):
        raise ValueError("shape is too large: its size in bytes overflows int64")
    _reserve_shape(t, ndim)
    if ndim > 0: memcpy(t.dl.shape, shape, ndim * sizeof(int64_t))  # no NULL to memcpy (UB)
    _fill_c_strides(t.dl.strides, shape, ndim)
    t.dl.dtype = dt
    t.dl.device = device
    t.dl.byte_offset = 0
    t.alloc_nbytes = <size_t>_storage_bytes(count, dt)
    if device.device_type == kDLCPU:
        if device.device_id != 0:
            raise ValueError(f"there is no device cpu:{device.device_id}; use 'cpu'")
        t.dl.data = dli_host_alloc(t.alloc_nbytes, alignment, zero, &t.alloc_base)
        if t.dl.data == NULL:
            raise MemoryError(f"cannot allocate {t.alloc_nbytes} bytes")
    else:
        t.dl.data = _device_alloc(t.alloc_nbytes, alignment, zero, device, &t.alloc_base)
    return t


cdef Tensor empty_tensor(int ndim, const int64_t* shape, DLDataType dtype, DLDevice device):
    """A new owned, C-contiguous Tensor, uninitialised, with the default alignment."""
    if not _valid_dtype_nogil(dtype):
        raise ValueError(f"unsupported data type ({dtype.code}, {dtype.bits}, {dtype.lanes})")
    return _allocate(ndim, shape, dtype, device, DEFAULT_ALIGNMENT, False)


cdef Tensor _new_from_python(object shape, object dtype_like, object device, object alignment,
                             bint zero):
    cdef DType dt = _float32 if dtype_like is None else dtype(dtype_like)
    cdef DLDevice dev
    cdef int64_t dims[MAX_NDIM]
    cdef Py_ssize_t ndim, i
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
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple([operator.index(d) for d in shape])
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    ndim = len(shape)
    if ndim > MAX_NDIM:
        raise ValueError(f"ndim must be at most {MAX_NDIM}, got {ndim}")
    for i in range(ndim):
        if not (INT64_MIN <= shape[i] <= INT64_MAX):
            raise ValueError(f"dimension {shape[i]} is out of range")
        dims[i] = shape[i]
    return _allocate(<int>ndim, dims, dt.dl, dev, <size_t>align, zero)


def empty(shape, dtype="float32", *, device="cpu", alignment=DEFAULT_ALIGNMENT):
    """A new uninitialised Tensor. Its buffer is aligned to `alignment` bytes (256 by
    default, so that consumers with alignment rules, such as XLA, take it without copying)."""
    return _new_from_python(shape, dtype, device, alignment, False)


def zeros(shape, dtype="float32", *, device="cpu", alignment=DEFAULT_ALIGNMENT):
    """A new Tensor filled with zeros."""
    return _new_from_python(shape, dtype, device, alignment, True)


cdef object _dtype_of = dtype   # dtype() under a name that full()'s dtype parameter cannot shadow


def full(shape, value, dtype=None, *, device="cpu", alignment=DEFAULT_ALIGNMENT):
    """A new Tensor filled with `value`. Without a dtype it is inferred from the value as
    PyTorch does: bool -> bool, int -> int64, float -> float32, complex -> complex64."""
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
        return _full_packed(shape, pattern[0], dt, device, alignment)
    t = _new_from_python(shape, dt, device, alignment, False)
    count = _element_count(&t.dl)
    if t.dl.device.device_type == kDLCPU:
        dli_fill(<char*>t.dl.data, pattern, len(pattern), count)
    else:
        _device_fill(t, pattern, count)
    return t


cdef Tensor _full_packed(object shape, int code, DType dt, object device, object alignment):
    """full() for packed sub-byte types: codes of dt.bits bits, little bit-endian, every
    lane the same. One period of the bit pattern is lcm(bits, 8) bits long."""
    cdef int bits = dt.dl.bits
    cdef int period_bits = bits * 8 // math.gcd(bits, 8)
    cdef int per_period = period_bits // bits
    cdef bytes period = sum(code << (i * bits) for i in range(per_period)).to_bytes(
        period_bits // 8, "little")
    cdef Tensor t = _new_from_python(shape, dt, "cpu", alignment, False)
    cdef int64_t nbytes = _storage_bytes(_element_count(&t.dl), dt.dl)
    cdef int64_t whole = nbytes // len(period)
    dli_fill(<char*>t.dl.data, period, len(period), whole)
    memcpy(<char*>t.dl.data + whole * len(period), <const char*>period, nbytes - whole * len(period))
    if device is None or device == "cpu":
        return t
    return t.copy(device=device)


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

cdef Tensor _copy_tensor(Tensor src, DLDevice target):
    cdef Tensor out
    if src.dl.device.device_type != kDLCPU or target.device_type != kDLCPU:
        return _device_copy(src, target)
    if _is_packed_subbyte(src.dl.dtype) and not _is_c_contiguous(&src.dl):
        raise BufferError("cannot copy a strided tensor of a packed sub-byte type")
    out = _allocate(src.dl.ndim, src.dl.shape, src.dl.dtype, target, DEFAULT_ALIGNMENT, False)
    if _is_packed_subbyte(src.dl.dtype):
        memcpy(out.dl.data, <char*>src.dl.data + src.dl.byte_offset, out.alloc_nbytes)
    else:
        with nogil:
            dli_copy_to_contiguous(<char*>out.dl.data, <char*>src.dl.data + src.dl.byte_offset,
                                   src.dl.ndim, src.dl.shape, src.dl.strides,
                                   (src.dl.dtype.bits * src.dl.dtype.lanes) // 8)
    return out
