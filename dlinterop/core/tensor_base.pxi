# Provides: the Tensor's C-level life, under everything that makes or reads one: storage
# for its shape and strides (_reserve_shape), C-order strides, a new C-contiguous Tensor
# over memory and its owner (_new_contiguous), a Tensor copying a DLTensor's layout
# (_wrap_dltensor), the memory-owner rule (_memory_owner), and the C-level readers the
# Tensor's properties show (_shape_of, _strides_of, _is_readonly, _device_of).
# Uses: devices.pxi (device_from_dl).
#
# The Tensor class itself (tensor.pxi) comes last; its fields are declared in _core.pxd, so
# every file can build and read one through the functions here.


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


cdef Tensor _wrap_dltensor(const DLTensor* dl, uint64_t flags):
    """A Tensor viewing a validated DLTensor, with its own copy of shape and strides."""
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
    return t


cdef object _memory_owner(Tensor t):
    """What keeps t's memory alive: t itself when t owns it (a buffer of its own, or an
    imported managed tensor), else the object t holds for it. A view made of t holds this,
    not t, so that views of views never form a chain that deallocation must walk."""
    if (t.alloc_base != NULL or t.managed_versioned != NULL or t.managed_legacy != NULL
            or t.owner_ref is None):
        return t
    return t.owner_ref


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
