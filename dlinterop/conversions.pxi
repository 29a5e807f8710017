# Provides: Tensor.__array__, NumPy 2's array protocol: an ndarray sharing the Tensor's
# memory for every data type NumPy holds (bfloat16 and the small floats through ml_dtypes),
# a clear TypeError for the others, never an array of objects; contiguous(); the values as
# Python objects (tolist, item, float(t) ..., read by dlinterop._values).
# Uses: dtypes.pxi, devices.pxi, copies.pxi, views.pxi, pickling.pxi (_RawBytes).

_CARRIERS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


cdef object _numpy_array_of(Tensor t, object dtype, object copy):
    """What np.asarray(t, dtype=dtype, copy=copy) gets. NumPy asks the buffer protocol
    first, so this serves the types the buffer protocol has no format for: the bytes are
    read as unsigned ints of the same size, then viewed as NumPy's own type for them."""
    import numpy as np
    if not host_accessible(t.dl.device.device_type):
        raise TypeError(f"a tensor on {t.device} cannot be a NumPy array (NumPy holds host "
                        "memory); move it with .to('cpu') first")
    cdef DType dt = dtype_from_dl(t.dl.dtype)
    np_dtype = dt.to_numpy()          # TypeError where neither NumPy nor ml_dtypes has it
    if (t.dl.dtype.bits * t.dl.dtype.lanes) % 8 or np_dtype.itemsize != dt.itemsize:
        raise TypeError(f"{dt.name} elements are packed {t.dl.dtype.bits * t.dl.dtype.lanes} "
                        f"bits each; NumPy's {np_dtype} takes a byte each, so it cannot view "
                        "them (unpack them with a framework that knows the type)")
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


cdef Tensor _contiguous(Tensor t):
    """t when it is C-contiguous, else a C-contiguous copy on the same device."""
    if is_c_contiguous(&t.dl):
        return t
    return _copy_tensor(t, t.dl.device)


cdef object _values_of(Tensor t):
    """t's values as nested lists (a scalar when 0-d): read in host memory, in C order."""
    if not host_accessible(t.dl.device.device_type):
        t = _copy_tensor(t, _CPU)
    cdef Tensor src = _contiguous(t)
    raw = _RawBytes.__new__(_RawBytes)
    (<_RawBytes>raw).tensor = src
    from dlinterop import _values
    return _values.values(src, memoryview(raw).cast("B"))


cdef object _one_value(Tensor t, str what):
    """The value of a one-element Tensor (float(t), int(t), t.item(), ...)."""
    if element_count(&t.dl) != 1:
        raise TypeError(f"only a tensor of one element can be converted to {what}; this one "
                        f"has shape {t.shape}") if what != "a bool" else ValueError(
            f"the truth value of a tensor of shape {t.shape} is ambiguous (it holds "
            f"{element_count(&t.dl)} elements)")
    value = _values_of(t)
    while type(value) is list:
        value = value[0]
    return value


# repr: values for host Tensors; past this many elements, each axis longer than twice
# _REPR_EDGE shows its first and last _REPR_EDGE entries around "...", as NumPy and torch do.
_REPR_THRESHOLD = 1000
_REPR_EDGE = 3


cdef object _values_text(Tensor t, int indent):
    """t's values as text for repr, or None where they cannot be read here (device
    memory; a strided view of packed sub-byte elements)."""
    if not host_accessible(t.dl.device.device_type):
        return None
    try:
        # In Python ints: a broadcast view can name more elements than an int64 counts.
        return _axis_text(t, math.prod(t.shape) > _REPR_THRESHOLD, indent)
    except (BufferError, TypeError, ValueError, MemoryError, OverflowError):
        return None


cdef str _axis_text(Tensor t, bint summarise, int indent):
    if t.dl.ndim == 0:
        return repr(_values_of(t))
    cdef int64_t n = t.dl.shape[0]
    cut = summarise and n > 2 * _REPR_EDGE
    if t.dl.ndim == 1:
        if not cut:
            return repr(_values_of(t))
        head = _values_of(_getitem(t, slice(0, _REPR_EDGE)))
        tail = _values_of(_getitem(t, slice(n - _REPR_EDGE, n)))
        return "[" + ", ".join([repr(v) for v in head] + ["..."] + [repr(v) for v in tail]) + "]"
    rows = list(range(_REPR_EDGE)) + [None] + list(range(n - _REPR_EDGE, n)) if cut \
        else list(range(n))
    parts = ["..." if i is None else _axis_text(_getitem(t, i), summarise, indent + 1)
             for i in rows]
    separator = "," + "\n" * (t.dl.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(parts) + "]"
