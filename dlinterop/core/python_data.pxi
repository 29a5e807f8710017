# Provides: Tensors from Python data: dl.arange (its common arguments' values written in C,
# src/runtime.h), and the nested sequences of numbers dl.tensor and dl.asarray take
# (_tensor_from_data), counted as they are read (len() may lie), their type inferred and
# promoted as PyTorch and NumPy promote.
# Uses: runtime.pxi, dtypes.pxi, devices.pxi (_CPU), allocator.pxi (_allocate), placement.pxi
# (_on_device), numbers.pxi (NumPy scalars and 0-d arrays), encoding.pxi (_store_values,
# _fits_int), creation.pxi (new Tensors, the inferred types, dtype arguments).

# arange writes its values in chunks of this many (a multiple of 8, so that every chunk of
# a packed sub-byte type starts on a byte): memory follows the Tensor, not a list of them all.
cdef int64_t _ARANGE_CHUNK = 1 << 16


def arange(start, stop=None, step=1, *, dtype=None, device="cpu"):
    """Evenly spaced values in [start, stop), as NumPy's arange (one argument: [0, start);
    a NumPy scalar or a 0-d array counts as the Python number it holds, as in NumPy).
    Without a dtype: int64 when start, stop and step are ints, else float32 (dl.full's rule)."""
    if stop is None:
        start, stop = 0, start
    if not (type(start) is int and type(stop) is int and type(step) is int):
        start, stop, step = _number_of(start), _number_of(stop), _number_of(step)
    cdef Tensor t = _arange_common(start, stop, step, dtype)
    if t is None:
        t = _arange_general(start, stop, step, dtype)
    return _on_device(t, device)


cdef Tensor _arange_general(object start, object stop, object step, object dtype):
    """arange's values in host memory, each a Python number encoded as dl.tensor encodes it."""
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
    return t


# The arguments arange's common path takes are ints within this bound of 0 (or floats):
# then every difference and quotient it forms is exact in a double or rounded once, as
# Python's int arithmetic and true division round them.
cdef int64_t _ARANGE_EXACT = (<int64_t>1) << 52


cdef inline bint _arange_int(object value, int64_t* out) noexcept:
    """An exact int's value within _ARANGE_EXACT of 0; False for anything else."""
    cdef int overflow = 0
    cdef long long v
    if type(value) is not int:
        return False
    v = PyLong_AsLongLongAndOverflow(<PyObject*>value, &overflow)
    if overflow or not (-_ARANGE_EXACT <= v <= _ARANGE_EXACT):
        return False
    out[0] = v
    return True


cdef inline bint _arange_real(object value, double* out) noexcept:
    """A float's value, or a bounded int's (exact as a double); False for anything else."""
    cdef int64_t v
    if type(value) is float:
        out[0] = PyFloat_AS_DOUBLE(value)
        return True
    if _arange_int(value, &v):
        out[0] = <double>v
        return True
    return False


cdef Tensor _arange_common(object start, object stop, object step, object dtype_like):
    """arange's values written in C, for its common arguments: ints (into an integer type of
    8 to 64 bits, float32 or float64), or a float step (into float32 or float64); the same
    values and the same count as _arange_general's. None for every other case, which
    _arange_general makes or refuses."""
    cdef int64_t a, b, s, count, last
    cdef double da, db, ds, q, first_value, last_value
    cdef bint ints = _arange_int(start, &a) and _arange_int(stop, &b) and _arange_int(step, &s)
    cdef DType dt
    cdef Tensor t
    cdef int64_t dims[1]
    cdef uint8_t code
    cdef int bits
    if ints:
        if s == 0:
            return None
        q = <double>(b - a) / <double>s
    elif type(step) is float and _arange_real(start, &da) and _arange_real(stop, &db):
        ds = PyFloat_AS_DOUBLE(step)
        if ds == 0.0:
            return None
        q = (db - da) / ds
    else:
        return None
    if not (q <= <double>(<int64_t>1 << 62)):    # NaN, infinity, a count no memory holds
        return None
    count = <int64_t>ceil(q) if q > 0 else 0
    if dtype_like is None:
        dt = _INFERRED_DTYPES[1] if ints else _INFERRED_DTYPES[2]
    else:
        dt = _dtype_arg(dtype_like)
    code = dt.dl.code
    bits = dt.dl.bits
    if dt.dl.lanes != 1 or not (code == kDLFloat and (bits == 32 or bits == 64) or (
            ints and (code == kDLInt or code == kDLUInt) and bits >= 8)):
        return None
    if ints:
        last = a + (count - 1) * s if count else a
        if code != kDLFloat and not (_fits_int(min(a, last), code, bits)
                                     and _fits_int(max(a, last), code, bits)):
            return None     # refused with _arange_general's message
    else:
        first_value = da
        last_value = da + <double>(count - 1) * ds if count else da
        if bits == 32 and not (-FLT_MAX <= first_value <= FLT_MAX
                               and -FLT_MAX <= last_value <= FLT_MAX):
            return None     # past float32's range: _arange_general's rule
    dims[0] = count
    t = _allocate(1, dims, dt.dl, _CPU, DEFAULT_ALIGNMENT, False)
    if ints:
        dli_arange_int(t.dl.data, code, bits, a, s, count)
    else:
        dli_arange_double(t.dl.data, bits, da, ds, count)
    return t


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
    scalar or a 0-d array its own type (as torch.tensor reads np.float64 or np.bool_)."""
    cls = type(value)
    if cls is float:
        return _INFERRED_DTYPES[2]
    if cls is Tensor and (<Tensor>value).dl.ndim == 0:   # a 0-d array: its own type
        return dtype_from_dl((<Tensor>value).dl.dtype)
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
    here: len() may lie, and a sequence may change while it is read. An array of no axis is
    a number of its own type: NumPy's appended as its NumPy scalar, another as a 0-d Tensor
    (then 1 is returned, else 0)."""
    cdef int found = 0
    if isinstance(data, (list, tuple, range)):
        if depth == MAX_NDIM:
            refuse_ndim(depth + 1, ValueError)
        items = [item for item in data]   # one snapshot: no length hint, no second pass
        if depth == len(shape):
            if flat:
                raise ValueError(_ragged(depth, None, len(items)))
            shape.append(len(items))
        elif shape[depth] != len(items):
            raise ValueError(_ragged(depth, shape[depth], len(items)))
        for item in items:
            found |= _count_into(item, flat, shape, depth + 1)
        return found
    if isinstance(data, (str, bytes, bytearray)):
        raise TypeError(f"a tensor holds numbers, not {type(data).__name__}")
    if depth != len(shape):
        raise ValueError(_ragged(depth, shape[depth] if depth < len(shape) else None, None))
    if type(data) is not float and type(data) is not int and not _is_python_number(data):
        scalar = _numpy_scalar_of(data)
        if scalar is not None:
            data = scalar
        else:
            zero_d = _zero_d(data)
            if zero_d is not None:
                data = zero_d
                found = 1
    flat.append(data)
    return found


cdef str _ragged(int depth, object expected, object found):
    return (f"the data is not rectangular: at depth {depth} it holds {_held(found)} where "
            f"another part holds {_held(expected)}")


cdef str _held(object extent):
    return "a number" if extent is None else f"a sequence of {extent}"


cdef Tensor _tensor_from_data(object data, object dtype_like, object device):
    """A new Tensor holding Python data (a number, or nested lists, tuples or ranges of
    numbers, NumPy scalars and arrays of no axis among them)."""
    cdef list flat = []
    cdef list shape = []
    cdef bint arrays = _count_into(data, flat, shape, 0)
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
    if arrays:
        flat = [_scalar_of(<Tensor>v) if type(v) is Tensor else v for v in flat]
    cdef Tensor t = _new_from_python(tuple(shape), dt, "cpu", DEFAULT_ALIGNMENT, False, False)
    if flat:
        _store_values(t, flat, 0)
    return _on_device(t, device)
