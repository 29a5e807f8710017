"""What the tests of values read in C share: the two references (the Python reader, NumPy or
ml_dtypes), forged tensors of any layout, and the bit patterns worth reading."""

import ctypes
import itertools
import struct

import numpy as np

import dlinterop as dl
from dlinterop._lib import values as python_reader

from forge import c_strides, forge

ALL_DTYPES = sorted({v for v in vars(dl).values() if isinstance(v, dl.DType)}, key=str)
INT_CODES = (0, 1)  # kDLInt, kDLUInt


def width(dt):
    return dt.bits * dt.lanes


def is_packed(dt):
    return width(dt) < 8


def same(a, b):
    """a and b are the same values, bit for bit: the same types, floats with the same bit
    pattern (NaN payloads and -0.0 too), the same nesting."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) is complex:
        return same(a.real, b.real) and same(a.imag, b.imag)
    return a == b


def forged(dt, shape, strides=None, byte_offset=0, device=(1, 0), data=None, seed=0):
    """A forged tensor of dt over a buffer of random bytes (or `data` from element 0 on)."""
    f = forge(
        shape=shape,
        dtype=dt.__dlpack_data_type__(),
        strides=strides,
        byte_offset=byte_offset,
        device=device,
    )
    buffer = np.frombuffer(f.data, dtype=np.uint8)
    buffer[:] = np.random.default_rng(seed).integers(0, 256, buffer.size, dtype=np.uint8)
    if data is not None:
        start = f.element_ptr - ctypes.addressof(f.data)
        buffer[start : start + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return f


def c_order_raw(f, dt):
    """The forged tensor's elements in C order as the Python reader takes them: their
    bytes, or one code a byte for the packed sub-byte types."""
    buffer = bytes(f.data) + b"\0"
    element0 = f.element_ptr - ctypes.addressof(f.data)
    strides = f.strides if f.strides is not None else c_strides(f.shape)
    out = bytearray()
    for index in itertools.product(*[range(n) for n in f.shape]):
        e = sum(i * s for i, s in zip(index, strides))
        if is_packed(dt):
            bit = element0 * 8 + e * width(dt)
            word = buffer[bit >> 3] | buffer[(bit >> 3) + 1] << 8
            out.append((word >> (bit & 7)) & ((1 << width(dt)) - 1))
        else:
            n = width(dt) // 8
            out += buffer[element0 + e * n : element0 + (e + 1) * n]
    return bytes(out)


def python_values(t, raw):
    return python_reader.values(t, memoryview(raw))


def pack(dt, codes):
    """The bytes of `codes` packed as DLPack packs sub-byte elements (little bit-endian)."""
    bits = width(dt)
    value = sum(c << (i * bits) for i, c in enumerate(codes))
    return value.to_bytes((len(codes) * bits + 7) // 8, "little")


def _hex(text):
    return [int(word, 16) for word in text.split()]


# Bit patterns of each float width: the zeros, the infinities, quiet and signalling NaNs of
# either sign with payloads, the smallest and largest subnormals and normals, a few others.
FLOAT_SPECIALS = {
    16: _hex(
        "0000 8000 7C00 FC00 7E00 FE00 7C01 7D55 FD55 0001 8001 03FF 0400 7BFF FBFF 3C00 BC00 3555"
    ),
    32: _hex(
        "00000000 80000000 7F800000 FF800000 7FC00000 FFC00000 7F800001 7FA00000"
        " FFA5A5A5 7FFFFFFF 00000001 80000001 007FFFFF 00800000 7F7FFFFF FF7FFFFF"
        " 3F800000 BF800000 3EAAAAAB 4B800001 5F000000"
    ),
    64: _hex(
        "0 8000000000000000 7FF0000000000000 FFF0000000000000 7FF8000000000000"
        " FFF8000000000000 7FF0000000000001 7FF4000000000000 FFFA5A5A5A5A5A5A 1"
        " 800FFFFFFFFFFFFF 0010000000000000 7FEFFFFFFFFFFFFF 3FF0000000000000"
        " BFF0000000000000 3FD5555555555555 4340000000000001 C3E0000000000000"
    ),
}


def int_specials(bits):
    """Bit patterns of the extremes of a `bits`-bit integer, either signedness."""
    mask = (1 << bits) - 1
    top = 1 << (bits - 1)
    values = [0, 1, -1, 2, top - 1, -top, top - 2, -top + 1, mask - 1]
    values += [(1 << 24) + 1, (1 << 53) + 1, -(1 << 53) - 1, (1 << 63) + 1]
    return sorted({v & mask for v in values})


def patterns(dt, extra=64):
    """Element bit patterns of dt: all of them for types of at most 16 bits, else the
    special ones (each lane's, for the complex types) and `extra` random ones. Each is
    the element's bytes, or a code for the packed sub-byte types."""
    bits, n = width(dt), width(dt) // 8
    if bits < 8:
        return list(range(1 << bits))
    if bits <= 16:
        return [c.to_bytes(n, "little") for c in range(1 << bits)]
    if dt.code in INT_CODES:
        special = [v.to_bytes(n, "little") for v in int_specials(bits)]
    elif dt.code == 2:
        special = [v.to_bytes(n, "little") for v in FLOAT_SPECIALS[bits]]
    else:  # complex (5) and bcomplex (18): pairs of special halves
        half = FLOAT_SPECIALS[bits // 2] if dt.code == 5 else [v >> 16 for v in FLOAT_SPECIALS[32]]
        special = [
            re.to_bytes(n // 2, "little") + im.to_bytes(n // 2, "little")
            for re, im in itertools.product(half, half)
        ]
    rng = np.random.default_rng(bits)
    return special + [rng.bytes(n) for _ in range(extra)]


def pattern_tensor(dt, pats):
    """A 1-d forged tensor holding the patterns, and its reference values."""
    data = pack(dt, pats) if is_packed(dt) else b"".join(pats)
    f = forged(dt, (len(pats),), data=data)
    t = dl.from_dlpack(f.capsule)
    return f, t, python_values(t, c_order_raw(f, dt))
