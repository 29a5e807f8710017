# Provides: the Tensor's C-level life, under everything that makes or reads one: its
# constructors, the only code that fills a new Tensor's layout (storage for its shape and
# strides, _reserve_shape; C-order strides; a new C-contiguous Tensor over memory and its
# owner, _new_contiguous; a Tensor copying a validated DLTensor's layout, _wrap_dltensor; a
# view of another Tensor's memory, _layout_view, and the same with its byte offset in its
# data pointer, offset_in_pointer; a new Tensor laid out anew, _relayout), the memory-owner
# rule (_memory_owner), and the C-level readers the Tensor's properties show (_shape_of,
# _strides_of, _is_readonly, _device_of).
# Uses: runtime.pxi (FLAG_READ_ONLY_ASSUMED), devices.pxi (device_from_dl).
#
# The Tensor class itself (tensor.pxi) comes after every file that makes or reads one; its
# fields are declared in _core.pxd, so every file can build and read one through the
# functions here. The files above tensor.pxi compute layouts (and check them: layouts.pxi)
# and call a constructor here; they set a new Tensor's flags, its buffer (allocator.pxi)
# and what it owns, never its layout.


cdef int _reserve_shape(Tensor t, int ndim) except -1:
    """Points t.dl.shape/strides at storage for ndim entries each: the Tensor's own inline
    storage up to INLINE_NDIM dimensions, a malloc'd block (freed when t dies) past it."""
    if ndim > INLINE_NDIM:
        t.shape_strides = <int64_t*>malloc(2 * ndim * sizeof(int64_t))
        if t.shape_strides == NULL:
            t.shape_strides = t.inline_storage
            raise MemoryError()
    t.dl.ndim = ndim
    if ndim > 0:
        t.dl.shape = t.shape_strides
        t.dl.strides = t.shape_strides + ndim
    else:
        t.dl.shape = NULL
        t.dl.strides = NULL
    return 0


cdef inline void _fill_c_strides(int64_t* strides, const int64_t* shape, int ndim) noexcept nogil:
    cdef int64_t step = 1
    cdef int i
    for i in range(ndim - 1, -1, -1):
        strides[i] = step
        if shape[i] > 1:
            # Unsigned: the product wraps (instead of signed-overflow UB) only for an empty
            # tensor with a 0 dim in front, whose strides address nothing.
            step = <int64_t>(<uint64_t>step * <uint64_t>shape[i])


cdef Tensor _new_contiguous(int ndim, const int64_t* shape, DLDataType dt, DLDevice device,
                            void* data, object owner):
    """A new C-contiguous Tensor of a checked layout over `data` (NULL: the caller allocates
    next), kept alive by `owner` (None: the Tensor owns its buffer, or will)."""
    cdef Tensor t = Tensor.__new__(Tensor)
    _reserve_shape(t, ndim)
    if ndim > 0:
        memcpy(t.dl.shape, shape, ndim * sizeof(int64_t))   # no NULL to memcpy (UB)
    _fill_c_strides(t.dl.strides, shape, ndim)
    t.dl.dtype = dt
    t.dl.device = device
    t.dl.byte_offset = 0
    t.dl.data = data
    if owner is not None:
        t.owner_ref = owner
    return t


cdef int _relayout(Tensor t, int ndim, const int64_t* shape, const int64_t* strides) except -1:
    """Lays t, a Tensor just made and held by no one else, out anew over its own memory (a
    copy put back in its source's axis order, or flattened); shape and strides must not
    point into t, and the layout is the caller's to check."""
    if t.shape_strides != t.inline_storage:
        free(t.shape_strides)
        t.shape_strides = t.inline_storage
    t.dl.ndim = 0       # a valid layout should the storage for the new one not be had
    t.dl.shape = NULL
    t.dl.strides = NULL
    _reserve_shape(t, ndim)
    if ndim > 0:
        memcpy(t.dl.shape, shape, ndim * sizeof(int64_t))
        memcpy(t.dl.strides, strides, ndim * sizeof(int64_t))
    return 0


cdef inline Tensor _wrap_dltensor(const DLTensor* dl, uint64_t flags, object owner):
    """A Tensor viewing a validated DLTensor, with its own copy of shape and strides (C
    order where dl has none), its READ_ONLY and IS_COPIED bits from `flags`, kept alive by
    `owner` (None: what keeps the memory alive is the caller's to record)."""
    cdef Tensor t = Tensor.__new__(Tensor)
    _reserve_shape(t, dl.ndim)
    t.dl.data = dl.data
    t.dl.device = dl.device
    t.dl.dtype = dl.dtype
    t.dl.byte_offset = dl.byte_offset
    if dl.ndim > 0:
        memcpy(t.dl.shape, dl.shape, dl.ndim * sizeof(int64_t))
        if dl.strides != NULL:
            memcpy(t.dl.strides, dl.strides, dl.ndim * sizeof(int64_t))
        else:
            _fill_c_strides(t.dl.strides, dl.shape, dl.ndim)
    t.flags = flags & (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED)
    if owner is not None:
        t.owner_ref = owner
    return t


cdef object _memory_owner(Tensor t):
    """What keeps t's memory alive: t itself when t owns it (a buffer of its own, or an
    imported managed tensor), else the object t holds for it. A view made of t holds this,
    not t, so that views of views never form a chain that deallocation must walk."""
    if (t.alloc_base != NULL or t.managed_versioned != NULL or t.managed_legacy != NULL
            or t.owner_ref is None):
        return t
    return t.owner_ref


cdef Tensor _layout_view(Tensor src, int ndim, const int64_t* shape, const int64_t* strides,
                         int64_t byte_offset, DLDataType dtype):
    """A Tensor over src's memory with this layout (strides in elements of `dtype`,
    byte_offset from src's data pointer, negative where element 0 lies below it), owned
    as src's memory is, read-only when src is. The layout is the caller's to check."""
    cdef Tensor t = Tensor.__new__(Tensor)
    _reserve_shape(t, ndim)
    if ndim > 0:
        memcpy(t.dl.shape, shape, ndim * sizeof(int64_t))
        memcpy(t.dl.strides, strides, ndim * sizeof(int64_t))
    t.dl.data = src.dl.data
    if byte_offset < 0:
        # Element 0 lies below src's data pointer (src has negative strides): point at it
        # instead of handing out a negative byte_offset, which DLPack's is not.
        t.dl.data = <char*>src.dl.data + byte_offset
        byte_offset = 0
    t.dl.byte_offset = <uint64_t>byte_offset
    t.dl.device = src.dl.device
    t.dl.dtype = dtype
    t.flags = src.flags & (DLPACK_FLAG_BITMASK_READ_ONLY | FLAG_READ_ONLY_ASSUMED)
    t.owner_ref = _memory_owner(src)
    return t


cdef Tensor offset_in_pointer(Tensor t):
    """t itself when its byte_offset is 0, else the same view with the offset moved into its
    data pointer, for consumers that ignore byte_offset (Warp reads `data` alone)."""
    if t.dl.byte_offset == 0:
        return t
    cdef Tensor v = _layout_view(t, t.dl.ndim, t.dl.shape, t.dl.strides, 0, t.dl.dtype)
    v.dl.data = <char*>t.dl.data + t.dl.byte_offset
    return v


# What Tensor's properties show, read in C by the files before tensor.pxi and by it (a
# property read through Python would cost an attribute lookup each).

cdef tuple _shape_of(Tensor t):
    return tuple([t.dl.shape[i] for i in range(t.dl.ndim)])


cdef tuple _strides_of(Tensor t):
    """Strides in elements (DLPack's unit, not NumPy's bytes)."""
    return tuple([t.dl.strides[i] for i in range(t.dl.ndim)])


cdef inline bint _is_readonly(Tensor t) noexcept:
    return (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0


cdef inline Device _device_of(Tensor t):
    return device_from_dl(t.dl.device)
