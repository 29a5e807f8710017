# Provides: assignment, t[key] = value (_setitem): into the elements t[key] selects (any key
# indexing takes, packed sub-byte elements at any position too), the values of a number,
# Python data, a dl.Tensor or anything dl.asarray takes, broadcast as NumPy broadcasts them
# and cast as NumPy's assignment casts (casts.pxi); a source that overlaps the destination
# is read through a copy; read-only memory and memory the host cannot write refused.
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi (_layout_view), cuda.pxi
# (_host_hint), copies.pxi, values.pxi (_count_fits), casts.pxi, numbers.pxi (_unboxed),
# encoding.pxi (_encode_common), python_data.pxi, bridge.pxi, indexing.pxi.

cdef DLDataType _ONE_BYTE = (<DType>uint8).dl


cdef int _setitem(Tensor t, object key, object value) except -1:
    """t[key] = value. A value that may be refused (NaN into an integer type, ...) is cast
    whole before anything is written, so that a refusal leaves t as it was."""
    cdef int64_t strides[MAX_NDIM]
    cdef uint64_t element[2]      # one element of up to 16 bytes, for a number
    cdef int64_t zeros[MAX_NDIM]
    cdef int64_t first
    cdef int ndim, i
    cdef Tensor src
    cdef DType dt = dtype_from_dl(t.dl.dtype)
    if _is_readonly(t):
        raise ValueError("assignment destination is read-only (" + (
            "a legacy DLPack capsule cannot say whether its memory may be written"
            if t.flags & FLAG_READ_ONLY_ASSUMED else "its producer marked it read-only")
            + "); assign into a copy, t.copy()")
    if not dli_device_host_readable(t.dl.device.device_type):
        raise BufferError(f"assignment writes host memory, and this tensor's memory is on "
                          f"{_device_of(t)}; {_host_hint(t.dl.device)}")
    # The elements key selects, in elements from t's element 0: indexing a one-byte view
    # of t's layout gives them for every type, packed sub-byte ones at any position too.
    cdef Tensor proxy = _layout_view(t, t.dl.ndim, t.dl.shape, t.dl.strides,
                                     t.dl.byte_offset, _ONE_BYTE)
    cdef Tensor view = _getitem(proxy, key)
    first = (<char*>view.dl.data + view.dl.byte_offset) - (<char*>t.dl.data + t.dl.byte_offset)
    ndim = view.dl.ndim
    cdef char* base = <char*>t.dl.data + t.dl.byte_offset
    for i in range(ndim):
        zeros[i] = 0
    value = _unboxed(value)       # a NumPy scalar is a Python value, as NumPy 2 reads it
    cls = type(value)
    if (cls is float or cls is int or cls is bool) and \
            _encode_common(dt, value, <char*>element):
        # A number: one element, read for every destination element.
        _cast_run(_SHARED_TABLES, <const char*>element, 0, t.dl.dtype, zeros, base, first,
                  t.dl.dtype, view.dl.strides, ndim, view.dl.shape)
        return 0
    if cls is Tensor:
        src = <Tensor>value
    elif _is_python_data(cls):
        src = _tensor_from_data(value, dt, None)    # the Python-value rules, in t's type
    else:
        src = asarray(value)
    if not dli_device_host_readable(src.dl.device.device_type):
        src = _copy_tensor(src, _CPU)
    _broadcast_into(src, view, strides)
    if _overlaps(src, strides, view, t, first):
        src = _copy_tensor(src, _CPU)
        _broadcast_into(src, view, strides)
    if not _same_dtype(src.dl.dtype, t.dl.dtype) and _cast_may_refuse(src.dl.dtype,
                                                                      t.dl.dtype):
        src = _cast_copy(src, dt)     # a refusal raised here, before anything is written
        _broadcast_into(src, view, strides)
    cdef _CastTables tables = _check_cast(src.dl.dtype, t.dl.dtype)
    _cast_run(tables, <const char*>src.dl.data + src.dl.byte_offset, 0, src.dl.dtype, strides,
              base, first, t.dl.dtype, view.dl.strides, ndim, view.dl.shape)
    return 0


cdef int _broadcast_into(Tensor src, Tensor view, int64_t* strides) except -1:
    """src's strides (elements) read as broadcast to view's shape, by NumPy's rule (leading
    axes of size 1 of src dropped); ValueError, with NumPy's message, where it does not
    broadcast."""
    cdef int offset, i, j
    cdef int sn = src.dl.ndim
    cdef int lead = 0
    while sn - lead > view.dl.ndim and src.dl.shape[lead] == 1:
        lead += 1
    offset = view.dl.ndim - (sn - lead)
    if offset < 0:
        _refuse_broadcast(src, view)
    for i in range(view.dl.ndim):
        j = i - offset + lead
        if i < offset or src.dl.shape[j] == 1:
            strides[i] = 0
        elif src.dl.shape[j] == view.dl.shape[i]:
            strides[i] = src.dl.strides[j]
        else:
            _refuse_broadcast(src, view)
    return 0


cdef int _refuse_broadcast(Tensor src, Tensor view) except -1:
    raise ValueError(f"could not broadcast input array from shape {_shape_of(src)} into shape "
                     f"{_shape_of(view)}")


cdef inline bint _cast_may_refuse(DLDataType source, DLDataType target) noexcept:
    """Whether a cast may refuse a value: a real or complex one into an integer type."""
    return (target.code == kDLInt or target.code == kDLUInt) and not (
        source.code == kDLInt or source.code == kDLUInt or source.code == kDLBool)


cdef bint _overlaps(Tensor src, const int64_t* src_strides, Tensor view, Tensor t,
                    int64_t first):
    """Whether the bytes src (read with src_strides over view's shape) spans meet those the
    destination spans: then NumPy's result needs the source read before any is written."""
    cdef int64_t low = 0, high = 0, dlow = 0, dhigh = 0
    cdef int i
    cdef int64_t count
    if not _count_fits(view, &count):
        return True
    if count == 0:
        return False
    for i in range(view.dl.ndim):
        if src_strides[i] < 0:
            low += src_strides[i] * (view.dl.shape[i] - 1)
        else:
            high += src_strides[i] * (view.dl.shape[i] - 1)
        if view.dl.strides[i] < 0:
            dlow += view.dl.strides[i] * (view.dl.shape[i] - 1)
        else:
            dhigh += view.dl.strides[i] * (view.dl.shape[i] - 1)
    cdef int64_t sbits = <int64_t>src.dl.dtype.bits * src.dl.dtype.lanes
    cdef int64_t dbits = <int64_t>t.dl.dtype.bits * t.dl.dtype.lanes
    cdef int64_t s0 = <int64_t><uintptr_t>src.dl.data + <int64_t>src.dl.byte_offset
    cdef int64_t d0 = <int64_t><uintptr_t>t.dl.data + <int64_t>t.dl.byte_offset
    # the first and the last byte each touches (a packed element shares its bytes)
    cdef int64_t s_first = s0 + (low * sbits >> 3), s_last = s0 + ((high + 1) * sbits - 1 >> 3)
    cdef int64_t d_first = d0 + ((first + dlow) * dbits >> 3)
    cdef int64_t d_last = d0 + ((first + dhigh + 1) * dbits - 1 >> 3)
    return s_first <= d_last and d_first <= s_last
