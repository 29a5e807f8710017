"""What the property tests share: hypothesis's profiles, the dtypes and layouts they draw, and
the readers of what crossed.

Profiles (HYPOTHESIS_PROFILE=name; CI=true picks "ci"):
  default   200 examples per property, the suite's everyday run
  ci        the same count, derandomized and without the example database
  thorough  5,000 examples per property:
            HYPOTHESIS_PROFILE=thorough pytest tests/test_properties*.py
"""

import ctypes
import math
import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import dlinterop as dl

from forge import (
    c_strides,
    forge,
)

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("default", max_examples=200, **_COMMON)
settings.register_profile(
    "ci", max_examples=200, derandomize=True, database=None, print_blob=True, **_COMMON
)
settings.register_profile("thorough", max_examples=5_000, **_COMMON)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)

# Every (code, bits, lanes) DLPack 1.3 defines.
DTYPES = [
    (0, 8, 1),
    (0, 16, 1),
    (0, 32, 1),
    (0, 64, 1),
    (1, 8, 1),
    (1, 16, 1),
    (1, 32, 1),
    (1, 64, 1),
    (2, 16, 1),
    (2, 32, 1),
    (2, 64, 1),
    (4, 16, 1),
    (5, 32, 1),
    (5, 64, 1),
    (5, 128, 1),
    (6, 8, 1),
    *((code, 8, 1) for code in range(7, 15)),
    (15, 6, 1),
    (16, 6, 1),
    (17, 4, 1),
    (17, 4, 2),
]


DLPACK_FIELDS = ("live_buffers", "live_bytes", "live_exports")


def _counters():
    stats = dl.memory_stats()
    return {key: stats[key] for key in DLPACK_FIELDS}


def _packed(dtype):
    return dtype[1] * dtype[2] < 8


def _itemsize(dtype):
    return (dtype[1] * dtype[2] + 7) // 8


@st.composite
def layouts(draw, dtypes=DTYPES):
    """(dtype, shape, strides or None, byte_offset)."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(0, 6))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    kind = draw(st.sampled_from(["null", "c", "any"]))
    if kind == "null":
        strides = None
    elif kind == "c" or _packed(dtype):
        # Packed sub-byte elements have no address of their own: only compact layouts.
        strides = c_strides(shape)
    else:
        strides = tuple(draw(st.lists(st.integers(-6, 6), min_size=ndim, max_size=ndim)))
    byte_offset = draw(st.sampled_from([0, 0, 1, 3, 8, 64, 255]))
    return dtype, shape, strides, byte_offset


def _fill_pattern(address, size, seed=7):
    pattern = ((np.arange(size, dtype=np.int64) * 37 + seed) % 251).astype(np.uint8)
    ctypes.memmove(address, pattern.ctypes.data, size)


def _expected_bytes(read, element0, dtype, shape, strides):
    """The tensor's bytes in C order, gathered by hand: read(address, n) -> bytes."""
    count = math.prod(shape)
    if count == 0:
        return b""
    if _packed(dtype):
        return read(element0, (count * dtype[1] * dtype[2] + 7) // 8)
    itemsize = _itemsize(dtype)
    if strides is None:
        strides = c_strides(shape)
    out = bytearray()
    for index in np.ndindex(*shape):
        offset = sum(i * s for i, s in zip(index, strides)) * itemsize
        out += read(element0 + offset, itemsize)
    return bytes(out)


def _tensor_bytes(t):
    """The values of `t` in C order, through dlinterop's own strided copy."""
    copied = t.copy()
    assert copied.is_contiguous()
    return ctypes.string_at(copied.data_ptr, copied.nbytes)


def _forged_source(dtype, shape, strides, byte_offset, readonly, version, versioned):
    f = forge(
        shape=shape,
        dtype=dtype,
        strides=strides,
        byte_offset=byte_offset,
        versioned=versioned,
        readonly=readonly and versioned,
        version=version if versioned else (1, 3),
    )
    _fill_pattern(ctypes.addressof(f.data), len(f.data))
    return f
