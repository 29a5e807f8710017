"""What the tests of bit patterns share: ml_dtypes where it is installed, the packed sub-byte
types, their reference values, and padded tensors forged."""

import ctypes
import itertools

import numpy as np
import pytest

from forge import (
    IS_SUBBYTE_TYPE_PADDED,
    forge,
)

try:
    import ml_dtypes
except ImportError:  # the tests that need its types skip; the others run without it
    ml_dtypes = None


def needs_ml_dtypes():
    if ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed")


# name -> (code, bits): every packed sub-byte type dlinterop has.
SUB_BYTE = {
    "int1": (0, 1),
    "int2": (0, 2),
    "int4": (0, 4),
    "uint1": (1, 1),
    "uint2": (1, 2),
    "uint4": (1, 4),
    "float6_e2m3fn": (15, 6),
    "float6_e3m2fn": (16, 6),
    "float4_e2m1fn": (17, 4),
}


def reference_values(name, codes):
    """The values of `codes` (one per byte, in the low bits) by ml_dtypes' own decoding;
    two's complement by hand for the integers."""
    code, bits = SUB_BYTE[name]
    if code in (0, 1):
        return [c - (1 << bits) if code == 0 and c >> (bits - 1) else c for c in codes]
    needs_ml_dtypes()
    array = np.asarray(codes, dtype=np.uint8).view(getattr(ml_dtypes, name))
    return (
        array.astype(np.float64).tolist()
        if name.startswith("float")
        else array.astype(np.int64).tolist()
    )


def forge_padded(name, shape, strides=None, byte_offset=0, flags=IS_SUBBYTE_TYPE_PADDED, seed=0):
    """A forged padded tensor of `name` holding random codes (high bits of each byte set
    too, which a reader must ignore), and the expected values in C order."""
    code, bits = SUB_BYTE[name]
    f = forge(
        shape=shape, dtype=(code, bits, 1), strides=strides, byte_offset=byte_offset, flags=flags
    )
    rng = np.random.default_rng(seed)
    buffer = np.frombuffer(f.data, dtype=np.uint8)
    buffer[:] = rng.integers(0, 256, buffer.size, dtype=np.uint8)
    element0 = f.element_ptr - ctypes.addressof(f.data)
    steps = (
        strides
        if strides is not None
        else [int(np.prod(shape[i + 1 :])) for i in range(len(shape))]
    )
    codes = [
        int(buffer[element0 + sum(i * s for i, s in zip(index, steps))]) & ((1 << bits) - 1)
        for index in itertools.product(*[range(n) for n in shape])
    ]
    return f, np.array(reference_values(name, codes)).reshape(shape).tolist()


INT_RANGES = {
    "int1": (-1, 0),
    "int2": (-2, 1),
    "int4": (-8, 7),
    "uint1": (0, 1),
    "uint2": (0, 3),
    "uint4": (0, 15),
}
