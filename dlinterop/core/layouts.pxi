# Provides: the layout checks, found without the GIL (LayoutProblem): of every foreign
# DLTensor before dlinterop views it (_check_dltensor, _validate_dltensor), and those the
# size rule of new buffers shares (allocator.pxi's _buffer_size); a foreign layout checked
# then made a Tensor by tensor_base.pxi (_tensor_over); and the one door from a process
# handle to a Tensor (_read_handle_layout, _tensor_from_handle, _check_inside).
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi.

# What is wrong with a layout (a foreign DLTensor, or a shape and type to allocate), found
# without the GIL or any Python object: the checks run on every import and every
# allocation, and the messages are built only when one fails (_raise_dltensor_problem for a
# producer's DLTensor, allocator.pxi's _raise_size_problem for a requested layout).
cdef enum LayoutProblem:
    LAYOUT_OK = 0
    BAD_NDIM
    NULL_SHAPE
    BAD_LANES
    BAD_DTYPE
    BAD_DEVICE_TYPE
    BAD_DEVICE_ID
    NEGATIVE_DIM
    COUNT_OVERFLOW
    BYTES_OVERFLOW
    NULL_DATA
    EXTENT_OVERFLOW


cdef inline LayoutProblem _check_ndim_and_dtype(int ndim, const int64_t* shape,
                                                DLDataType dt) noexcept nogil:
    if ndim < 0 or ndim > MAX_NDIM:
        return BAD_NDIM
    if ndim > 0 and shape == NULL:
        return NULL_SHAPE
    if not _valid_dtype_nogil(dt):
        return BAD_LANES if dt.lanes != 1 else BAD_DTYPE
    return LAYOUT_OK


cdef inline LayoutProblem _count_elements(int ndim, const int64_t* shape,
                                          int64_t* count) noexcept nogil:
    """The product of the shape in count[0], every dimension not negative, no overflow."""
    cdef int64_t n = 1
    cdef int i
    for i in range(ndim):
        if shape[i] < 0:
            return NEGATIVE_DIM
        if __builtin_mul_overflow(n, shape[i], &n):
            return COUNT_OVERFLOW
    count[0] = n
    return LAYOUT_OK


# Inline: written with the shared checks above, it is past the size at which the compiler
# inlines on its own, and a call costs the NumPy import route ~1.5% (callgrind).
cdef inline LayoutProblem _check_dltensor(const DLTensor* dl) noexcept nogil:
    cdef int64_t count
    cdef int64_t extent = 0
    cdef int64_t span
    cdef int64_t stride
    cdef int i
    cdef LayoutProblem problem = _check_ndim_and_dtype(dl.ndim, dl.shape, dl.dtype)
    if problem != LAYOUT_OK:
        return problem
    if not dli_device_known(dl.device.device_type):
        return BAD_DEVICE_TYPE
    if dl.device.device_id < 0:
        return BAD_DEVICE_ID
    problem = _count_elements(dl.ndim, dl.shape, &count)
    if problem != LAYOUT_OK:
        return problem
    if count == 0:
        return LAYOUT_OK
    if dl.data == NULL:
        return NULL_DATA
    # The furthest element from element 0, in bytes, must be addressable.
    if dl.strides == NULL:
        extent = count - 1
    else:
        for i in range(dl.ndim):
            stride = dl.strides[i]
            if (stride == INT64_MIN
                    or __builtin_mul_overflow(dl.shape[i] - 1, stride if stride >= 0 else -stride,
                                              &span)
                    or __builtin_add_overflow(extent, span, &extent)):
                return EXTENT_OVERFLOW
    if (extent == INT64_MAX or __builtin_mul_overflow(extent + 1, item_bytes(dl.dtype), &extent)
            or dl.byte_offset > <uint64_t>INT64_MAX
            or __builtin_add_overflow(extent, <int64_t>dl.byte_offset, &extent)):
        return EXTENT_OVERFLOW
    return LAYOUT_OK


cdef inline int _validate_dltensor(const DLTensor* dl) except -1:
    """Raises BufferError unless the DLTensor is one dlinterop can represent safely."""
    cdef LayoutProblem problem = _check_dltensor(dl)
    if problem != LAYOUT_OK:
        _raise_dltensor_problem(dl, problem)
    return 0


cdef int _raise_dltensor_problem(const DLTensor* dl, LayoutProblem problem) except -1:
    if problem == BAD_NDIM:
        refuse_ndim(dl.ndim, BufferError)
    if problem == NULL_SHAPE:
        raise BufferError(f"DLTensor has ndim {dl.ndim} but a NULL shape")
    if problem == BAD_LANES:
        raise BufferError(f"DLTensor data type has {dl.dtype.lanes} lanes; dlinterop "
                          "imports single-lane types only (and PyTorch's float4_e2m1fn_x2)")
    if problem == BAD_DTYPE:
        raise BufferError(f"unsupported DLPack data type (code={dl.dtype.code}, "
                          f"bits={dl.dtype.bits}, lanes={dl.dtype.lanes})")
    if problem == BAD_DEVICE_TYPE:
        raise BufferError(f"unknown DLPack device type {<int>dl.device.device_type}")
    if problem == BAD_DEVICE_ID:
        raise BufferError(f"negative device index {dl.device.device_id}")
    if problem == NEGATIVE_DIM:
        raise BufferError("negative dimension in DLTensor shape "
                          f"{[dl.shape[i] for i in range(dl.ndim)]}")
    if problem == COUNT_OVERFLOW:
        raise BufferError("DLTensor element count overflows int64")
    if problem == NULL_DATA:
        raise BufferError("DLTensor has a NULL data pointer and a non-zero element count")
    raise BufferError("DLTensor byte extent overflows int64")


cdef Tensor _tensor_over(void* data, int ndim, const int64_t* shape, const int64_t* strides,
                         DType dt, DLDevice device, bint readonly, object owner):
    """A Tensor viewing foreign memory kept alive by `owner`; strides in elements, or NULL
    for C order."""
    cdef DLTensor dl
    dl.data = data
    dl.device = device
    dl.ndim = ndim
    dl.dtype = dt.dl
    dl.shape = <int64_t*>shape
    dl.strides = <int64_t*>strides
    dl.byte_offset = 0
    _validate_dltensor(&dl)
    return _wrap_dltensor(&dl, DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0, owner)


# The door every Tensor received from another process comes through (a shared-memory
# segment, a CUDA IPC mapping): its layout is read from a handle that went through a pickle,
# which anyone can write, so every part is checked before any memory is taken for it, and
# the Tensor must lie inside the bytes received.

ctypedef struct HandleLayout:
    int ndim
    int64_t offset               # bytes from the memory's start to element 0
    DLDataType dtype
    int64_t shape[MAX_NDIM]
    int64_t strides[MAX_NDIM]    # in elements


cdef int _read_handle_layout(object offset, object shape, object strides, object dtype_triple,
                             HandleLayout* out) except -1:
    """Reads (offset, shape, strides, (code, bits, lanes)) from a handle: ints and tuples of
    ints only, offset not negative, a stride per dimension, a type dlinterop knows."""
    if (type(offset) is not int or type(dtype_triple) is not tuple
            or type(strides) is not tuple):
        raise TypeError("a handle's offset is an int, its strides a tuple and its data type a "
                        f"(code, bits, lanes) tuple, got {offset!r}, {strides!r}, "
                        f"{dtype_triple!r}")
    if not 0 <= offset <= INT64_MAX:
        raise ValueError(f"a handle's offset {offset} is negative or out of range")
    out.dtype = (<DType>dtype(dtype_triple)).dl
    out.ndim = dims_from_python(shape, out.shape, True)
    if dims_from_python(strides, out.strides, True) != out.ndim:
        raise ValueError(f"{len(strides)} strides for a shape of {out.ndim} dimensions")
    out.offset = offset
    return 0


cdef Tensor _tensor_from_handle(HandleLayout* layout, void* base, size_t length,
                                DLDevice device, bint readonly):
    """A Tensor over the `length` bytes at `base` that a handle's layout describes, validated
    and inside those bytes; its owner is the caller's to set."""
    cdef DLTensor dl
    if <uint64_t>layout.offset > length:
        raise ValueError(f"memory of {length} bytes has no offset {layout.offset}")
    dl.data = <char*>base + layout.offset
    dl.device = device
    dl.ndim = layout.ndim
    dl.dtype = layout.dtype
    dl.shape = layout.shape
    dl.strides = layout.strides
    dl.byte_offset = 0
    _validate_dltensor(&dl)
    _check_inside(&dl, layout.offset, <int64_t>length)
    return _wrap_dltensor(&dl, DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0, None)


cdef int _check_inside(const DLTensor* dl, int64_t start, int64_t nbytes) except -1:
    """ValueError unless every byte of the (validated) view `dl`, whose element 0 is `start`
    bytes into a buffer of `nbytes` bytes, lies inside that buffer."""
    cdef int64_t low = 0, high = 0, itemsize = item_bytes(dl.dtype)
    cdef int i
    if element_count(dl) == 0:
        return 0
    for i in range(dl.ndim):
        # No overflow: validation bounded the sum of |stride| * (dim - 1) * itemsize.
        if dl.strides[i] > 0:
            high += dl.strides[i] * (dl.shape[i] - 1)
        else:
            low += dl.strides[i] * (dl.shape[i] - 1)
    if start > nbytes or start + low * itemsize < 0 or (high + 1) * itemsize > nbytes - start:
        raise ValueError(f"the tensor described lies outside its buffer of {nbytes} bytes")
    return 0
