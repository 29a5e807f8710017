# Provides: the buffer protocol's export of a Tensor (_fill_buffer and _release_buffer,
# the bodies of Tensor.__getbuffer__ and __releasebuffer__): read from its C fields alone,
# with no Python attribute and no DType lookup (the error messages aside).
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi, cuda.pxi (_host_hint).


cdef int _fill_buffer(Tensor t, Py_buffer* buf, int flags) except -1:
    """Fills buf for the request `flags`, or raises BufferError saying what it cannot give:
    memory the host cannot read, a type with no format, a writable view of read-only
    memory, a layout the request does not take."""
    cdef const char* fmt = _buffer_format_of(t.dl.dtype)
    cdef int64_t itemsize = item_bytes(t.dl.dtype)
    cdef Py_ssize_t* byte_strides = NULL
    cdef int64_t length
    cdef int ndim = t.dl.ndim
    cdef int i
    cdef bint strides_wanted = (flags & PyBUF_STRIDES) == PyBUF_STRIDES
    cdef bint one_axis
    if not dli_device_host_readable(t.dl.device.device_type):
        raise BufferError(f"memory on {_device_of(t)} is not host-accessible; "
                          f"{_host_hint(t.dl.device)}")
    if fmt == NULL:
        raise BufferError(f"the buffer protocol has no format for "
                          f"{dtype_from_dl(t.dl.dtype).name}; use DLPack (from_dlpack) to "
                          "exchange it")
    if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE and _is_readonly(t):
        raise BufferError("tensor is read-only")
    # The layout is looked at only for a request that names one (a strided request,
    # NumPy's and memoryview's, takes any).
    if not strides_wanted or (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS:
        if not is_c_contiguous(&t.dl):
            raise BufferError("tensor is not C-contiguous")
    if (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS and ndim > 1:
        raise BufferError("tensor is not Fortran-contiguous")
    if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS
            and not is_c_contiguous(&t.dl)):
        raise BufferError("tensor is not contiguous")
    if __builtin_mul_overflow(element_count(&t.dl), itemsize, &length):
        # A broadcast view can name more bytes than an address space holds.
        raise BufferError(f"a buffer of {element_count(&t.dl)} x {itemsize} bytes cannot be "
                          "described")
    # One contiguous axis: its stride is the item size, which the buffer holds itself
    # (buf.strides points at buf.itemsize, as CPython's array does): nothing to allocate.
    one_axis = ndim == 1 and t.dl.strides[0] == 1
    if ndim > 0 and strides_wanted and not one_axis:
        byte_strides = <Py_ssize_t*>malloc(ndim * sizeof(Py_ssize_t))
        if byte_strides == NULL:
            raise MemoryError()
        for i in range(ndim):
            byte_strides[i] = <Py_ssize_t>(t.dl.strides[i] * itemsize)
    buf.buf = <char*>t.dl.data + t.dl.byte_offset
    buf.obj = t
    buf.len = <Py_ssize_t>length
    buf.readonly = _is_readonly(t)
    buf.itemsize = <Py_ssize_t>itemsize
    buf.format = <char*>fmt if (flags & PyBUF_FORMAT) == PyBUF_FORMAT else NULL
    buf.ndim = ndim
    buf.shape = <Py_ssize_t*>t.dl.shape if (flags & PyBUF_ND) == PyBUF_ND else NULL
    buf.strides = &buf.itemsize if strides_wanted and one_axis else byte_strides
    buf.suboffsets = NULL
    buf.internal = byte_strides   # freed by _release_buffer (NULL: nothing to free)
    return 0


cdef void _release_buffer(Py_buffer* buf) noexcept:
    free(buf.internal)
    buf.internal = NULL
