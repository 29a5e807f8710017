# Provides: the checks every foreign DLTensor passes before dlinterop views it, and the
# Tensors that view one (_wrap_dltensor, _tensor_over).
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, allocator.pxi (layout storage).

# What is wrong with a DLTensor, found without the GIL or any Python object: the check runs
# on every import, and the messages are built only when one fails.
cdef enum DLTensorProblem:
    DLTENSOR_OK = 0
    BAD_NDIM
    NULL_SHAPE
    BAD_LANES
    BAD_DTYPE
    BAD_DEVICE_TYPE
    BAD_DEVICE_ID
    NEGATIVE_DIM
    COUNT_OVERFLOW
    NULL_DATA
    EXTENT_OVERFLOW


cdef DLTensorProblem _check_dltensor(const DLTensor* dl) noexcept nogil:
    cdef int64_t count = 1
    cdef int64_t extent = 0
    cdef int64_t span
    cdef int64_t stride
    cdef int i
    if dl.ndim < 0 or dl.ndim > MAX_NDIM:
        return BAD_NDIM
    if dl.ndim > 0 and dl.shape == NULL:
        return NULL_SHAPE
    if not _valid_dtype_nogil(dl.dtype):
        return BAD_LANES if dl.dtype.lanes != 1 else BAD_DTYPE
    if not _known_device_type(dl.device.device_type):
        return BAD_DEVICE_TYPE
    if dl.device.device_id < 0:
        return BAD_DEVICE_ID
    for i in range(dl.ndim):
        if dl.shape[i] < 0:
            return NEGATIVE_DIM
        if __builtin_mul_overflow(count, dl.shape[i], &count):
            return COUNT_OVERFLOW
    if count == 0:
        return DLTENSOR_OK
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
    if (extent == INT64_MAX or __builtin_mul_overflow(extent + 1,
                               <int64_t>((dl.dtype.bits * dl.dtype.lanes + 7) // 8), &extent)
            or dl.byte_offset > <uint64_t>INT64_MAX
            or __builtin_add_overflow(extent, <int64_t>dl.byte_offset, &extent)):
        return EXTENT_OVERFLOW
    return DLTENSOR_OK


cdef inline int _validate_dltensor(const DLTensor* dl) except -1:
    """Raises BufferError unless the DLTensor is one dlinterop can represent safely."""
    cdef DLTensorProblem problem = _check_dltensor(dl)
    if problem != DLTENSOR_OK:
        _raise_dltensor_problem(dl, problem)
    return 0


cdef int _raise_dltensor_problem(const DLTensor* dl, DLTensorProblem problem) except -1:
    if problem == BAD_NDIM:
        raise BufferError(f"DLTensor ndim must be between 0 and {MAX_NDIM}, got {dl.ndim}")
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
    cdef Tensor t = _wrap_dltensor(&dl, DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0)
    t.owner_ref = owner
    return t


cdef int _check_inside(const DLTensor* dl, int64_t start, int64_t nbytes) except -1:
    """ValueError unless every byte of the (validated) view `dl`, whose element 0 is `start`
    bytes into a buffer of `nbytes` bytes, lies inside that buffer."""
    cdef int64_t low = 0, high = 0, itemsize = (dl.dtype.bits * dl.dtype.lanes + 7) // 8
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
