# Provides: views of a Tensor, metadata only (transpose, reshape where the strides allow,
# squeeze/unsqueeze, another dtype over the same bytes), each holding the root memory owner,
# read-only when its source is; the view builder indexing.pxi uses. Each layout has a C path
# for the common arguments (exact ints, tuples of them), and the general one for the rest
# and for every refusal, so that both give the same views and the same errors.
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi, copies.pxi.

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
    if bits % 8 and element_count_of(ndim, shape) > 0:
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


cdef list _new_shape(Tensor src, object shape):
    """The shape to reshape src to: ints, one of them -1 at most (inferred)."""
    if len(shape) == 1 and not hasattr(type(shape[0]), "__index__"):
        shape = tuple(shape[0])
    dims = []
    for extent in shape:
        if isinstance(extent, bool) or not hasattr(type(extent), "__index__"):
            raise TypeError(f"a shape holds ints, not {type(extent).__name__}")
        dims.append(operator.index(extent))
    unknown = -1
    for i, extent in enumerate(dims):
        if extent == -1:
            if unknown >= 0:
                raise ValueError("only one dimension can be -1 (inferred)")
            unknown = i
        elif extent < 0:
            raise ValueError(f"negative dimension {extent} in shape {tuple(dims)}")
    if len(dims) > MAX_NDIM:
        refuse_ndim(len(dims), ValueError)
    size = element_count(&src.dl)
    known = math.prod(d for i, d in enumerate(dims) if i != unknown)
    if unknown >= 0:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape a tensor of {size} elements into shape "
                             f"{tuple(dims)}")
        dims[unknown] = size // known
    elif known != size:
        raise ValueError(f"cannot reshape a tensor of {size} elements into shape {tuple(dims)}")
    return dims


cdef object _strides_without_copy(Tensor src, list dims):
    """Strides (elements) giving src's elements in C order under the new shape `dims`
    without moving them, or None where no strides can (NumPy's rule: each group of new
    axes must fall on old axes that are contiguous with each other)."""
    old = [(src.dl.shape[i], src.dl.strides[i]) for i in range(src.dl.ndim)
           if src.dl.shape[i] != 1]
    count = len(dims)
    new_strides = [0] * count
    if 0 in dims or element_count(&src.dl) == 0:
        stride = 1
        for k in range(count - 1, -1, -1):
            new_strides[k] = stride
            stride *= max(dims[k], 1)
        return new_strides
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < count and oi < len(old):
        nprod, oprod = dims[ni], old[oi][0]
        while nprod != oprod:
            if nprod < oprod:
                nprod *= dims[nj]
                nj += 1
            else:
                oprod *= old[oj][0]
                oj += 1
        for ok in range(oi, oj - 1):
            if old[ok][1] != old[ok + 1][0] * old[ok + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for nk in range(nj - 1, ni, -1):
            new_strides[nk - 1] = new_strides[nk] * dims[nk]
        ni, nj = nj, nj + 1
        oi, oj = oj, oj + 1
    last = new_strides[ni - 1] if ni > 0 else 1
    for nk in range(ni, count):
        new_strides[nk] = last
    return new_strides


cdef int _exact_shape(object shape, int64_t* dims) noexcept:
    """reshape's and view's arguments (ints given apart, or one tuple or list of them) read
    in C when every one is an exact int, each >= -1, at most one -1, at most MAX_NDIM of
    them: their count, with dims filled; -1 for anything else (the general path reads it,
    and refuses what it must)."""
    cdef PyObject* items = <PyObject*>shape
    cdef Py_ssize_t n = PyTuple_GET_SIZE(shape), i
    cdef bint is_list = False
    cdef int unknown = 0
    if n == 1 and not PyLong_CheckExact(PyTuple_GET_ITEM(shape, 0)):
        items = PyTuple_GET_ITEM(shape, 0)
        if PyTuple_CheckExact(items):
            n = PyTuple_GET_SIZE(<object>items)
        elif PyList_CheckExact(items):
            n = PyList_GET_SIZE(items)
            is_list = True
        else:
            return -1
    if n > MAX_NDIM:
        return -1
    for i in range(n):
        if not _exact_int(PyList_GET_ITEM(items, i) if is_list
                          else PyTuple_GET_ITEM(<object>items, i), &dims[i]):
            return -1
        if dims[i] < 0:
            if dims[i] != -1 or unknown:
                return -1
            unknown = 1
    return <int>n


cdef bint _fit_shape(const DLTensor* src, int ndim, int64_t* dims) noexcept:
    """Whether src's elements fit the shape dims (C-read by _exact_shape), with its -1
    filled in; False also where the general path must explain a refusal."""
    cdef int64_t size = element_count(src), known = 1
    cdef int i, unknown = -1
    for i in range(ndim):
        if dims[i] == -1:
            unknown = i
        elif __builtin_mul_overflow(known, dims[i], &known):
            return False
    if unknown >= 0:
        if known == 0 or size % known:
            return False
        dims[unknown] = size // known
        return True
    return known == size


cdef bint _strides_for(const DLTensor* src, int count, const int64_t* dims,
                       int64_t* out) noexcept:
    """Strides (elements) giving src's elements in C order under the shape `dims` (which
    holds as many elements) without moving them; False where no strides can (NumPy's rule:
    each group of new axes must fall on old axes that are contiguous with each other) or
    where they would overflow. The C twin of _strides_without_copy."""
    cdef int64_t old_shape[MAX_NDIM]
    cdef int64_t old_strides[MAX_NDIM]
    cdef int64_t nprod, oprod, stride = 1
    cdef int n_old = 0, i, k, oi = 0, oj = 1, ni = 0, nj = 1
    if element_count(src) == 0 or element_count_of(count, dims) == 0:
        for k in range(count - 1, -1, -1):
            out[k] = stride
            if dims[k] > 1 and __builtin_mul_overflow(stride, dims[k], &stride):
                return False
        return True
    for i in range(src.ndim):
        if src.shape[i] != 1:
            old_shape[n_old] = src.shape[i]
            old_strides[n_old] = src.strides[i]
            n_old += 1
    while ni < count and oi < n_old:
        nprod = dims[ni]
        oprod = old_shape[oi]
        while nprod != oprod:
            # both products stay within the element count, which fits int64
            if nprod < oprod:
                nprod *= dims[nj]
                nj += 1
            else:
                oprod *= old_shape[oj]
                oj += 1
        for k in range(oi, oj - 1):
            if old_strides[k] != old_shape[k + 1] * old_strides[k + 1]:
                return False
        out[nj - 1] = old_strides[oj - 1]
        for k in range(nj - 1, ni, -1):
            if __builtin_mul_overflow(out[k], dims[k], &out[k - 1]):
                return False
        ni = nj
        nj += 1
        oi = oj
        oj += 1
    stride = out[ni - 1] if ni > 0 else 1
    for k in range(ni, count):
        out[k] = stride
    return True


cdef Tensor _reshaped(Tensor src, object shape, bint copy_if_needed):
    """src in the shape `shape` (reshape's or view's argument tuple): a view where strides
    allow it, else a copy (copy_if_needed) or a ValueError."""
    cdef int64_t c_shape[MAX_NDIM]
    cdef int64_t c_strides[MAX_NDIM]
    cdef int i
    cdef int ndim = _exact_shape(shape, c_shape)
    if ndim >= 0 and _fit_shape(&src.dl, ndim, c_shape) and \
            _strides_for(&src.dl, ndim, c_shape, c_strides):
        return _view_with(src, ndim, c_shape, c_strides, src.dl.byte_offset, src.dl.dtype)
    dims = _new_shape(src, shape)
    strides = _strides_without_copy(src, dims)
    if strides is None:
        if not copy_if_needed:
            raise ValueError(f"a view of shape {tuple(dims)} cannot be made of a tensor with "
                             f"shape {_shape_of(src)} and strides {_strides_of(src)} without a "
                             "copy; reshape() copies")
        src = _copy_tensor(src, src.dl.device)
        strides = _strides_without_copy(src, dims)
    for i in range(len(dims)):
        c_shape[i] = dims[i]
        c_strides[i] = strides[i]
    return _view_with(src, len(dims), c_shape, c_strides, src.dl.byte_offset, src.dl.dtype)


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
    if old_bits % 8 or new_bits % 8:
        raise ValueError(f"a view of {name} as {dt.name} would split or join sub-byte "
                         "elements")
    if ndim == 0:
        raise ValueError(f"a 0-d {name} tensor cannot be viewed as {dt.name}: the item sizes "
                         "differ")
    cdef bint empty = element_count_of(ndim, shape) == 0   # contiguous, as NumPy sees it
    if not empty and shape[ndim - 1] > 1 and strides[ndim - 1] != 1:
        raise ValueError(f"viewing {name} as {dt.name} needs the last axis contiguous")
    if (shape[ndim - 1] * old_bits) % new_bits:
        raise ValueError(f"the last axis ({shape[ndim - 1]} x {old_bits // 8} bytes) does not "
                         f"divide into {dt.name} elements of {new_bits // 8} bytes")
    for i in range(ndim - 1):
        if not empty and shape[i] > 1 and (strides[i] * old_bits) % new_bits:
            raise ValueError(f"axis {i}'s stride does not divide into {dt.name} elements")
        strides[i] = strides[i] * old_bits // new_bits
    shape[ndim - 1] = shape[ndim - 1] * old_bits // new_bits
    strides[ndim - 1] = 1
    return _view_with(src, ndim, shape, strides, src.dl.byte_offset, dt.dl)
