# Provides: pickling by value: a Tensor's bytes as an out-of-band buffer (_RawBytes) and
# _rebuild_tensor, which trusts nothing in the pickled state.
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, layouts.pxi,
# allocator.pxi, copies.pxi, bridge.pxi.

# A Tensor pickled before protocol 5 travels as bytes in the pickle. From 1 MiB on, they
# follow _BYTES_PAD bytes of padding that put them on a 256-byte boundary inside the bytes
# object the unpickler makes, where glibc's malloc maps that object as a block of its own
# (every block from 32 MiB, most from 1 MiB): a page start, 2 * sizeof(size_t) of block
# header, then the bytes object's header. Where they land aligned, the rebuild wraps that
# object instead of copying out of it.
cdef Py_ssize_t _WRAP_BYTES_FROM = 1024 * 1024
cdef Py_ssize_t _BYTES_PAD = (
    DEFAULT_ALIGNMENT - (<Py_ssize_t>(PyBytes_AS_STRING(b"") - <char*><PyObject*>b"")
                         + 2 * <Py_ssize_t>sizeof(size_t)) % DEFAULT_ALIGNMENT
) % DEFAULT_ALIGNMENT


@cython.final
cdef class _RawBytes:
    """The bytes of a C-contiguous host Tensor as a flat, format-less buffer: pickle's
    vehicle for every dtype, including those the buffer protocol has no format for."""
    cdef Tensor tensor    # None only in an instance made by _RawBytes.__new__ alone

    def __getbuffer__(self, Py_buffer* buf, int flags):
        cdef Tensor t = self.tensor
        if t is None:
            raise BufferError("this _RawBytes views no tensor")
        if (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE and _is_readonly(t):
            raise BufferError("tensor is read-only")
        buf.buf = <char*>t.dl.data + t.dl.byte_offset
        buf.obj = self
        buf.len = storage_bytes(element_count(&t.dl), t.dl.dtype)
        buf.readonly = _is_readonly(t)
        buf.itemsize = 1
        buf.format = <char*>"B" if (flags & PyBUF_FORMAT) == PyBUF_FORMAT else NULL
        buf.ndim = 1
        buf.shape = &buf.len if (flags & PyBUF_ND) == PyBUF_ND else NULL
        buf.strides = &buf.itemsize if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass


cdef tuple _reduce_tensor(Tensor self, object protocol):
    """Tensor.__reduce_ex__: by value. With protocol 5 the bytes are one flat buffer, out of
    band when the pickler has a buffer_callback (zero-copy); with older protocols they are
    bytes in the pickle, after padding from 1 MiB on (see _BYTES_PAD)."""
    if not dli_device_host_readable(self.dl.device.device_type):
        raise TypeError(f"a tensor on {_device_of(self)} cannot be pickled; "
                        "move it with .to('cpu') first")
    src = self if is_c_contiguous(&self.dl) else _copy_tensor(self, self.dl.device)
    meta = (_shape_of(self), (self.dl.dtype.code, self.dl.dtype.bits, self.dl.dtype.lanes),
            _is_readonly(self))
    raw = _RawBytes.__new__(_RawBytes)
    (<_RawBytes>raw).tensor = src
    if protocol >= 5:
        from pickle import PickleBuffer
        return (_rebuild_tensor, (PickleBuffer(raw),) + meta)
    cdef Py_ssize_t nbytes = storage_bytes(element_count(&src.dl), src.dl.dtype)
    cdef Py_ssize_t pad = _BYTES_PAD if nbytes >= _WRAP_BYTES_FROM else 0
    payload = PyBytes_FromStringAndSize(NULL, pad + nbytes)
    cdef char* out = PyBytes_AS_STRING(payload)
    memset(out, 0, pad)
    memcpy(out + pad, <char*>src.dl.data + src.dl.byte_offset, nbytes)
    return (_rebuild_tensor_from_bytes, (payload,) + meta + (pad,))


cdef tuple _checked_state(object data, object shape, object dtype_triple, object readonly,
                          int64_t* dims):
    """Checks a pickled Tensor's state (a pickle can be written by anyone) and fills dims:
    (ndim, dtype, a flat view of the bytes), which must be exactly the bytes the shape and
    type need (ValueError otherwise)."""
    cdef int ndim
    if type(dtype_triple) is not tuple or type(readonly) is not bool:
        raise TypeError("a pickled dl.Tensor's state is (buffer, shape, (code, bits, lanes), "
                        "readonly)")
    view = memoryview(data).cast("B")
    cdef DType dt = _checked_layout(shape, dtype_triple, view.nbytes, dims, &ndim)
    return ndim, dt, view


cdef DType _checked_layout(object shape, object dtype_triple, object nbytes, int64_t* dims,
                           int* ndim):
    """The DType of a tensor whose shape and (code, bits, lanes) came from another process
    (a pickle's state, a transport's header: anyone's), filling dims and ndim; ValueError or
    TypeError unless they describe a tensor dlinterop can hold of exactly `nbytes` bytes,
    the bytes that came with them."""
    cdef int64_t needed
    cdef LayoutProblem problem
    cdef DType dt = dtype(dtype_triple)
    ndim[0] = dims_from_python(shape, dims, True)
    problem = _buffer_size(ndim[0], dims, dt.dl, &needed)
    if problem != LAYOUT_OK:
        _raise_size_problem(problem, ndim[0], dims, dt.dl)
    if nbytes != needed:
        raise ValueError(f"{nbytes} bytes do not hold a {dt.name} tensor of shape {shape}")
    return dt


def _frame_dtype(shape, dtype_triple, nbytes):
    """The DType of the tensor a transport's header describes (`shape`, `dtype_triple`),
    checked as a pickled Tensor's are against the `nbytes` bytes of the frame that came
    with it: for a frame the core cannot read (a device frame), before anything is made
    of it."""
    cdef int64_t dims[MAX_NDIM]
    cdef int ndim
    if type(dtype_triple) is not tuple:
        raise TypeError(f"a data type is (code, bits, lanes), not {dtype_triple!r}")
    return _checked_layout(shape, dtype_triple, nbytes, dims, &ndim)


def _rebuild_tensor(data, shape, dtype_triple, readonly):
    """Unpickle (protocol 5): a Tensor over the buffer pickle hands back, never a copy
    unless its bytes are not aligned to the item size (then one, into an aligned buffer of
    dlinterop's). A read-only buffer gives a read-only Tensor (by flag), whatever the
    pickled Tensor was: out of band, the buffer is the receiver's to give."""
    cdef int64_t dims[MAX_NDIM]
    ndim, dt, view = _checked_state(data, shape, dtype_triple, readonly, dims)
    cdef Tensor t = _tensor_from_raw_buffer(view, ndim, dims, dt)
    if readonly:
        t.flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    return t


def _tensor_over_frame(data, shape, dtype_triple, readonly):
    """A Tensor over a frame a transport received (Dask's), checked as an unpickled Tensor
    is, never a copy: the bytes stay where the transport put them, aligned to their item
    size or not, as NumPy takes them from the same transport."""
    cdef int64_t dims[MAX_NDIM]
    ndim, dt, view = _checked_state(data, shape, dtype_triple, readonly, dims)
    cdef Tensor base = _tensor_from_buffer(view)
    cdef Tensor t = _tensor_over(base.dl.data, ndim, dims, NULL, dt, _CPU, _is_readonly(base),
                                 base.owner_ref)
    if readonly:
        t.flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    return t


def _rebuild_tensor_from_bytes(data, shape, dtype_triple, readonly, pad=0):
    """Unpickle (protocols before 5): the bytes in the pickle after `pad` bytes of padding,
    copied once into a buffer of dlinterop's, 256-byte aligned. A large tensor's padding
    was chosen so that its bytes are 256-byte aligned inside the bytes object a glibc
    process's unpickler makes for them; where they are, the Tensor wraps that object (made
    for this load and referenced by nothing else, as NumPy's unpickled arrays do) and
    nothing is copied."""
    cdef int64_t dims[MAX_NDIM]
    if type(pad) is not int or not 0 <= pad < DEFAULT_ALIGNMENT:
        raise ValueError(f"a pickled dl.Tensor's padding is 0 to {DEFAULT_ALIGNMENT - 1} "
                         f"bytes, not {pad!r}")
    if type(data) is not bytes:
        raise TypeError(f"a dl.Tensor pickled before protocol 5 holds bytes, not "
                        f"{type(data).__name__}")
    cdef Py_ssize_t skip = pad
    cdef char* start = PyBytes_AS_STRING(data) + min(skip, PyBytes_GET_SIZE(data))
    ndim, dt, view = _checked_state(memoryview(data)[skip:], shape, dtype_triple, readonly,
                                    dims)
    cdef Tensor t
    if (PyBytes_GET_SIZE(data) - skip >= _WRAP_BYTES_FROM
            and (<uintptr_t>start) % DEFAULT_ALIGNMENT == 0):
        return _tensor_over(start, ndim, dims, NULL, dt, _CPU, readonly, data)
    t = _allocate(ndim, dims, (<DType>dt).dl, _CPU, DEFAULT_ALIGNMENT, False)
    memcpy(t.dl.data, start, t.alloc_nbytes)
    if readonly:
        t.flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    return t


cdef Tensor _tensor_from_raw_buffer(object view, int ndim, const int64_t* dims, DType dt):
    """A C-contiguous Tensor of shape `dims` and type `dt` over the bytes of a 1-d buffer
    whose length the caller checked (read-only when the buffer is); copies into an aligned
    buffer when the bytes are not aligned to the item size."""
    cdef Tensor t = _tensor_from_buffer(view)
    if (<uintptr_t>t.dl.data) % dt.itemsize:
        out = _allocate(ndim, dims, dt.dl, _CPU, DEFAULT_ALIGNMENT, False)
        memcpy(out.dl.data, t.dl.data, out.alloc_nbytes)
        return out
    return _tensor_over(t.dl.data, ndim, dims, NULL, dt, _CPU, _is_readonly(t), t.owner_ref)
