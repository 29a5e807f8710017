# Provides: casts between data types, element by element in C by NumPy's rules
# (src/casts.h): a new C-contiguous Tensor of another type (_cast_copy, Tensor.astype's
# _astype, the cast of asarray and tensor), a cast into memory of any strides (_cast_run,
# which assignment uses), their refusals and the tables they read (_check_cast); the small
# float formats' encoders, filled once from dlinterop._lib.minifloat (a private copy for a
# cast made while another thread fills them).
# Uses: runtime.pxi, once.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, cuda.pxi
# (_host_hint), allocator.pxi, copies.pxi, values.pxi (the decoding tables).

cdef extern from "casts.h":
    enum:
        DLI_CAST_OK
        DLI_CAST_NAN
        DLI_CAST_RANGE
        DLI_SMALL_FLOAT_MAX_CODES
        DLI_SMALL_FLOAT_PLAIN
        DLI_SMALL_FLOAT_FNUZ
        DLI_SMALL_FLOAT_E8M0
    ctypedef struct dli_small_float_encoding:
        double magnitudes[DLI_SMALL_FLOAT_MAX_CODES]
        int count
        uint8_t nan_code[2]
        uint8_t overflow_code[2]
        uint8_t sign_bit
        uint8_t kind
    int dli_table_bits(uint8_t code) noexcept nogil   # values.h's (casts_elements.h includes it)
    int dli_cast(const char* src, int64_t src_first, DLDataType sdt, const int64_t* sstrides,
                 char* dst, int64_t dst_first, DLDataType ddt, const int64_t* dstrides,
                 int ndim, const int64_t* shape, const double* tables,
                 const dli_small_float_encoding* small_floats, double* bad) noexcept nogil


# How each small float format (DLPack's codes 7 to 17, in order) encodes a double, and its
# state (1 once filled, or a set-up state): filled by the first cast to such a type.
cdef dli_small_float_encoding _small_float_encodings[DLI_TABLE_FORMATS]
cdef Py_ssize_t _encodings_state = SETUP_UNDECIDED
_register_setup("small_float_encodings", &_encodings_state)

cdef dict _SMALL_FLOAT_KINDS = {"fnuz": DLI_SMALL_FLOAT_FNUZ, "e8m0": DLI_SMALL_FLOAT_E8M0}


cdef int _encodings_into(dli_small_float_encoding* table) except -1:
    """Fills `table` (laid out as _small_float_encodings) from dlinterop._lib.minifloat's
    encoding, the one dl.full uses, so that a cast rounds as it does."""
    from dlinterop._lib import minifloat
    cdef DType dt
    cdef dli_small_float_encoding* f
    cdef int code, i
    for dt in _dtype_by_name.values():
        code = dt.dl.code - DLI_TABLE_FIRST_CODE
        if dt.dl.lanes == 1 and 0 <= code < DLI_TABLE_FORMATS:
            magnitudes, nan, overflow, sign, kind = minifloat.encoding(dt.name)
            if len(magnitudes) > DLI_SMALL_FLOAT_MAX_CODES:
                raise RuntimeError(f"dlinterop: {dt.name} has more codes than a cast holds")
            f = &table[code]
            for i in range(len(magnitudes)):
                f.magnitudes[i] = magnitudes[i]
            f.count = len(magnitudes)
            f.nan_code[0], f.nan_code[1] = nan
            f.overflow_code[0], f.overflow_code[1] = overflow
            f.sign_bit = sign
            f.kind = _SMALL_FLOAT_KINDS.get(kind, DLI_SMALL_FLOAT_PLAIN)
    return 0


cdef Py_ssize_t _fill_encodings(object unused) except -4:
    _encodings_into(_small_float_encodings)
    return 1


cdef inline bint _is_small_float(DLDataType dt) noexcept:
    return dli_table_bits(dt.code) != 0


cdef bint _same_dtype(DLDataType a, DLDataType b) noexcept:
    return a.code == b.code and a.bits == b.bits and a.lanes == b.lanes


@cython.final
cdef class _CastTables:
    """The tables a cast reads: the shared ones once filled; while another thread fills one
    (a one-time set-up, once.pxi), a private copy made for this cast, freed with this
    object, so that no cast waits for another thread."""
    cdef const double* decode
    cdef const dli_small_float_encoding* encode
    cdef double* own_decode
    cdef dli_small_float_encoding* own_encode

    def __dealloc__(self):
        free(self.own_decode)
        free(self.own_encode)


cdef _CastTables _SHARED_TABLES = _CastTables.__new__(_CastTables)
_SHARED_TABLES.decode = _code_values
_SHARED_TABLES.encode = _small_float_encodings


cdef _CastTables _tables_for(DLDataType source, DLDataType target):
    """The tables a cast from source to target reads, the small float formats' filled."""
    cdef _CastTables tables = _SHARED_TABLES
    cdef bint private_decode = _is_small_float(source) and _decided(
        &_code_values_state, _fill_code_values, None) != 1
    cdef bint private_encode = _is_small_float(target) and _decided(
        &_encodings_state, _fill_encodings, None) != 1
    if not (private_decode or private_encode):
        return tables
    tables = _CastTables.__new__(_CastTables)
    tables.decode = _code_values
    tables.encode = _small_float_encodings
    if private_decode:
        tables.own_decode = <double*>malloc(sizeof(_code_values))
        if tables.own_decode == NULL:
            raise MemoryError()
        _code_values_into(tables.own_decode, NULL)
        tables.decode = tables.own_decode
    if private_encode:
        tables.own_encode = <dli_small_float_encoding*>malloc(sizeof(_small_float_encodings))
        if tables.own_encode == NULL:
            raise MemoryError()
        _encodings_into(tables.own_encode)
        tables.encode = tables.own_encode
    return tables


cdef _CastTables _check_cast(DLDataType source, DLDataType target):
    """The tables a cast from source to target reads, after a TypeError for a cast no rule
    covers (between different vector types: NumPy has none) and the RuntimeWarning NumPy
    gives for complex to real (its ComplexWarning when NumPy is loaded)."""
    if _same_dtype(source, target):
        return _SHARED_TABLES     # bits copied: no table read
    if source.lanes != 1 or target.lanes != 1:
        raise TypeError(f"no cast from {dtype_from_dl(source).name} to "
                        f"{dtype_from_dl(target).name}: a vector type is cast only to itself "
                        "(t.view(dtype) reads its bytes as another type)")
    if (source.code == kDLComplex or source.code == kDLBcomplex) and not (
            target.code == kDLComplex or target.code == kDLBcomplex or target.code == kDLBool):
        import warnings
        numpy = _module_if_run("numpy")
        category = RuntimeWarning if numpy is None else numpy.exceptions.ComplexWarning
        # stacklevel 1: called from C, the innermost Python frame is the caller's line.
        warnings.warn("Casting complex values to real discards the imaginary part", category,
                      stacklevel=1)
    return _tables_for(source, target)


cdef int _cast_run(_CastTables tables, const char* src, int64_t src_first, DLDataType sdt,
                   const int64_t* sstrides, char* dst, int64_t dst_first, DLDataType ddt,
                   const int64_t* dstrides, int ndim, const int64_t* shape) except -1:
    """dli_cast with the tables _check_cast gave, without the GIL; its refusals as
    exceptions: a ValueError for NaN, an OverflowError for a value out of an integer type's
    range."""
    cdef double bad = 0
    cdef int err
    cdef const double* decode = tables.decode
    cdef const dli_small_float_encoding* encode = tables.encode
    with nogil:
        err = dli_cast(src, src_first, sdt, sstrides, dst, dst_first, ddt, dstrides, ndim,
                       shape, decode, encode, &bad)
    if err == DLI_CAST_OK:
        return 0
    name = dtype_from_dl(ddt).name
    if err == DLI_CAST_NAN:
        raise ValueError(f"cannot cast NaN to {name}, an integer type (NumPy gives a value "
                         "that depends on the machine)")
    low, high = ((-(1 << (ddt.bits - 1)), (1 << (ddt.bits - 1)) - 1) if ddt.code == kDLInt
                 else (0, (1 << ddt.bits) - 1))
    raise OverflowError(f"cannot cast {bad!r} to {name}: out of its range, {low} to {high} "
                        "(NumPy gives a value that depends on the machine)")


cdef int _require_host(Tensor t, str what) except -1:
    if not dli_device_host_readable(t.dl.device.device_type):
        raise BufferError(f"{what} runs on the host, and this tensor's memory is on "
                          f"{_device_of(t)}; {_host_hint(t.dl.device)}")
    return 0


cdef Tensor _cast_copy(Tensor t, DType dt):
    """A new C-contiguous host Tensor of type dt holding t's values, cast by NumPy's rules
    (src/casts.h)."""
    _require_host(t, f"a cast to {dt.name}")
    cdef _CastTables tables = _check_cast(t.dl.dtype, dt.dl)
    # Packed sub-byte elements share bytes: zeroed, so that the bits past the last are.
    cdef Tensor out = _allocate(t.dl.ndim, t.dl.shape, dt.dl, _CPU, DEFAULT_ALIGNMENT,
                                _is_packed_subbyte(dt.dl))
    _cast_run(tables, <const char*>t.dl.data + t.dl.byte_offset, 0, t.dl.dtype, t.dl.strides,
              <char*>out.dl.data, 0, dt.dl, out.dl.strides, t.dl.ndim, t.dl.shape)
    return out


cdef Tensor _astype(Tensor t, object dtype_like, object copy):
    """Tensor.astype: t itself when it has the type and copy is false, a copy (on t's
    device) when it has the type, else a cast (host memory)."""
    cdef DType dt = dtype(dtype_like)
    if _same_dtype(t.dl.dtype, dt.dl):
        return _copy_tensor(t, t.dl.device) if copy else t
    return _cast_copy(t, dt)
