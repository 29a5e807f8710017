# Provides: values as elements of every data type, by the rules for Python values (NumPy
# 2's: a value a type cannot hold is an OverflowError, a real one truncated into an integer
# type): one element written in C for the common cases (_encode_common), else through the
# struct module and dlinterop._lib.minifloat (_encode_scalar, _encode_values; a sub-byte
# type's codes one per byte), and a list of values written into a host Tensor, packed
# where the type is (_store_values).
# Uses: runtime.pxi, dtypes.pxi.


cdef inline bint _float_of(object value, double* out) noexcept:
    """The value float(value) gives, for an exact float, bool, or int small enough to read
    without a call; False for any other object."""
    cdef long small
    if type(value) is float:
        out[0] = PyFloat_AS_DOUBLE(value)
        return True
    if dli_small_long(<PyObject*>value, &small):
        out[0] = <double>small
        return True
    if type(value) is bool:
        out[0] = 1.0 if value is True else 0.0
        return True
    return False


cdef inline bint _fits_int(int64_t value, uint8_t code, int bits) noexcept:
    """Whether value is in the range of the integer type (code kDLInt or kDLUInt, bits)."""
    if code == kDLUInt:
        return value >= 0 and (bits == 64 or value < (<int64_t>1 << bits))
    return bits == 64 or -(<int64_t>1 << (bits - 1)) <= value < (<int64_t>1 << (bits - 1))


cdef bint _encode_common(DType dt, object value, char* out) noexcept:
    """The element _encode_scalar makes, written to `out` without a call, for the common
    cases: an exact bool, int or float as bool, an integer type of 8 to 64 bits, float32,
    float64, complex64 or complex128. False, with nothing written, in every other case: a
    value that needs a conversion, is NaN or does not fit the type; _encode_scalar encodes
    those, or refuses them with its message."""
    cdef uint8_t code = dt.dl.code
    cdef int bits = dt.dl.bits
    cdef double d
    cdef float f
    cdef long long i
    cdef int overflow = 0
    if dt.dl.lanes != 1 or _is_packed_subbyte(dt.dl):
        return False
    if code == kDLBool:
        if not _float_of(value, &d):
            return False
        out[0] = 1 if d != 0.0 else 0        # bool(value): NaN is true
        return True
    if code == kDLInt or code == kDLUInt:
        # Ints and bools only: _integral truncates a float, and refuses NaN and infinity.
        if type(value) is bool:
            i = 1 if value is True else 0
        elif type(value) is int:
            i = PyLong_AsLongLongAndOverflow(<PyObject*>value, &overflow)
            if overflow:
                return False
        else:
            return False
        if not _fits_int(i, code, bits):
            return False
        if bits == 8:
            (<int8_t*>out)[0] = <int8_t>i
        elif bits == 16:
            (<int16_t*>out)[0] = <int16_t>i
        elif bits == 32:
            (<int32_t*>out)[0] = <int32_t>i
        else:
            (<int64_t*>out)[0] = i
        return True
    if code != kDLFloat and code != kDLComplex:
        return False
    if not _float_of(value, &d) or d != d:
        return False
    if code == kDLComplex:
        memset(out, 0, dt.itemsize)    # both parts: a real value's imaginary part is +0.0
        bits //= 2
    if bits == 64:
        memcpy(out, &d, 8)
        return True
    if bits != 32 or not (-FLT_MAX <= d <= FLT_MAX):
        return False        # float16, or past float32's range: _pack_float's rule
    f = <float>d            # rounded to nearest, as struct rounds
    memcpy(out, &f, 4)
    return True


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
        first_byte = storage_bytes(start, dt.dl)   # what the elements before it take
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
