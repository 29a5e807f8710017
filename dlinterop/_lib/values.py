"""A Tensor's element values as Python objects (Tensor.tolist, Tensor.item, float(t), ...),
for every DLPack data type, with the standard library alone: the struct module's formats
where it has one, bfloat16 through float32's bit pattern, complex types as pairs, the
float8/float6/float4 formats through dlinterop._lib.minifloat, sub-byte integers as two's
complement codes. Vector types (lanes > 1) give a tuple per element. Every path is linear
in the number of elements; formatter() writes a value with as few digits as its type needs.

dlinterop's core reads values in C (src/values.h, dlinterop/core/values.pxi), to the same
bits; this reader serves what that one leaves to it (a data type it has no reader for, the
small float formats while another thread fills their tables) and is the reference the
tests hold it to. compare() and formatter() serve the comparisons (==, <, ...) and repr.
"""

import operator
import struct

from dlinterop._lib import minifloat as _minifloat

# data type code -> how one lane is read
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL, _BCOMPLEX = 0, 1, 2, 4, 5, 6, 18
_INT_FORMATS = {8: "b", 16: "h", 32: "i", 64: "q"}
_UINT_FORMATS = {8: "B", 16: "H", 32: "I", 64: "Q"}
_FLOAT_FORMATS = {16: "e", 32: "f", 64: "d"}


def _minifloat_name(dtype):
    return "float4_e2m1fn" if dtype.name == "float4_e2m1fn_x2" else dtype.name


def _bfloat16(halves):
    """The float values of bfloat16 bit patterns: the top half of float32's."""
    n = len(halves)
    return struct.unpack(f"<{n}f", struct.pack(f"<{n}I", *[h << 16 for h in halves]))


def _code_table(dtype, code, bits):
    """The value of every code of a sub-byte or 8-bit minifloat lane, or None."""
    if code == _INT and bits < 8:
        return [c - (1 << bits) if c >> (bits - 1) else c for c in range(1 << bits)]
    if code == _UINT and bits < 8:
        return list(range(1 << bits))
    name = _minifloat_name(dtype)
    if name in _minifloat.FORMATS:
        return [_minifloat.decode(name, c) for c in range(1 << bits)]
    return None


def _lanes(raw, dtype, count):
    """The `count * lanes` lane values of the C-order bytes `raw` (a memoryview of bytes);
    a packed sub-byte type's bytes come one code per byte (unpacked by the caller)."""
    code, bits, lanes = dtype.__dlpack_data_type__()
    n = count * lanes
    whole = raw[: count * dtype.itemsize]  # the elements' bytes, for the types of whole bytes
    if code == _BOOL:
        return [b != 0 for b in raw[:n]]
    if code in (_INT, _UINT) and bits in _INT_FORMATS:
        fmt = (_INT_FORMATS if code == _INT else _UINT_FORMATS)[bits]
        return list(struct.unpack(f"<{n}{fmt}", whole))
    if code == _FLOAT and bits in _FLOAT_FORMATS:
        return list(struct.unpack(f"<{n}{_FLOAT_FORMATS[bits]}", whole))
    if code == _BFLOAT and bits == 16:
        return list(_bfloat16(struct.unpack(f"<{n}H", whole)))
    if code == _COMPLEX and bits // 2 in _FLOAT_FORMATS:
        parts = struct.unpack(f"<{2 * n}{_FLOAT_FORMATS[bits // 2]}", whole)
        return [complex(parts[i], parts[i + 1]) for i in range(0, 2 * n, 2)]
    if code == _BCOMPLEX and bits == 32:
        parts = _bfloat16(struct.unpack(f"<{2 * n}H", whole))
        return [complex(parts[i], parts[i + 1]) for i in range(0, 2 * n, 2)]
    table = _code_table(dtype, code, bits)
    if table is not None:
        if bits * lanes < 8 or bits == 8:
            return [table[b] for b in raw[:n]]  # one code per byte
        if bits == 4:
            # Two lanes in a byte (float4_e2m1fn_x2), the first in the low bits.
            low = [table[b & 0xF] for b in raw[:count]]
            high = [table[b >> 4] for b in raw[:count]]
            out = [None] * n
            out[0::2] = low
            out[1::2] = high
            return out
    raise TypeError(f"dlinterop cannot read {dtype.name} values")


def _nested(flat, shape):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat[: shape[0]]
    step = len(flat) // shape[0] if shape[0] else 0
    # Made at its full length at once: a shape with a huge extent before a zero one fails
    # with MemoryError at once instead of appending empty lists for minutes.
    out = [None] * shape[0]
    inner = shape[1:]
    for i in range(shape[0]):
        out[i] = _nested(flat[i * step : (i + 1) * step], inner)
    return out


def flat(t, raw):
    """t's values in C order, one Python object each; raw: its bytes in C order."""
    lanes = t.dtype.lanes
    values = _lanes(raw, t.dtype, t.size)
    if lanes > 1:
        values = [tuple(values[i : i + lanes]) for i in range(0, len(values), lanes)]
    return values


def values(t, raw):
    """Nested lists of t's values (a scalar for a 0-d Tensor); raw: its bytes in C order."""
    return _nested(flat(t, raw), t.shape)


def broadcast_shape(a, b):
    """The shape two shapes broadcast to, by NumPy's rule (ValueError if they do not)."""
    ndim = max(len(a), len(b))
    a = (1,) * (ndim - len(a)) + tuple(a)
    b = (1,) * (ndim - len(b)) + tuple(b)
    shape = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shapes {a} and {b} cannot be broadcast together")
        shape.append(y if x == 1 else x)
    return tuple(shape)


def _steps(shape, full):
    """Strides (in elements of a C-order flat list) of `shape` read as broadcast to `full`:
    0 along the axes it repeats."""
    shape = (1,) * (len(full) - len(shape)) + tuple(shape)
    steps = [0] * len(full)
    step = 1
    for axis in range(len(full) - 1, -1, -1):
        steps[axis] = step if shape[axis] != 1 else 0
        step *= shape[axis]
    return steps


def _complex_order(op):
    """NumPy's order of complex numbers (real parts first, then imaginary ones; an order by
    the real parts holds only where neither imaginary part is NaN) as a comparison of two
    numbers, either of them complex."""

    def compare(x, y):
        x, y = complex(x), complex(y)
        xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
        by_real = op(xr, yr) and xr != yr and xi == xi and yi == yi
        return by_real or (xr == yr and op(xi, yi))

    return compare


# Python's rich comparison codes (Py_LT ... Py_GE), each as a function of two values.
_OPERATORS = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)


def compare(a, a_shape, b, b_shape, op):
    """Element-wise a OP b of two C-order flat value lists, broadcast as NumPy broadcasts
    (op: Python's rich comparison code, 0 for < to 5 for >=): (the flat bools, their
    shape). Values compare as Python numbers; complex ones in NumPy's order."""
    shape = broadcast_shape(a_shape, b_shape)
    if tuple(a_shape) == tuple(b_shape):
        pairs = zip(a, b)
    else:
        sa, sb = _steps(a_shape, shape), _steps(b_shape, shape)
        count = 1
        for extent in shape:
            count *= extent
        index = [0] * len(shape)
        ia = ib = 0
        picked = []
        for _ in range(count):
            picked.append((a[ia], b[ib]))
            for axis in range(len(shape) - 1, -1, -1):
                index[axis] += 1
                ia += sa[axis]
                ib += sb[axis]
                if index[axis] < shape[axis]:
                    break
                ia -= sa[axis] * shape[axis]
                ib -= sb[axis] * shape[axis]
                index[axis] = 0
        pairs = picked
    function = _OPERATORS[op]
    if op not in (2, 3) and a and b:  # the order: each list holds values of one type
        if type(a[0]) is tuple or type(b[0]) is tuple:
            raise TypeError("the elements of a vector type have no order")
        if type(a[0]) is complex or type(b[0]) is complex:
            function = _complex_order(function)
    return [function(x, y) for x, y in pairs], shape


def _round_trip(dtype):
    """A function giving the float of dtype nearest a float, for the float types narrower
    than Python's float; None for the others."""
    code, bits, _ = dtype.__dlpack_data_type__()
    if code in (_FLOAT, _COMPLEX) and (bits if code == _FLOAT else bits // 2) in (16, 32):
        fmt = "<" + _FLOAT_FORMATS[bits if code == _FLOAT else bits // 2]

        def nearest(x):
            try:
                return struct.unpack(fmt, struct.pack(fmt, x))[0]
            except OverflowError:
                return None

        return nearest
    if code in (_BFLOAT, _BCOMPLEX):

        def nearest(x):
            try:
                (pattern,) = struct.unpack("<I", struct.pack("<f", x))
            except OverflowError:
                return None
            pattern += 0x7FFF + ((pattern >> 16) & 1)
            return _bfloat16([(pattern >> 16) & 0xFFFF])[0]

        return nearest
    return None


def _shortest(x, nearest):
    """The shortest text that reads back as x in a type whose rounding `nearest` does (as
    NumPy prints float32: 1e-08, not 9.99999993922529e-09)."""
    if x != x or x in (float("inf"), float("-inf")) or x == 0:
        return repr(x)
    for digits in range(1, 18):
        candidate = float(f"{x:.{digits}g}")
        if nearest(candidate) == x:
            return repr(candidate)
    return repr(x)


def formatter(dtype):
    """A function writing one value of dtype as repr text, with the fewest digits that read
    back as the same value of that type."""
    nearest = _round_trip(dtype)
    if nearest is None:
        return repr
    if dtype.code in (_COMPLEX, _BCOMPLEX):

        def text(value):
            return repr(
                complex(
                    float(_shortest(value.real, nearest)), float(_shortest(value.imag, nearest))
                )
            )

        return text

    def text(value):
        return _shortest(value, nearest) if type(value) is float else repr(value)

    return text
