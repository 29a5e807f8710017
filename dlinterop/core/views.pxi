# Provides: views of a Tensor, metadata only (transpose, squeeze/unsqueeze, another dtype
# over the same bytes), each holding the root memory owner, read-only when its source is;
# the checked view builder that reshape.pxi and indexing.pxi use (_view_with: packed
# sub-byte elements kept addressable) and the exact-int reader they share (_exact_int).
# Each layout has a C path for the common arguments (exact ints, tuples of them), and the
# general one for the rest and for every refusal, so that both give the same views and the
# same errors.
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi.

cdef inline bint _exact_int(PyObject* o, int64_t* out) noexcept:
    """o's value when o is an exact int (not a bool, not a subclass) that fits int64."""
    cdef long small
    cdef int overflow = 0
    cdef long long value
    if dli_small_long(o, &small):
        out[0] = small
        return True
    if not PyLong_CheckExact(o):
        return False
    value = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow or (value == -1 and PyErr_Occurred() != NULL):
        PyErr_Clear()
        return False
    out[0] = value
    return True


cdef Tensor _view_with(Tensor src, int ndim, int64_t* shape, int64_t* strides,
                       int64_t byte_offset, DLDataType dtype):
    """_layout_view, after checking that packed sub-byte elements stay addressable."""
    cdef int i
    cdef int64_t bits = <int64_t>dtype.bits * dtype.lanes
    if _is_packed_subbyte(dtype) and element_count_of(ndim, shape) > 0:
        # Sub-byte elements are packed: a view must keep each row's elements packed (its
        # last axis contiguous) and on a byte boundary, or no consumer could address it.
        for i in range(ndim - 1):
            if shape[i] > 1 and (strides[i] * bits) % 8:
                raise ValueError(f"a view of {dtype_text(dtype)} elements must keep "
                                 "every row on a byte boundary")
        if ndim > 0 and shape[ndim - 1] > 1 and strides[ndim - 1] != 1:
            raise ValueError(f"a view of {dtype_text(dtype)} elements must keep the "
                             "last axis contiguous (they are packed)")
    return _layout_view(src, ndim, shape, strides, byte_offset, dtype)


cdef Tensor _permuted(Tensor src, object axes):
    """src with its axes in the order `axes` (a permutation; negative axes count from the
    end); None reverses them."""
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int order[MAX_NDIM]
    cdef int ndim = src.dl.ndim, i
    cdef int64_t axis
    cdef uint64_t seen = 0
    cdef bint fast = axes is None
    if axes is None:
        for i in range(ndim):
            order[i] = ndim - 1 - i
    elif PyTuple_CheckExact(<PyObject*>axes) and PyTuple_GET_SIZE(axes) == ndim:
        # C path: a tuple of exact ints that is a permutation
        fast = True
        for i in range(ndim):
            if not _exact_int(PyTuple_GET_ITEM(axes, i), &axis) or not -ndim <= axis < ndim:
                fast = False
                break
            if axis < 0:
                axis += ndim
            if seen & ((<uint64_t>1) << axis):
                fast = False
                break
            seen |= (<uint64_t>1) << axis
            order[i] = <int>axis
    if not fast:
        listed = [_normalized_axis(a, ndim) for a in axes]
        if sorted(listed) != list(range(ndim)):
            given = tuple([operator.index(a) for a in axes])
            raise ValueError(f"axes {given} are not a permutation of a tensor's "
                             f"{ndim} axes")
        for i in range(ndim):
            order[i] = listed[i]
    for i in range(ndim):
        shape[i] = src.dl.shape[order[i]]
        strides[i] = src.dl.strides[order[i]]
    return _view_with(src, ndim, shape, strides, src.dl.byte_offset, src.dl.dtype)


cdef int _normalized_axis(object axis, int ndim) except -1:
    cdef int64_t value
    if _exact_int(<PyObject*>axis, &value) and -ndim <= value < ndim:
        return <int>(value + ndim if value < 0 else value)
    if isinstance(axis, bool) or not hasattr(type(axis), "__index__"):
        raise TypeError(f"an axis is an int, not {type(axis).__name__}")
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise IndexError(f"axis {a} is out of bounds for a tensor of {ndim} dimensions")
    return a + ndim if a < 0 else a


cdef Tensor _squeezed(Tensor src, object axis):
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int ndim = 0, i
    cdef int64_t one
    cdef uint64_t drop_mask = 0
    if axis is None:
        for i in range(src.dl.ndim):
            if src.dl.shape[i] == 1:
                drop_mask |= (<uint64_t>1) << i
    elif _exact_int(<PyObject*>axis, &one) and -src.dl.ndim <= one < src.dl.ndim and \
            src.dl.shape[one + src.dl.ndim if one < 0 else one] == 1:
        drop_mask = (<uint64_t>1) << (one + src.dl.ndim if one < 0 else one)
    else:
        axes = axis if isinstance(axis, tuple) else (axis,)
        drop = {_normalized_axis(a, src.dl.ndim) for a in axes}
        for i in drop:
            if src.dl.shape[i] != 1:
                raise ValueError(f"axis {i} has size {src.dl.shape[i]}: only axes of size 1 "
                                 "can be squeezed")
            drop_mask |= (<uint64_t>1) << i
    for i in range(src.dl.ndim):
        if not drop_mask & ((<uint64_t>1) << i):
            shape[ndim] = src.dl.shape[i]
            strides[ndim] = src.dl.strides[i]
            ndim += 1
    return _view_with(src, ndim, shape, strides, src.dl.byte_offset, src.dl.dtype)


cdef Tensor _unsqueezed(Tensor src, object axis):
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int ndim = src.dl.ndim + 1, at, i, j = 0
    if ndim > MAX_NDIM:
        refuse_ndim(ndim, ValueError)
    at = _normalized_axis(axis, ndim)
    for i in range(ndim):
        if i == at:
            shape[i] = 1
            strides[i] = 0
        else:
            shape[i] = src.dl.shape[j]
            strides[i] = src.dl.strides[j]
            j += 1
    return _view_with(src, ndim, shape, strides, src.dl.byte_offset, src.dl.dtype)


cdef Tensor _as_dtype(Tensor src, DType dt):
    """src's bytes as elements of `dt`: the same shape where the item sizes match; else the
    last axis (contiguous) holds more or fewer elements, as NumPy's view(dtype)."""
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int ndim = src.dl.ndim, i
    cdef int64_t old_bits = <int64_t>src.dl.dtype.bits * src.dl.dtype.lanes
    cdef int64_t new_bits = <int64_t>dt.dl.bits * dt.dl.lanes
    for i in range(ndim):
        shape[i] = src.dl.shape[i]
        strides[i] = src.dl.strides[i]
    if old_bits == new_bits:
        return _view_with(src, ndim, shape, strides, src.dl.byte_offset, dt.dl)
    name = dtype_text(src.dl.dtype)
    if _is_packed_subbyte(src.dl.dtype) or _is_packed_subbyte(dt.dl):
        raise ValueError(f"a view of {name} as {dt.name} would split or join sub-byte "
                         "elements")
    if ndim == 0:
        raise ValueError(f"a 0-d {name} tensor cannot be viewed as {dt.name}: the item sizes "
                         "differ")
    cdef bint empty = element_count_of(ndim, shape) == 0   # contiguous, as NumPy sees it
    if not empty and shape[ndim - 1] > 1 and strides[ndim - 1] != 1:
        raise ValueError(f"viewing {name} as {dt.name} needs the last axis contiguous")
    if (shape[ndim - 1] * old_bits) % new_bits:
        raise ValueError(f"the last axis ({shape[ndim - 1]} x {item_bytes(src.dl.dtype)} bytes) "
                         f"does not divide into {dt.name} elements of {dt.itemsize} bytes")
    for i in range(ndim - 1):
        if not empty and shape[i] > 1 and (strides[i] * old_bits) % new_bits:
            raise ValueError(f"axis {i}'s stride does not divide into {dt.name} elements")
        strides[i] = strides[i] * old_bits // new_bits
    shape[ndim - 1] = shape[ndim - 1] * old_bits // new_bits
    strides[ndim - 1] = 1
    return _view_with(src, ndim, shape, strides, src.dl.byte_offset, dt.dl)
