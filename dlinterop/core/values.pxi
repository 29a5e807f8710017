# Provides: the values of a host Tensor's elements as Python objects, read in C
# (src/values.h) with no copy: one element as a number (_read_scalar), an int
# (_read_index) or an object (_read_one), nested lists over any shape and
# strides (_read_nested) and one flat list in C order (_read_flat), for every data type
# that has a reader (_value_reader); the float8/float6/float4 formats read through tables of
# their codes' values, filled once from dlinterop._lib.minifloat.
# Uses: runtime.pxi (atomics), once.pxi, dtypes.pxi.

cdef extern from "values.h":
    # Python.h's, which values.h includes
    object PyLong_FromDouble(double x)   # int(x) of a float: its errors for NaN and inf
    object PyComplex_FromDoubles(double real, double imag)
    list dli_list_new(Py_ssize_t n)   # PyList_New: its items NULL until stored
    ctypedef struct dli_reader:
        int lanes
    enum:
        DLI_TABLE_FIRST_CODE
        DLI_TABLE_FORMATS
        DLI_TABLE_CODES
    int dli_reader_for(uint8_t code, uint8_t bits, uint16_t lanes, PyObject** tables,
                       dli_reader* r) noexcept nogil
    object dli_read_element(const dli_reader* r, const char* base, int64_t element)
    object dli_read_nested(const dli_reader* r, const char* base, int ndim,
                           const int64_t* shape, const int64_t* strides, int64_t first)
    int dli_read_flat(const dli_reader* r, const char* base, int ndim, const int64_t* shape,
                      const int64_t* strides, int64_t first, object out,
                      Py_ssize_t* at) except -1
    ctypedef enum dli_scalar_kind:
        DLI_SCALAR_NONE
        DLI_SCALAR_BOOL
        DLI_SCALAR_INT
        DLI_SCALAR_UINT
        DLI_SCALAR_REAL
        DLI_SCALAR_COMPLEX
    ctypedef struct dli_scalar:
        int64_t integer
        uint64_t unsigned_integer
        double real
        double imag
    dli_scalar_kind dli_scalar_at(DLDataType dt, const char* p, const double* tables,
                                  dli_scalar* out) noexcept nogil
    object dli_scalar_object(dli_scalar_kind kind, const dli_scalar* x)
    object dli_int_at(DLDataType dt, const char* p)


# The value of each code of each small float format (DLPack's codes 7 to 17, in order), as
# a double (for item(), float(t) ...) and as a float object (the lists of tolist hold new
# references to these, kept for the life of the process), and their state: 1 once filled,
# or a set-up state (SETUP_UNDECIDED, SETUP_DECIDING). Filled by the first read of such a
# type, not at import: that imports minifloat.
cdef double _code_values[DLI_TABLE_FORMATS * DLI_TABLE_CODES]
cdef PyObject* _code_objects[DLI_TABLE_FORMATS * DLI_TABLE_CODES]
cdef Py_ssize_t _code_values_state = SETUP_UNDECIDED
_register_setup("value_tables", &_code_values_state)


cdef int _code_values_into(double* values, PyObject** objects) except -1:
    """Fills `values` (and `objects`, unless NULL), laid out as _code_values, from
    dlinterop._lib.minifloat's decode, so that each value (NaN, the infinities and -0.0
    too) is the very float the Python reader, dlinterop._lib.values, gives."""
    from dlinterop._lib import minifloat
    cdef DType dt
    cdef int code
    cdef int c
    cdef Py_ssize_t at
    cdef object value
    for dt in _dtype_by_name.values():
        code = dt.dl.code - DLI_TABLE_FIRST_CODE
        if dt.dl.lanes == 1 and 0 <= code < DLI_TABLE_FORMATS:
            for c in range(1 << dt.dl.bits):
                at = code * DLI_TABLE_CODES + c
                values[at] = minifloat.decode(dt.name, c)
                if objects != NULL:
                    value = values[at]   # a float object
                    Py_INCREF(value)   # the table's own reference
                    objects[at] = <PyObject*>value
    return 0


cdef Py_ssize_t _fill_code_values(object unused) except -4:
    """Fills the shared tables of every small float format (_code_values_into)."""
    _code_values_into(_code_values, _code_objects)
    return 1


cdef inline bint _value_reader(DLDataType dt, dli_reader* r) except -1:
    """True with dt's reader in *r; False where dt has none, or its table is being filled
    by another thread meanwhile (the caller then reads through dlinterop._lib.values)."""
    cdef int found = dli_reader_for(dt.code, dt.bits, dt.lanes, _code_objects, r)
    if found == 2 and dli_atomic_load(&_code_values_state) != 1:
        return _decided(&_code_values_state, _fill_code_values, None) == 1
    return found != 0


cdef inline bint _count_fits(Tensor t, int64_t* count) noexcept:
    """True with t's element count in *count, False when it overflows int64 (a broadcast
    view may name that many)."""
    cdef int64_t n = 1
    cdef int i
    for i in range(t.dl.ndim):
        if t.dl.shape[i] == 0:
            count[0] = 0
            return True
    for i in range(t.dl.ndim):
        if __builtin_mul_overflow(n, t.dl.shape[i], &n):
            return False
    count[0] = n
    return True


cdef inline object _read_one(const dli_reader* r, Tensor t):
    """The value of t's first element (its only one, for item() and float(t) ...); t's
    memory must be host memory."""
    return dli_read_element(r, <const char*>t.dl.data + t.dl.byte_offset, 0)


cdef inline dli_scalar_kind _read_scalar(Tensor t, dli_scalar* out) noexcept:
    """t's value read as a number into *out when t has one element, in host memory, of a
    type of one lane (what was read: a dli_scalar_kind), else DLI_SCALAR_NONE (and for a
    small float format until its table is filled): item(), float(t) ... without a reader."""
    cdef dli_scalar_kind kind
    if element_count(&t.dl) != 1 or not dli_device_host_readable(t.dl.device.device_type):
        return DLI_SCALAR_NONE
    kind = dli_scalar_at(t.dl.dtype, <const char*>t.dl.data + t.dl.byte_offset, NULL, out)
    if kind == DLI_SCALAR_NONE and dli_atomic_load(&_code_values_state) == 1:
        kind = dli_scalar_at(t.dl.dtype, <const char*>t.dl.data + t.dl.byte_offset,
                             _code_values, out)   # a small float format, its table filled
    return kind


cdef inline object _read_index(Tensor t):
    """The int of the only element of a Tensor of an integer type (kDLInt, kDLUInt) of
    one lane, in host memory: operator.index(t)."""
    return dli_int_at(t.dl.dtype, <const char*>t.dl.data + t.dl.byte_offset)


cdef object _read_nested(const dli_reader* r, Tensor t):
    """Nested lists of t's values (a scalar when 0-d), in C order; host memory."""
    cdef const char* base = <const char*>t.dl.data + t.dl.byte_offset
    if t.dl.ndim == 0:
        return dli_read_element(r, base, 0)
    return dli_read_nested(r, base, t.dl.ndim, t.dl.shape, t.dl.strides, 0)


cdef list _read_flat(const dli_reader* r, Tensor t, int64_t count):
    """One list of t's `count` values, in C order; host memory."""
    cdef const char* base = <const char*>t.dl.data + t.dl.byte_offset
    cdef Py_ssize_t at = 0
    if count == 0:
        return []
    if t.dl.ndim == 0:
        return [dli_read_element(r, base, 0)]
    out = dli_list_new(<Py_ssize_t>count)
    dli_read_flat(r, base, t.dl.ndim, t.dl.shape, t.dl.strides, 0, out, &at)
    return out
