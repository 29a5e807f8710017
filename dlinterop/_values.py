"""A Tensor's element values as Python objects (Tensor.tolist, Tensor.item, float(t), ...),
for every DLPack data type, with the standard library alone: the struct module's formats
where it has one, bfloat16 through float32's bit pattern, complex types as pairs, the
float8/float6/float4 formats through dlinterop._minifloat, packed sub-byte codes little
bit-endian (as dl.full writes them). Vector types (lanes > 1) give a tuple per element.
"""
import struct

from dlinterop import _minifloat

# data type code -> how one lane is read
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6
_INT_FORMATS = {8: "b", 16: "h", 32: "i", 64: "q"}
_UINT_FORMATS = {8: "B", 16: "H", 32: "I", 64: "Q"}
_FLOAT_FORMATS = {16: "e", 32: "f", 64: "d"}


def _minifloat_name(dtype):
    return "float4_e2m1fn" if dtype.name == "float4_e2m1fn_x2" else dtype.name


def _lanes(raw, dtype, count):
    """The `count * lanes` lane values in the C-order bytes `raw` (a memoryview of bytes)."""
    code, bits, lanes = dtype.__dlpack_data_type__()
    n = count * lanes
    if code == _BOOL:
        return [b != 0 for b in raw[:n]]
    if code in (_INT, _UINT) and bits in _INT_FORMATS:
        fmt = (_INT_FORMATS if code == _INT else _UINT_FORMATS)[bits]
        return list(struct.unpack(f"<{n}{fmt}", raw[: n * bits // 8]))
    if code == _FLOAT and bits in _FLOAT_FORMATS:
        return list(struct.unpack(f"<{n}{_FLOAT_FORMATS[bits]}", raw[: n * bits // 8]))
    if code == _BFLOAT and bits == 16:
        halves = struct.unpack(f"<{n}H", raw[: n * 2])
        return list(struct.unpack(f"<{n}f", struct.pack(f"<{n}I", *(h << 16 for h in halves))))
    if code == _COMPLEX and bits // 2 in _FLOAT_FORMATS:
        parts = struct.unpack(f"<{2 * n}{_FLOAT_FORMATS[bits // 2]}", raw[: n * bits // 8])
        return [complex(parts[i], parts[i + 1]) for i in range(0, 2 * n, 2)]
    name = _minifloat_name(dtype)
    if name in _minifloat.FORMATS:
        table = [_minifloat.decode(name, c) for c in range(1 << bits)]
        if bits == 8:
            return [table[b] for b in raw[:n]]
        packed = int.from_bytes(raw, "little")
        mask = (1 << bits) - 1
        return [table[(packed >> (i * bits)) & mask] for i in range(n)]
    raise TypeError(f"dlinterop cannot read {dtype.name} values")


def _nested(flat, shape):
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat[: shape[0]]
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nested(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def values(t, raw):
    """Nested lists of t's values (a scalar for a 0-d Tensor); raw: its bytes in C order."""
    dtype = t.dtype
    lanes = dtype.lanes
    count = t.size
    flat = _lanes(raw, dtype, count)
    if lanes > 1:
        flat = [tuple(flat[i:i + lanes]) for i in range(0, len(flat), lanes)]
    return _nested(flat, t.shape)
