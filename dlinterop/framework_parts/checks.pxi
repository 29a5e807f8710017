# Provides: the argument checks that name the argument: arg_spec and check_arg (the C
# level, dlinterop/frameworks.pxd) and check_tensor.
# Uses: nothing.

cdef ArgSpec arg_spec() noexcept nogil:
    cdef ArgSpec spec
    spec.ndim = -1
    spec.dtype_code = -1
    spec.dtype_bits = -1
    spec.device_type = -1
    spec.c_contiguous = False
    spec.writable = False
    return spec


cdef str _shape_text(const DLTensor* dl):
    return str(tuple([dl.shape[i] for i in range(dl.ndim)]))


cdef str _device_text(int device_type):
    cdef DLDevice dev
    dev.device_type = <DLDeviceType>device_type
    dev.device_id = 0
    return device_from_dl(dev).type


cdef inline bint _dtype_meets(DLDataType dt, const ArgSpec* spec) noexcept nogil:
    """The spec's dtype_code and dtype_bits each checked where not -1; a checked dtype
    is a single-lane one."""
    if spec.dtype_code < 0 and spec.dtype_bits < 0:
        return True
    return (dt.lanes == 1 and (spec.dtype_code < 0 or dt.code == spec.dtype_code)
            and (spec.dtype_bits < 0 or dt.bits == spec.dtype_bits))


cdef str _wanted_dtype_text(const ArgSpec* spec):
    """What the spec asks for: "dtype float32", "dtype (2, 8, 1)" for a triple with no
    DType, or the width or type code alone."""
    cdef DLDataType want
    if spec.dtype_code < 0:
        return f"a {spec.dtype_bits}-bit dtype"
    if spec.dtype_bits < 0:
        return f"a dtype of DLPack type code {spec.dtype_code} (any width)"
    if spec.dtype_code > 255 or spec.dtype_bits > 255:
        return f"dtype ({spec.dtype_code}, {spec.dtype_bits}, 1)"
    want.code = <uint8_t>spec.dtype_code
    want.bits = <uint8_t>spec.dtype_bits
    want.lanes = 1
    return f"dtype {dtype_text(want)}"


cdef int check_arg(const DLTensor* dl, bint readonly, const char* name,
                   const ArgSpec* spec) except -1:
    # A C caller can pass anything: every dtype and device is said by what it is, never
    # looked up as if dlinterop knew it.
    arg = "argument" if name == NULL else (<bytes>name).decode(errors="replace")
    if dl == NULL or spec == NULL:
        raise ValueError(f"{arg}: check_arg needs a DLTensor and an ArgSpec, got NULL")
    if not _dtype_meets(dl.dtype, spec):
        raise TypeError(f"{arg}: expected {_wanted_dtype_text(spec)}, got "
                        f"{dtype_text(dl.dtype)}")
    if spec.ndim >= 0 and dl.ndim != spec.ndim:
        raise ValueError(f"{arg}: expected {spec.ndim} dimension"
                         f"{'' if spec.ndim == 1 else 's'}, got {dl.ndim} (shape "
                         f"{_shape_text(dl)})")
    if spec.device_type >= 0 and <int>dl.device.device_type != spec.device_type:
        raise ValueError(f"{arg}: expected a tensor on {_device_text(spec.device_type)}, "
                         f"got one on {device_from_dl(dl.device)}")
    if spec.c_contiguous and not is_c_contiguous(dl):
        raise ValueError(f"{arg}: expected a C-contiguous tensor, got strides "
                         f"{tuple([dl.strides[i] for i in range(dl.ndim)])} (in elements) "
                         f"for shape {_shape_text(dl)}")
    if spec.writable and readonly:
        raise BufferError(f"{arg}: expected writable memory, got a read-only tensor")
    return 0


def check_tensor(x, name="argument", *, dtype=None, ndim=None, device=None,
                 c_contiguous=False, writable=False):
    """Imports `x` as dl.from_dlpack does and checks it, raising TypeError (dtype),
    ValueError (ndim, device, C-contiguity) or BufferError (writability) that name the
    argument; returns the Tensor. `device` is a device type ("cpu", "cuda") or a device
    ("cuda:1", dl.Device), which then must match exactly."""
    cdef ArgSpec spec = arg_spec()
    cdef DType dt
    cdef Device parsed
    cdef Device exact_device = None
    cdef Tensor t = x if type(x) is Tensor else tensor_from_object(x)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if dtype is not None:
        dt = _core.dtype(dtype)
        spec.dtype_code = dt.dl.code
        spec.dtype_bits = dt.dl.bits
        if dt.dl.lanes != 1:
            raise ValueError(f"check_tensor takes single-lane dtypes, got {dt.name}")
    if ndim is not None:
        spec.ndim = operator.index(ndim)
        if spec.ndim < 0:
            raise ValueError(f"ndim must be non-negative, got {ndim}")
    if device is not None:
        parsed = device if isinstance(device, Device) else _core.Device(device)
        spec.device_type = <int>parsed.dl.device_type
        if not (isinstance(device, str) and ":" not in device):
            exact_device = parsed
    spec.c_contiguous = bool(c_contiguous)
    spec.writable = bool(writable)
    check_arg(&t.dl, (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, name.encode(), &spec)
    if exact_device is not None and t.dl.device.device_id != exact_device.dl.device_id:
        raise ValueError(f"{name}: expected a tensor on {exact_device}, got one on "
                         f"{device_from_dl(t.dl.device)}")
    return t
