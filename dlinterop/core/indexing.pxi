# Provides: basic indexing (Tensor.__getitem__): integers, slices (any step), ... and None,
# a view holding the root memory owner. Keys of exact ints, slices, ... and None are read
# in C; any other key, and every refusal, goes through the general reader, so both give the
# same views and the same errors.
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi (_layout_view), views.pxi.

cdef extern from *:
    bint PySlice_Check(PyObject* o) noexcept
    int PySlice_Unpack(PyObject* s, Py_ssize_t* start, Py_ssize_t* stop,
                       Py_ssize_t* step) noexcept
    Py_ssize_t PySlice_AdjustIndices(Py_ssize_t length, Py_ssize_t* start, Py_ssize_t* stop,
                                     Py_ssize_t step) noexcept
    PyObject* Py_None
    PyObject* Py_Ellipsis


cdef Tensor _getitem(Tensor src, object key):
    """src[key] for basic indexing: integers, slices (any step), ..., None."""
    cdef Tensor view = _getitem_fast(src, key)
    return view if view is not None else _getitem_general(src, key)


cdef Tensor _getitem_fast(Tensor src, object key):
    """src[key] read in C, or None where the general reader must take the key: an item
    other than an exact int, a slice, ... or None; an index out of range; a packed
    sub-byte type; arithmetic past int64."""
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef PyObject* single = <PyObject*>key
    cdef PyObject* item
    cdef Py_ssize_t count = 1, k, start, stop, step, length
    cdef int ndim = 0, axis = 0, used = 0, ellipses = 0, i
    cdef int64_t index, extent, stride, offset = 0, term, itemsize
    cdef bint empty = False
    cdef bint is_tuple = PyTuple_CheckExact(single)
    if _is_packed_subbyte(src.dl.dtype):
        return None
    if not is_tuple and src.dl.ndim > 0 and _exact_int(single, &index):
        # t[i], the commonest key: the first axis dropped, the rest shared as they are
        extent = src.dl.shape[0]
        if not -extent <= index < extent:
            return None
        if index < 0:
            index += extent
        itemsize = item_bytes(src.dl.dtype)
        if __builtin_mul_overflow(index, src.dl.strides[0], &offset) or \
                __builtin_mul_overflow(offset, itemsize, &offset) or \
                __builtin_add_overflow(offset, <int64_t>src.dl.byte_offset, &offset):
            return None
        if element_count(&src.dl) == 0:
            offset = <int64_t>src.dl.byte_offset
        return _layout_view(src, src.dl.ndim - 1, src.dl.shape + 1, src.dl.strides + 1, offset,
                            src.dl.dtype)
    if is_tuple:
        count = PyTuple_GET_SIZE(key)
    for k in range(count):
        item = PyTuple_GET_ITEM(key, k) if is_tuple else single
        if item == Py_None:
            continue
        if item == Py_Ellipsis:
            ellipses += 1
        elif PyLong_CheckExact(item) or PySlice_Check(item):
            used += 1
        else:
            return None
    if ellipses > 1 or used > src.dl.ndim:
        return None
    for k in range(count):
        item = PyTuple_GET_ITEM(key, k) if is_tuple else single
        if item == Py_None:
            if ndim == MAX_NDIM:
                return None
            shape[ndim] = 1
            strides[ndim] = 0
            ndim += 1
        elif item == Py_Ellipsis:
            # the axes the ellipsis stands for: all those no other index names
            for i in range(src.dl.ndim - used):
                if ndim == MAX_NDIM:
                    return None
                shape[ndim] = src.dl.shape[axis]
                strides[ndim] = src.dl.strides[axis]
                ndim += 1
                axis += 1
        elif PySlice_Check(item):
            if PySlice_Unpack(item, &start, &stop, &step) < 0:
                PyErr_Clear()
                return None
            if ndim == MAX_NDIM:
                return None
            stride = src.dl.strides[axis]
            length = PySlice_AdjustIndices(<Py_ssize_t>src.dl.shape[axis], &start, &stop, step)
            shape[ndim] = length
            strides[ndim] = stride
            if length > 0:
                if __builtin_mul_overflow(start, stride, &term) or \
                        __builtin_add_overflow(offset, term, &offset):
                    return None
                # a stride that only one element uses is never followed: keep it in range
                if length > 1 and __builtin_mul_overflow(stride, step, &strides[ndim]):
                    return None
            else:
                empty = True
            ndim += 1
            axis += 1
        else:
            if not _exact_int(item, &index):
                return None
            extent = src.dl.shape[axis]
            if not -extent <= index < extent:
                return None
            if index < 0:
                index += extent
            if __builtin_mul_overflow(index, src.dl.strides[axis], &term) or \
                    __builtin_add_overflow(offset, term, &offset):
                return None
            axis += 1
    # axes no index named (no ellipsis): kept whole
    while axis < src.dl.ndim:
        if ndim == MAX_NDIM:
            return None
        shape[ndim] = src.dl.shape[axis]
        strides[ndim] = src.dl.strides[axis]
        ndim += 1
        axis += 1
    for i in range(ndim):
        if shape[i] == 0:
            empty = True       # no element: where it starts does not matter
    if empty:
        offset = <int64_t>src.dl.byte_offset
    else:
        itemsize = item_bytes(src.dl.dtype)
        if __builtin_mul_overflow(offset, itemsize, &offset) or \
                __builtin_add_overflow(offset, <int64_t>src.dl.byte_offset, &offset):
            return None
    return _layout_view(src, ndim, shape, strides, offset, src.dl.dtype)


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


cdef Tensor _getitem_general(Tensor src, object key):
    """src[key] for basic indexing, any key: integers (NumPy's, `__index__` objects),
    slices (any step), ..., None; every refusal of a key is made here."""
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
        raise ValueError(f"a view of {dtype_text(src.dl.dtype)} elements must start on "
                         "a byte boundary")
    return _view_with(src, ndim, shape, strides, byte_offset, src.dl.dtype)
