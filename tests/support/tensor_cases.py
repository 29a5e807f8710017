"""What the Tensor tests share: dtype names by family, a Tensor's raw bytes, and the layouts
of one base array (LAYOUTS)."""

import ctypes

import numpy as np

ALL_NAMES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex32",
    "complex64",
    "complex128",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
    "float4_e2m1fn_x2",
]


ML_NAMES = [
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]


PACKED_NAMES = ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float4_e2m1fn_x2"]


def _raw(t):
    """The bytes of a C-contiguous CPU tensor."""
    return ctypes.string_at(t.data_ptr, t.nbytes)


def _write_pattern(t):
    """Fills a C-contiguous CPU tensor with a recognisable byte pattern; returns it."""
    pattern = bytes((i * 37 + 11) % 256 for i in range(t.nbytes))
    ctypes.memmove(t.data_ptr, pattern, t.nbytes)
    return pattern


def _base():
    return np.arange(60, dtype=np.float32).reshape(3, 4, 5)


LAYOUTS = {
    "c": (lambda: _base(), True),
    "zero_d": (lambda: np.array(1.0, np.float32), True),
    "offset_rows": (lambda: _base()[1:], True),
    "transposed": (lambda: _base().T, False),
    "step": (lambda: _base()[:, :, ::2], False),
    "negative": (lambda: _base()[::-1], False),
    "broadcast": (lambda: np.broadcast_to(np.arange(5, dtype=np.float32), (4, 5)), False),
    "zero_size_transposed": (lambda: np.empty((0, 3), np.float32).T, True),
    "zero_size_step": (lambda: _base()[:, :0, ::2], True),
    "size_one_odd_strides": (
        lambda: np.lib.stride_tricks.as_strided(
            np.zeros(64, np.float32), (1, 3, 1), (4 * 7, 4, 4 * 13)
        ),
        True,
    ),
    "broadcast_size_one": (lambda: np.broadcast_to(np.float32(2), (1, 1)), True),
}
