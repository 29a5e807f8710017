# Provides: Tensor.__array__, NumPy 2's array protocol: an ndarray sharing the Tensor's
# memory for every data type NumPy holds (bfloat16 and the small floats through ml_dtypes;
# the packed sub-byte types as an unpacked copy, one element per byte as ml_dtypes holds
# them), a clear TypeError for the others, never an array of objects; contiguous(); the
# values as Python objects (tolist, item, float(t) ..., read in C by values.pxi, else by
# dlinterop._lib.values), their element-wise comparisons (==, !=, <, <=, >, >=, in) and their
# text in repr.
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, cuda.pxi (the host hint),
# copies.pxi, encoding.pxi (_store_values), creation.pxi (bool results), bridge.pxi
# (asarray), pickling.pxi (_RawBytes), views.pxi, indexing.pxi, values.pxi.

_CARRIERS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


cdef object _numpy_array_of(Tensor t, object dtype, object copy):
    """What np.asarray(t, dtype=dtype, copy=copy) gets. NumPy asks the buffer protocol
    first, so this serves the types the buffer protocol has no format for: the bytes are
    read as unsigned ints of the same size, then viewed as NumPy's own type for them."""
    import numpy as np
    if not dli_device_host_readable(t.dl.device.device_type):
        raise TypeError(f"a tensor on {_device_of(t)} cannot be a NumPy array (NumPy holds host "
                        f"memory); {_host_hint(t.dl.device)}")
    cdef DType dt = dtype_from_dl(t.dl.dtype)
    np_dtype = dt.to_numpy()          # TypeError where neither NumPy nor ml_dtypes has it
    if _is_packed_subbyte(t.dl.dtype):
        array = _unpacked_array(t, np_dtype, copy)
        return array if dtype is None or np.dtype(dtype) == array.dtype else array.astype(dtype)
    if np_dtype.itemsize != dt.itemsize:
        raise TypeError(f"NumPy's {np_dtype} takes {np_dtype.itemsize} bytes, {dt.name} "
                        f"{dt.itemsize}: it cannot view them")
    if dt.buffer_format != NULL:
        array = np.asarray(memoryview(t))
    else:
        carrier = _CARRIERS.get(dt.itemsize)
        if carrier is None:
            raise TypeError(f"NumPy cannot view {dt.name} elements of {dt.itemsize} bytes")
        array = np.asarray(memoryview(_as_dtype(t, _dtype_by_name[carrier]))).view(np_dtype)
    if dtype is not None and np.dtype(dtype) != array.dtype:
        if copy is False:
            raise ValueError(f"a {dt.name} tensor cannot be a {np.dtype(dtype)} array without "
                             "a copy (copy=False)")
        return array.astype(dtype)
    return array.copy() if copy else array


cdef object _unpacked_array(Tensor t, object np_dtype, object copy):
    """A new NumPy array of an ml_dtypes sub-byte type holding t's packed values one per
    byte, as ml_dtypes holds them: NumPy cannot view packed data, so this is always a copy,
    and copy=False refuses it (ValueError, as NumPy's own __array__ rule says)."""
    import numpy as np
    if copy is False:
        raise ValueError(f"{dtype_text(t.dl.dtype)} elements are packed "
                         f"{t.dl.dtype.bits} bits each, and NumPy's {np_dtype} holds one per "
                         "byte: the array is a copy, which copy=False forbids")
    cdef Tensor src = _contiguous(t)
    array = np.empty(_shape_of(src), dtype=np.uint8)
    cdef uintptr_t address = array.ctypes.data
    cdef int64_t count = element_count(&src.dl)
    with nogil:
        dli_unpack_codes(<uint8_t*>address, <const uint8_t*>src.dl.data + src.dl.byte_offset,
                         count, src.dl.dtype.bits)
    return array.view(np_dtype)


cdef Tensor _contiguous(Tensor t):
    """t when it is C-contiguous, else a C-contiguous copy on the same device."""
    if is_c_contiguous(&t.dl):
        return t
    return _copy_tensor(t, t.dl.device)


cdef object _values_of(Tensor t):
    """t's values as nested lists (a scalar when 0-d): read in host memory, in C order."""
    return _read_values(t, False)


cdef object _read_values(Tensor t, bint flat):
    """t's values, read in host memory in C order: nested lists (a scalar when 0-d), or
    with `flat` one list of them. Read in C where the type has a reader (values.pxi), over
    t's own strides; else, or when the element count overflows int64, through a C-order
    copy by dlinterop._lib.values."""
    if not dli_device_host_readable(t.dl.device.device_type):
        t = _copy_tensor(t, _CPU)
    cdef dli_reader reader
    cdef int64_t count
    if _value_reader(t.dl.dtype, &reader) and _count_fits(t, &count):
        return _read_flat(&reader, t, count) if flat else _read_nested(&reader, t)
    cdef Tensor src = _contiguous(t)
    cdef bytes codes
    from dlinterop._lib import values as _values
    if _is_packed_subbyte(src.dl.dtype):
        # One code per byte, unpacked here in C: reading packed bits in Python is slow.
        count = element_count(&src.dl)
        codes = PyBytes_FromStringAndSize(NULL, count)
        dli_unpack_codes(<uint8_t*>PyBytes_AS_STRING(codes),
                         <const uint8_t*>src.dl.data + src.dl.byte_offset, count,
                         src.dl.dtype.bits)
        raw = memoryview(codes)
    else:
        raw = _RawBytes.__new__(_RawBytes)
        (<_RawBytes>raw).tensor = src
        raw = memoryview(raw).cast("B")
    return _values.flat(src, raw) if flat else _values.values(src, raw)


cdef object _compare(Tensor t, object other, int op):
    """t OP other (op: Python's rich comparison code, Py_LT to Py_GE), element by element as
    NumPy and PyTorch compare arrays: a new bool Tensor of the broadcast shape. `other` is a
    dl.Tensor, a number, or anything dl.asarray takes; NotImplemented for anything else
    (Python then compares identities for == and !=, and refuses the order). Values compare
    as Python numbers (1 == 1.0; NaN equals nothing and has no order), complex ones in
    NumPy's order (real parts, then imaginary ones)."""
    cdef Tensor u
    cls = type(other)
    if cls is int or cls is float or cls is bool or cls is complex:
        values, other_shape = [other], ()     # as it is: 2**70 has no int64, NumPy 2 compares it
    else:
        if cls is Tensor:
            u = <Tensor>other
        else:
            try:
                u = asarray(other)
            except (TypeError, ValueError, BufferError):
                return NotImplemented
        values, other_shape = _read_values(u, True), _shape_of(u)
    from dlinterop._lib import values as _values
    result, shape = _values.compare(_read_values(t, True), _shape_of(t), values, other_shape, op)
    cdef Tensor out = _new_from_python(shape, bool_, "cpu", DEFAULT_ALIGNMENT, False, False)
    if result:
        _store_values(out, result, 0)
    return out


cdef object _one_value(Tensor t, str what):
    """The value of a one-element Tensor (float(t), int(t), t.item(), ...)."""
    cdef dli_reader reader
    if element_count(&t.dl) != 1:
        raise TypeError(f"only a tensor of one element can be converted to {what}; this one "
                        f"has shape {_shape_of(t)}") if what != "a bool" else ValueError(
            f"the truth value of a tensor of shape {_shape_of(t)} is ambiguous (it holds "
            f"{element_count(&t.dl)} elements)")
    if dli_device_host_readable(t.dl.device.device_type) and _value_reader(t.dl.dtype, &reader):
        return _read_one(&reader, t)   # the only element: every index 0, at byte_offset
    value = _values_of(t)
    while type(value) is list:
        value = value[0]
    return value


# One element's value, read as a number in C (values.pxi), else by _one_value.

cdef object _item_value(Tensor t):
    """t.item()."""
    cdef dli_scalar x
    cdef dli_scalar_kind kind = _read_scalar(t, &x)
    if kind != DLI_SCALAR_NONE:
        return dli_scalar_object(kind, &x)
    return _one_value(t, "a Python scalar")


cdef object _index_value(Tensor t):
    """operator.index(t), once t's type is checked to be an integer type."""
    if (element_count(&t.dl) == 1 and dli_device_host_readable(t.dl.device.device_type)
            and t.dl.dtype.lanes == 1):
        return _read_index(t)
    return _one_value(t, "an index")


cdef object _float_value(Tensor t):
    """float(t)."""
    cdef dli_scalar x
    cdef dli_scalar_kind kind = _read_scalar(t, &x)
    if kind == DLI_SCALAR_REAL:
        return x.real
    if kind == DLI_SCALAR_INT or kind == DLI_SCALAR_BOOL:
        return <double>x.integer   # as float(int): exact, or rounded to the nearest even
    if kind == DLI_SCALAR_UINT:
        return <double>x.unsigned_integer
    return float(_one_value(t, "a float"))


cdef object _int_value(Tensor t):
    """int(t): a float value truncated as int(x) truncates a float (with its ValueError for
    NaN and OverflowError for the infinities)."""
    cdef dli_scalar x
    cdef dli_scalar_kind kind = _read_scalar(t, &x)
    if kind == DLI_SCALAR_REAL:
        return PyLong_FromDouble(x.real)
    if kind == DLI_SCALAR_INT or kind == DLI_SCALAR_BOOL:
        return x.integer
    if kind == DLI_SCALAR_UINT:
        return x.unsigned_integer
    return int(_one_value(t, "an int"))


cdef object _complex_value(Tensor t):
    """complex(t)."""
    cdef dli_scalar x
    cdef dli_scalar_kind kind = _read_scalar(t, &x)
    if kind == DLI_SCALAR_COMPLEX:
        return PyComplex_FromDoubles(x.real, x.imag)
    if kind == DLI_SCALAR_REAL:
        return PyComplex_FromDoubles(x.real, 0.0)
    if kind == DLI_SCALAR_INT or kind == DLI_SCALAR_BOOL:
        return PyComplex_FromDoubles(<double>x.integer, 0.0)
    if kind == DLI_SCALAR_UINT:
        return PyComplex_FromDoubles(<double>x.unsigned_integer, 0.0)
    return complex(_one_value(t, "a complex"))


cdef bint _bool_value(Tensor t) except -1:
    """bool(t): as bool() of the value (NaN is true, -0.0 false)."""
    cdef dli_scalar x
    cdef dli_scalar_kind kind = _read_scalar(t, &x)
    if kind == DLI_SCALAR_REAL:
        return x.real != 0
    if kind == DLI_SCALAR_INT or kind == DLI_SCALAR_BOOL:
        return x.integer != 0
    if kind == DLI_SCALAR_UINT:
        return x.unsigned_integer != 0
    if kind == DLI_SCALAR_COMPLEX:
        return x.real != 0 or x.imag != 0
    return bool(_one_value(t, "a bool"))


# repr: values for host Tensors; past this many elements, each axis longer than twice
# _REPR_EDGE shows its first and last _REPR_EDGE entries around "...", as NumPy and torch do.
_REPR_THRESHOLD = 1000
_REPR_EDGE = 3


cdef object _values_text(Tensor t, int indent):
    """t's values as text for repr, each with the digits its type needs (float32's 1e-08,
    not float64's 9.99999993922529e-09, as NumPy prints them), or None where they cannot
    be read here (device memory). A tensor with no element shows [] whatever its shape:
    the cost follows the elements, never an extent that holds none."""
    if not dli_device_host_readable(t.dl.device.device_type):
        return None
    for i in range(t.dl.ndim):
        if t.dl.shape[i] == 0:
            return "[]"
    from dlinterop._lib import values as _values
    text = _values.formatter(dtype_from_dl(t.dl.dtype))
    try:
        # In Python ints: a broadcast view can name more elements than an int64 counts.
        return _axis_text(t, math.prod(_shape_of(t)) > _REPR_THRESHOLD, indent, text)
    except (BufferError, TypeError, ValueError, MemoryError, OverflowError):
        return None


cdef str _axis_text(Tensor t, bint summarise, int indent, object text):
    if t.dl.ndim == 0:
        return text(_values_of(t))
    cdef int64_t n = t.dl.shape[0]
    cut = summarise and n > 2 * _REPR_EDGE
    if t.dl.ndim == 1:
        if not cut:
            return "[" + ", ".join([text(v) for v in _values_of(t)]) + "]"
        head = _values_of(_getitem(t, slice(0, _REPR_EDGE)))
        tail = _values_of(_getitem(t, slice(n - _REPR_EDGE, n)))
        return "[" + ", ".join([text(v) for v in head] + ["..."] + [text(v) for v in tail]) + "]"
    rows = list(range(_REPR_EDGE)) + [None] + list(range(n - _REPR_EDGE, n)) if cut \
        else list(range(n))
    parts = ["..." if i is None else _axis_text(_getitem(t, i), summarise, indent + 1, text)
             for i in rows]
    separator = "," + "\n" * (t.dl.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(parts) + "]"
