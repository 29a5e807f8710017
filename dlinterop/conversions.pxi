# Provides: Tensor.__array__, NumPy 2's array protocol: an ndarray sharing the Tensor's
# memory for every data type NumPy holds (bfloat16 and the small floats through ml_dtypes),
# a clear TypeError for the others, never an array of objects.
# Uses: dtypes.pxi, devices.pxi, views.pxi.

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
