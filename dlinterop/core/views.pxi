# Provides: views of a Tensor, metadata only (basic indexing, transpose, reshape where the
# strides allow, squeeze/unsqueeze, another dtype over the same bytes), each holding the root
# memory owner, read-only when its source is.
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi, copies.pxi.

cdef Tensor _view_with(Tensor src, int ndim, int64_t* shape, int64_t* strides,
                       int64_t byte_offset, DLDataType dtype):
    """A Tensor over src's memory with this layout (strides in elements of `dtype`,
    byte_offset from src's data pointer), owned as src's memory is."""
    cdef DLTensor dl
    cdef int i
    cdef int64_t bits = <int64_t>dtype.bits * dtype.lanes
    if bits % 8 and element_count_of(ndim, shape) > 0:
        # Sub-byte elements are packed: a view must keep each row's elements packed (its
        # last axis contiguous) and on a byte boundary, or no consumer could address it.
        for i in range(ndim - 1):
            if shape[i] > 1 and (strides[i] * bits) % 8:
                raise ValueError(f"a view of {dtype_from_dl(dtype).name} elements must keep "
                                 "every row on a byte boundary")
        if ndim > 0 and shape[ndim - 1] > 1 and strides[ndim - 1] != 1:
            raise ValueError(f"a view of {dtype_from_dl(dtype).name} elements must keep the "
                             "last axis contiguous (they are packed)")
    dl.data = src.dl.data
    if byte_offset < 0:
        # Element 0 lies below src's data pointer (src has negative strides): point at it
        # instead of handing out a negative byte_offset, which DLPack's is not.
        dl.data = <char*>src.dl.data + byte_offset
        byte_offset = 0
    dl.device = src.dl.device
    dl.ndim = ndim
    dl.dtype = dtype
    dl.shape = shape
    dl.strides = strides
    dl.byte_offset = <uint64_t>byte_offset
    cdef Tensor t = _wrap_dltensor(&dl, src.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    t.flags |= src.flags & FLAG_READ_ONLY_ASSUMED
    t.owner_ref = _memory_owner(src)
    return t


cdef object _offset_bytes(Tensor src, object elements, DLDataType dtype):
    """The byte offset from src's data pointer of the element `elements` elements from
    src's element 0 (negative where src has negative strides), or None where it does not
    fall on a byte (packed sub-byte elements)."""
    bits = elements * dtype.bits * dtype.lanes
    if bits % 8:
        return None
    return src.dl.byte_offset + bits // 8


_INDEX_ERROR = ("only integers, slices (:), ellipsis (...) and None are valid indices of a "
                "dl.Tensor (it holds memory; index its NumPy or framework view for more)")


cdef Tensor _getitem(Tensor src, object key):
    """src[key] for basic indexing: integers, slices (any step), ..., None."""
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int ndim = 0, axis = 0, i
    if type(key) is not tuple:
        key = (key,)
    used = 0
    ellipses = 0
    for item in key:
        if item is None:
            continue
        if item is Ellipsis:
            ellipses += 1
            continue
        used += 1
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > src.dl.ndim:
        raise IndexError(f"too many indices for a tensor of {src.dl.ndim} dimensions: "
                         f"{used} were given")
    offset = 0          # in elements, a Python int: no overflow
    empty = False
    for item in key:
        if item is None:
            if ndim == MAX_NDIM:
                refuse_ndim(ndim + 1, IndexError)
            shape[ndim] = 1
            strides[ndim] = 0
            ndim += 1
        elif item is Ellipsis:
            # the axes the ellipsis stands for: all those no other index names
            for i in range(src.dl.ndim - used):
                if ndim == MAX_NDIM:
                    refuse_ndim(ndim + 1, IndexError)
                shape[ndim] = src.dl.shape[axis]
                strides[ndim] = src.dl.strides[axis]
                ndim += 1
                axis += 1
        elif isinstance(item, slice):
            start, stop, step = item.indices(src.dl.shape[axis])
            length = len(range(start, stop, step))
            if ndim == MAX_NDIM:
                refuse_ndim(ndim + 1, IndexError)
            shape[ndim] = length
            if length > 0:
                offset += start * src.dl.strides[axis]
                # a stride that only one element uses is never followed: keep it in range
                strides[ndim] = src.dl.strides[axis] * step if length > 1 else src.dl.strides[axis]
            else:
                strides[ndim] = src.dl.strides[axis]
                empty = True
            ndim += 1
            axis += 1
        else:
            if isinstance(item, bool) or not hasattr(type(item), "__index__"):
                raise IndexError(_INDEX_ERROR)
            index = operator.index(item)
            extent = src.dl.shape[axis]
            if not -extent <= index < extent:
                raise IndexError(f"index {index} is out of bounds for axis {axis} with size "
                                 f"{extent}")
            if index < 0:
                index += extent
            offset += index * src.dl.strides[axis]
            axis += 1
    # axes no index named (no ellipsis): kept whole
    while axis < src.dl.ndim:
        if ndim == MAX_NDIM:
            refuse_ndim(ndim + 1, IndexError)
        shape[ndim] = src.dl.shape[axis]
        strides[ndim] = src.dl.strides[axis]
        ndim += 1
        axis += 1
    for i in range(ndim):
        if shape[i] == 0:
            empty = True       # no element: where it starts does not matter
    byte_offset = src.dl.byte_offset if empty else _offset_bytes(src, offset, src.dl.dtype)
    if byte_offset is None:
        raise ValueError(f"a view of {dtype_from_dl(src.dl.dtype).name} elements must start on "
                         "a byte boundary")
    return _view_with(src, ndim, shape, strides, byte_offset, src.dl.dtype)


cdef Tensor _permuted(Tensor src, object axes):
    """src with its axes in the order `axes` (a permutation; negative axes count from the
    end); None reverses them."""
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int ndim = src.dl.ndim, i
    if axes is None:
        order = list(range(ndim - 1, -1, -1))
    else:
        order = [_normalized_axis(a, ndim) for a in axes]
        if sorted(order) != list(range(ndim)):
            raise ValueError(f"axes {tuple(axes)} are not a permutation of a tensor's "
                             f"{ndim} axes")
    for i in range(ndim):
        shape[i] = src.dl.shape[order[i]]
        strides[i] = src.dl.strides[order[i]]
    return _view_with(src, ndim, shape, strides, src.dl.byte_offset, src.dl.dtype)


cdef int _normalized_axis(object axis, int ndim) except -1:
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
    unknown = -1
    for i, extent in enumerate(shape):
        if isinstance(extent, bool) or not hasattr(type(extent), "__index__"):
            raise TypeError(f"a shape holds ints, not {type(extent).__name__}")
        extent = operator.index(extent)
        if extent == -1:
            if unknown >= 0:
                raise ValueError("only one dimension can be -1 (inferred)")
            unknown = i
        elif extent < 0:
            raise ValueError(f"negative dimension {extent} in shape {tuple(shape)}")
        dims.append(extent)
    if len(dims) > MAX_NDIM:
        refuse_ndim(len(dims), ValueError)
    size = element_count(&src.dl)
    known = math.prod(d for i, d in enumerate(dims) if i != unknown)
    if unknown >= 0:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape a tensor of {size} elements into shape "
                             f"{tuple(shape)}")
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


cdef Tensor _reshaped(Tensor src, object shape, bint copy_if_needed):
    cdef int64_t c_shape[MAX_NDIM]
    cdef int64_t c_strides[MAX_NDIM]
    cdef int i
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
    if axis is None:
        drop = {i for i in range(src.dl.ndim) if src.dl.shape[i] == 1}
    else:
        axes = axis if isinstance(axis, tuple) else (axis,)
        drop = {_normalized_axis(a, src.dl.ndim) for a in axes}
        for i in drop:
            if src.dl.shape[i] != 1:
                raise ValueError(f"axis {i} has size {src.dl.shape[i]}: only axes of size 1 "
                                 "can be squeezed")
    for i in range(src.dl.ndim):
        if i not in drop:
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
    name = dtype_from_dl(src.dl.dtype).name
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
