# Provides: what is taken as a number where values are (dl.tensor, dl.full, dl.arange,
# assignment), beside Python's own numbers: NumPy scalars (_is_numpy_scalar; _unboxed: the
# Python number one holds) and arrays of no axis (_numpy_scalar_of: a NumPy 0-d array's
# scalar; _zero_d: a 0-d PyTorch tensor, a 0-d Tensor, anything DLPack exports with no axis,
# as a 0-d Tensor of its own type; _number_of: the Python number any of them holds).
# Uses: dtypes.pxi, devices.pxi (_CPU), copies.pxi, values.pxi, casts.pxi (_cast_copy),
# importer.pxi (_from_dlpack).


cdef inline bint _is_python_number(object value) noexcept:
    cls = type(value)
    return cls is float or cls is int or cls is bool or cls is complex


cdef inline bint _is_numpy_scalar(object value) except -1:
    """value is a NumPy scalar (ml_dtypes' too); NumPy is never imported to ask."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


cdef object _unboxed(object value):
    """The Python number a NumPy scalar (ml_dtypes' too) holds, as NumPy 2 reads one where
    it takes a Python value; anything else as it is."""
    if _is_python_number(value):
        return value
    if _is_numpy_scalar(value):
        return value.item()
    return value


cdef object _numpy_scalar_of(object value):
    """The NumPy scalar a NumPy 0-d array holds (its own type kept: ml_dtypes' types too,
    which NumPy's DLPack export refuses), or None for anything else."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and type(value) is numpy.ndarray and value.ndim == 0:
        return value[()]
    return None


cdef Tensor _zero_d(object value):
    """value as a 0-d Tensor of its own type when it is an array of no axis (a 0-d Tensor
    itself, a NumPy 0-d array, a 0-d PyTorch tensor, anything whose __dlpack__ exports no
    axis), else None. Never raises for what is no such array: its shape is asked first,
    so that no other array is imported."""
    cdef Tensor t
    if type(value) is Tensor:
        t = <Tensor>value
    elif _is_python_number(value) or not hasattr(type(value), "__dlpack__"):
        return None
    else:
        try:
            if tuple(value.shape) != ():
                return None
            t = _from_dlpack(value, None, None, None)
        except Exception:
            return None
    return t if t.dl.ndim == 0 else None


cdef object _scalar_of(Tensor t):
    """The Python number a 0-d Tensor holds (read on the host)."""
    cdef dli_scalar x
    cdef dli_scalar_kind kind
    if t.dl.dtype.lanes != 1:
        raise TypeError(f"an element of the vector type {dtype_from_dl(t.dl.dtype).name} is "
                        "no number")
    if not dli_device_host_readable(t.dl.device.device_type):
        t = _copy_tensor(t, _CPU)
    kind = _read_scalar(t, &x)
    if kind == DLI_SCALAR_NONE:
        # A small float format whose table is not filled: read through a cast, which
        # fills it or reads a private one.
        kind = _read_scalar(_cast_copy(t, float64), &x)
    return dli_scalar_object(kind, &x)


cdef object _number_of(object value):
    """The Python number value is or holds: a NumPy scalar's, a 0-d array's; anything else
    as it is (a Fraction, a Decimal: their readers convert them)."""
    cdef Tensor t
    value = _unboxed(value)
    if _is_python_number(value):
        return value
    scalar = _numpy_scalar_of(value)
    if scalar is not None:
        return scalar.item()
    t = _zero_d(value)
    return value if t is None else _scalar_of(t)
