# Provides: the DType class, one interned instance per DLPack (code, bits, lanes), dl.dtype()
# and the conversions from names, Python's number types, NumPy/ml_dtypes/torch dtypes,
# triples and buffer formats; the type codes DLPack defines (_DLPACK_TYPE_CODES).
# Uses: once.pxi (_module_if_run).

cdef dict _dtype_by_key = {}    # packed (code, bits, lanes) -> DType
# [code][bits]: bit (lanes - 1) is set for every registered triple; read without the GIL.
cdef uint8_t _registered_lanes[kDLBcomplex + 1][256]
cdef dict _dtype_by_name = {}   # name -> DType
# [code][bytes]: the buffer-protocol format of each one-lane type that has one, NULL
# elsewhere; read without a lookup by the buffer export.
cdef const char* _buffer_formats[kDLBcomplex + 1][17]

cdef inline uint64_t _dtype_key(uint8_t code, uint8_t bits, uint16_t lanes) noexcept nogil:
    return <uint64_t>code | (<uint64_t>bits << 8) | (<uint64_t>lanes << 16)


# DTypes are made only while this module registers them: one instance per type, each with
# a name and a non-zero size. A DType made any other way (DType.__new__, a crafted pickle)
# would have neither.
cdef bint _registering = True


@cython.final
cdef class DType:
    """A DLPack data type: immutable, hashable, equal to its name."""

    def __cinit__(self):
        if not _registering:
            raise TypeError("DType cannot be constructed directly; use dl.dtype(x)")

    def __init__(self, *args, **kwargs):
        raise TypeError("DType cannot be constructed directly; use dl.dtype(x)")

    @property
    def code(self):
        return self.dl.code

    @property
    def bits(self):
        return self.dl.bits

    @property
    def lanes(self):
        return self.dl.lanes

    def __dlpack_data_type__(self):
        return (self.dl.code, self.dl.bits, self.dl.lanes)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"dlinterop.{self.name}"

    def __hash__(self):
        # Equal to its name, so it must hash like it.
        return hash(self.name)

    def __eq__(self, other):
        if type(other) is DType:
            return self is other
        if type(other) is str:
            return self.name == other
        try:
            return self is dtype(other)
        except (TypeError, ValueError):
            return NotImplemented

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __reduce__(self):
        return (dtype, (self.name,))

    @property
    def dtype(self):
        """The NumPy dtype, as `to_numpy()`: NumPy reads this attribute, so that
        `np.dtype(dl.float32)` (and NumPy, Dask or pandas code given a DType wherever it takes
        a dtype) works for every type NumPy can hold."""
        return self.to_numpy()

    def to_numpy(self):
        """The NumPy dtype (from ml_dtypes for bfloat16, bcomplex32, the small floats and the
        sub-byte integers, which NumPy holds one per byte)."""
        try:
            import numpy
        except ImportError:
            raise TypeError(f"{self.name}.to_numpy() needs numpy, which is not installed") from None
        if self.buffer_format != NULL:
            # NumPy's own types are the registry's with a buffer-protocol format (bool, the
            # 8- to 64-bit integers, float16/32/64, complex64/128), under the same names.
            return numpy.dtype(self.name)
        if self.dl.code == kDLComplex or self.dl.lanes != 1:
            raise TypeError(f"NumPy has no dtype for {self.name}")
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(
                f"{self.name}.to_numpy() needs ml_dtypes, which is not installed") from None
        try:
            return numpy.dtype(getattr(ml_dtypes, self.name))
        except AttributeError:
            raise TypeError(f"ml_dtypes {ml_dtypes.__version__} has no {self.name}") from None


# The type codes DLPack defines (dlpack.h's DLDataTypeCode), by their names there: what a
# producer may send, whether or not dlinterop has a DType for it (kDLOpaqueHandle has none,
# nor has every width of the others). The conformance checker and the pytest plugin read
# it; tests/test_dlpack_header.py compares it with the header.
_DLPACK_TYPE_CODES = {
    "kDLInt": kDLInt, "kDLUInt": kDLUInt, "kDLFloat": kDLFloat,
    "kDLOpaqueHandle": kDLOpaqueHandle, "kDLBfloat": kDLBfloat, "kDLComplex": kDLComplex,
    "kDLBool": kDLBool, "kDLFloat8_e3m4": kDLFloat8_e3m4, "kDLFloat8_e4m3": kDLFloat8_e4m3,
    "kDLFloat8_e4m3b11fnuz": kDLFloat8_e4m3b11fnuz, "kDLFloat8_e4m3fn": kDLFloat8_e4m3fn,
    "kDLFloat8_e4m3fnuz": kDLFloat8_e4m3fnuz, "kDLFloat8_e5m2": kDLFloat8_e5m2,
    "kDLFloat8_e5m2fnuz": kDLFloat8_e5m2fnuz, "kDLFloat8_e8m0fnu": kDLFloat8_e8m0fnu,
    "kDLFloat6_e2m3fn": kDLFloat6_e2m3fn, "kDLFloat6_e3m2fn": kDLFloat6_e3m2fn,
    "kDLFloat4_e2m1fn": kDLFloat4_e2m1fn, "kDLBcomplex": kDLBcomplex,
}


cdef DType _register_dtype(str name, uint8_t code, uint8_t bits, uint16_t lanes, const char* fmt):
    cdef DType dt = DType.__new__(DType)
    dt.dl.code = code
    dt.dl.bits = bits
    dt.dl.lanes = lanes
    dt.name = name
    dt.itemsize = item_bytes(dt.dl)
    dt.buffer_format = fmt
    _dtype_by_key[_dtype_key(code, bits, lanes)] = dt
    _dtype_by_name[name] = dt
    _registered_lanes[code][bits] |= 1 << (lanes - 1)
    if lanes == 1 and bits % 8 == 0 and bits <= 128:
        _buffer_formats[code][dt.itemsize] = fmt
    return dt


bool_ = _register_dtype("bool", kDLBool, 8, 1, "?")
int8 = _register_dtype("int8", kDLInt, 8, 1, "b")
int16 = _register_dtype("int16", kDLInt, 16, 1, "h")
int32 = _register_dtype("int32", kDLInt, 32, 1, "i")
int64 = _register_dtype("int64", kDLInt, 64, 1, "q")
# Packed sub-byte integers (two's complement for the signed ones), laid out as DLPack lays
# out every sub-byte type; ml_dtypes has them (one per byte in NumPy).
int1 = _register_dtype("int1", kDLInt, 1, 1, NULL)
int2 = _register_dtype("int2", kDLInt, 2, 1, NULL)
int4 = _register_dtype("int4", kDLInt, 4, 1, NULL)
uint1 = _register_dtype("uint1", kDLUInt, 1, 1, NULL)
uint2 = _register_dtype("uint2", kDLUInt, 2, 1, NULL)
uint4 = _register_dtype("uint4", kDLUInt, 4, 1, NULL)
uint8 = _register_dtype("uint8", kDLUInt, 8, 1, "B")
uint16 = _register_dtype("uint16", kDLUInt, 16, 1, "H")
uint32 = _register_dtype("uint32", kDLUInt, 32, 1, "I")
uint64 = _register_dtype("uint64", kDLUInt, 64, 1, "Q")
float16 = _register_dtype("float16", kDLFloat, 16, 1, "e")
float32 = _register_dtype("float32", kDLFloat, 32, 1, "f")
float64 = _register_dtype("float64", kDLFloat, 64, 1, "d")
bfloat16 = _register_dtype("bfloat16", kDLBfloat, 16, 1, NULL)
complex32 = _register_dtype("complex32", kDLComplex, 32, 1, NULL)
complex64 = _register_dtype("complex64", kDLComplex, 64, 1, "Zf")
complex128 = _register_dtype("complex128", kDLComplex, 128, 1, "Zd")
# Two bfloat16: real, then imaginary (DLPack's kDLBcomplex; ml_dtypes' bcomplex32).
bcomplex32 = _register_dtype("bcomplex32", kDLBcomplex, 32, 1, NULL)
float8_e3m4 = _register_dtype("float8_e3m4", kDLFloat8_e3m4, 8, 1, NULL)
float8_e4m3 = _register_dtype("float8_e4m3", kDLFloat8_e4m3, 8, 1, NULL)
float8_e4m3b11fnuz = _register_dtype("float8_e4m3b11fnuz", kDLFloat8_e4m3b11fnuz, 8, 1, NULL)
float8_e4m3fn = _register_dtype("float8_e4m3fn", kDLFloat8_e4m3fn, 8, 1, NULL)
float8_e4m3fnuz = _register_dtype("float8_e4m3fnuz", kDLFloat8_e4m3fnuz, 8, 1, NULL)
float8_e5m2 = _register_dtype("float8_e5m2", kDLFloat8_e5m2, 8, 1, NULL)
float8_e5m2fnuz = _register_dtype("float8_e5m2fnuz", kDLFloat8_e5m2fnuz, 8, 1, NULL)
float8_e8m0fnu = _register_dtype("float8_e8m0fnu", kDLFloat8_e8m0fnu, 8, 1, NULL)
float6_e2m3fn = _register_dtype("float6_e2m3fn", kDLFloat6_e2m3fn, 6, 1, NULL)
float6_e3m2fn = _register_dtype("float6_e3m2fn", kDLFloat6_e3m2fn, 6, 1, NULL)
float4_e2m1fn = _register_dtype("float4_e2m1fn", kDLFloat4_e2m1fn, 4, 1, NULL)
# PyTorch exchanges its float4_e2m1fn_x2 (two values packed in a byte) as (17, 4, 2).
float4_e2m1fn_x2 = _register_dtype("float4_e2m1fn_x2", kDLFloat4_e2m1fn, 4, 2, NULL)

_registering = False

cdef DType _float32 = float32

# Other spellings NumPy and PyTorch users write, where they mean one type in both: NumPy's
# sized type strings ("f4", "<i8", "?") are parsed by _dtype_from_type_string, and these C
# type names mean the same type in NumPy and in PyTorch (or in NumPy alone).
cdef dict _dtype_aliases = {
    "half": float16, "single": float32, "double": float64,
    "csingle": complex64, "cdouble": complex128, "short": int16, "ushort": uint16,
}

# Names that mean one type in NumPy and another in PyTorch (or in dlinterop's own inference):
# refused, saying what each reads, rather than silently picking one.
cdef dict _ambiguous_dtype_names = {
    "float": "NumPy reads 'float' as float64, PyTorch as float32; say 'float32' or 'float64'",
    "int": "NumPy reads 'int' as int64, PyTorch as int32; say 'int32' or 'int64'",
    "long": "'long' is 32 bits on Windows and 64 elsewhere; say 'int32' or 'int64'",
    "byte": "NumPy reads 'byte' as int8, PyTorch as uint8; say 'int8' or 'uint8'",
    "cfloat": ("NumPy 1.x read 'cfloat' as complex128, PyTorch reads it as complex64; say "
               "'complex64' or 'complex128'"),
    "complex": ("NumPy reads 'complex' as complex128, dl.full infers complex64 from a "
                "Python complex; say 'complex64' or 'complex128'"),
}

# Python's own number types, as NumPy reads them (np.dtype(float) is float64): int is
# int64, NumPy 2's default integer on every 64-bit platform (Windows too since NumPy 2.0)
# and PyTorch's (torch.tensor([1]) is int64). Only the types: the strings "float" and "int"
# stay ambiguous (above), since PyTorch reads them as float32 and int32.
cdef dict _python_type_dtypes = {bool: bool_, int: int64, float: float64, complex: complex128}

cdef dict _type_string_kinds = {"b": kDLBool, "i": kDLInt, "u": kDLUInt, "f": kDLFloat,
                                "c": kDLComplex}


cdef DType _dtype_from_type_string(str s):
    """The DType of a NumPy array-protocol type string with an explicit size ("f4", "<i8",
    "=c16", "|b1", "?"), or None when s is none."""
    cdef int nbytes
    if s == "?":
        return bool_
    if len(s) > 2 and s[0] in "<>=|":
        if s[0] == ">" and s[2:] != "1":
            raise ValueError(f"non-native byte order {s!r} has no DLPack data type")
        s = s[1:]
    if len(s) < 2 or s[0] not in _type_string_kinds or not s[1:].isdigit() \
            or not s[1:].isascii() or s[1] == "0":
        return None
    nbytes = int(s[1:]) if len(s) <= 3 else 0
    if s[0] == "b":
        return bool_ if nbytes == 1 else None
    return _dtype_by_key.get(_dtype_key(_type_string_kinds[s[0]], 8 * nbytes, 1)) \
        if 0 < nbytes <= 16 else None


cdef DType _dtype_from_other_name(str name):
    """The DType an alias or type string names; else ValueError listing the valid names and
    the nearest one."""
    found = _dtype_aliases.get(name)
    if found is None:
        found = _dtype_from_type_string(name)
    if found is not None:
        return found
    reason = _ambiguous_dtype_names.get(name)
    if reason is not None:
        raise ValueError(f"data type name {name!r} is ambiguous: {reason}")
    import difflib
    valid = list(_dtype_by_name)
    near = difflib.get_close_matches(name.lower(), valid + list(_dtype_aliases), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else "."
    raise ValueError(f"unknown data type name {name!r}{hint} Valid names: "
                     f"{', '.join(valid)} (also NumPy type strings such as 'f4' or '<i8', "
                     f"and {', '.join(repr(a) for a in _dtype_aliases)})")


cdef DType dtype_from_dl(DLDataType dt):
    """The interned DType for a DLDataType, or None when dlinterop has none for it (a
    Tensor's always has one: imports refuse the others)."""
    return _dtype_by_key.get(_dtype_key(dt.code, dt.bits, dt.lanes))


cdef str dtype_text(DLDataType dt):
    """For messages: the DType's name, or "(code, bits, lanes)" for a triple dlinterop has
    no DType for (a C caller's or a producer's). Never raises but MemoryError."""
    cdef DType found = dtype_from_dl(dt)
    if found is None:
        return f"({dt.code}, {dt.bits}, {dt.lanes})"
    return found.name


cdef bint _valid_dtype_nogil(DLDataType dt) noexcept nogil:
    """True for exactly the (code, bits, lanes) triples that have a DType, read from the
    table _register_dtype fills, so that the registry above is the only list of types."""
    if dt.code > kDLBcomplex or dt.lanes > 8 * sizeof(_registered_lanes[0][0]):
        return False
    return (_registered_lanes[dt.code][dt.bits] >> (dt.lanes - 1)) & 1 if dt.lanes else False


cdef inline const char* _buffer_format_of(DLDataType dt) noexcept nogil:
    """The buffer-protocol format of a registered type (its DType's buffer_format), NULL
    when it has none."""
    if dt.lanes != 1 or dt.bits & 7 or dt.bits > 128 or dt.code > kDLBcomplex:
        return NULL
    return _buffer_formats[dt.code][item_bytes(dt)]


cdef extern from "dtype_bits.h":
    bint dli_is_packed(DLDataType dt) noexcept nogil


cdef inline bint _is_packed_subbyte(DLDataType dt) noexcept nogil:
    """Whether dt's elements are packed, several to a byte (src/dtype_bits.h's rule)."""
    return dli_is_packed(dt)


cdef DType _dtype_from_numpy(object x):
    import numpy
    cdef object npdt = numpy.dtype(x)
    if not npdt.isnative and npdt.itemsize > 1:
        raise ValueError(f"non-native byte order {npdt.str!r} has no DLPack data type")
    # NumPy's and ml_dtypes' names are DLPack's: float32, bool, complex64, bfloat16, ...
    found = _dtype_by_name.get(npdt.name)
    if found is None:
        raise ValueError(f"NumPy dtype {npdt!r} has no DLPack data type")
    return found


def dtype(x):
    """Return the DType for `x`: a DType, a name ("float32", "bfloat16", ...; also NumPy's
    sized type strings such as "f4" or "<i8", and "half", "single", "double"), a NumPy dtype
    or scalar type (ml_dtypes types included), a torch dtype, or a (code, bits, lanes)
    tuple; Python's bool, int, float and complex as NumPy reads them (bool, int64, float64,
    complex128). A name that NumPy and PyTorch read differently ("float", "int") is
    refused."""
    if type(x) is DType:
        return x
    if type(x) is str:
        found = _dtype_by_name.get(x)
        if found is None:
            return _dtype_from_other_name(x)
        return found
    if type(x) is tuple:
        if len(x) != 3 or not all(isinstance(v, int) for v in x):
            raise TypeError(f"a data type tuple is (code, bits, lanes) of ints, got {x!r}")
        code, bits, lanes = x
        if not (0 <= code < 256 and 0 <= bits < 256 and 0 <= lanes < 65536):
            raise ValueError(f"no DLPack data type has (code, bits, lanes) = {x!r}")
        found = _dtype_by_key.get(_dtype_key(code, bits, lanes))
        if found is None:
            raise ValueError(f"no DLPack data type has (code, bits, lanes) = {x!r}")
        return found
    cls = type(x)
    if cls is type:
        found = _python_type_dtypes.get(x)
        if found is not None:
            return found
    module = getattr(cls, "__module__", "") or ""
    if module == "torch" and cls.__name__ == "dtype":
        name = str(x).rpartition(".")[2]
        found = _dtype_by_name.get(name)
        if found is None:
            raise ValueError(f"{x} has no DLPack data type")
        return found
    numpy = _module_if_run("numpy")
    if numpy is not None and (isinstance(x, numpy.dtype) or (
            isinstance(x, type) and issubclass(x, numpy.generic))):
        return _dtype_from_numpy(x)
    if hasattr(x, "__dlpack_data_type__"):
        return dtype(tuple(x.__dlpack_data_type__()))
    raise TypeError(
        f"cannot interpret {x!r} as a data type; pass a dl.DType, a name such as 'float32', "
        "a NumPy dtype or a (code, bits, lanes) tuple")


cdef DType _dtype_from_buffer_format(const char* fmt, Py_ssize_t itemsize):
    """The DType of a buffer-protocol element, or None when it has none."""
    if fmt == NULL:
        return uint8 if itemsize == 1 else None
    cdef bytes f = fmt
    if f[:1] in (b"@", b"=", b"<"):
        f = f[1:]
    elif f[:1] in (b">", b"!"):
        if itemsize != 1:
            return None
        f = f[1:]
    if f == b"?":
        return bool_ if itemsize == 1 else None
    if f in (b"Zf", b"Zd"):
        return {8: complex64, 16: complex128}.get(itemsize)
    if len(f) != 1:
        return None
    if f in b"bhilqn":
        return {1: int8, 2: int16, 4: int32, 8: int64}.get(itemsize)
    if f in b"BHILQNc":
        return {1: uint8, 2: uint16, 4: uint32, 8: uint64}.get(itemsize)
    if f in b"efd":
        return {2: float16, 4: float32, 8: float64}.get(itemsize)
    return None
