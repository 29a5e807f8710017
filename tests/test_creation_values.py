"""The values creation writes, on its common paths against its general one: dl.zeros,
dl.ones and dl.full give the same bytes whichever path a value takes (support/
creation_cases.py), NumPy's where NumPy has the type; and dl.memory_stats() counts every
path's allocations exactly."""

import struct

import numpy as np
import pytest

import dlinterop as dl
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

from creation_cases import ALL_NAMES, Float, Int, _general, _outcome
from tensor_cases import _raw

ml_dtypes = pytest.importorskip("ml_dtypes")

NUMPY_NAMES = list(numpy_shared_dtypes())


def _same(first, second, value, general):
    """Two outcomes alike, an error message that shows the value as given aside ("True
    does not fit" against "1 does not fit")."""
    if isinstance(first[0], type) and isinstance(second[0], type):
        return first[0] is second[0] and first[1].replace(repr(value), "<value>", 1) == second[
            1
        ].replace(repr(general), "<value>", 1)
    return first == second


# -- values: zeros, ones, full -----------------------------------------------------------


@pytest.mark.parametrize("nbytes", [64, 100 << 10, 256 << 10, 4 << 20])
def test_zeros_over_memory_just_freed_with_other_bytes(nbytes):
    # A block freed a moment ago comes back from the heap, not zeroed by the kernel.
    for _ in range(3):
        dirty = dl.full(nbytes, 0xA5, "uint8")
        del dirty
        assert _raw(dl.zeros(nbytes, "uint8")) == bytes(nbytes)


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("size", [0, 1, 7, 33, 1000])
def test_zeros_and_ones_of_every_dtype(name, size):
    dt = dl.dtype(name)
    assert _raw(dl.zeros(size, name)) == bytes(dl.zeros(size, name).nbytes)
    one = True if dt is dl.bool_ else 1
    assert _same(_outcome(dl.ones, size, name), _outcome(dl.full, size, Int(one), name), 1, 1)


@pytest.mark.parametrize("name", NUMPY_NAMES)
@pytest.mark.parametrize("size", [1, 5, 16, 67, 1000, 100_000])
def test_ones_and_full_match_numpy(name, size):
    assert np.array_equal(np.from_dlpack(dl.ones(size, name)), np.ones(size, name))
    value = {"bool": True, "uint8": 200, "int8": -7}.get(name, 3)
    assert np.array_equal(np.from_dlpack(dl.full(size, value, name)), np.full(size, value, name))


VALUES = [
    0,
    1,
    -1,
    True,
    False,
    2.5,
    -2.5,
    0.0,
    -0.0,
    0.1,
    1e-46,
    65504.0,
    65520.0,
    3.4028234663852886e38,
    3.4028235677973366e38,
    3.5e38,
    -3.5e38,
    1e300,
    float("inf"),
    float("-inf"),
    float("nan"),
    -float("nan"),
    127,
    128,
    -128,
    -129,
    255,
    256,
    2**15,
    2**31 - 1,
    2**31,
    2**32,
    -(2**31) - 1,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    2**100,
]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_full_encodes_every_value_as_the_general_path(name):
    for value in VALUES:
        general = _general(value)
        common = _outcome(dl.full, (3,), value, name)
        assert _same(common, _outcome(dl.full, (3,), general, name), value, general), value


@pytest.mark.parametrize("name", ["float32", "float64", "complex64", "complex128"])
def test_full_floats_are_struct_s_rounding(name):
    part = {"float32": "f", "float64": "d", "complex64": "f", "complex128": "d"}[name]
    for value in [0.1, 1 / 3, 3.4028235e38, 1e-45, -(2**60) + 1, 2**24 + 1, 7]:
        element = struct.pack("<" + part, value)
        if name.startswith("complex"):
            element += struct.pack("<" + part, 0.0)
        assert _raw(dl.full(2, value, name)) == element * 2


def test_full_infers_its_dtype_from_the_value_on_both_paths():
    assert dl.full(2, 3).dtype is dl.full(2, Int(3)).dtype is dl.int64
    assert dl.full(2, 3.0).dtype is dl.full(2, Float(3.0)).dtype is dl.float32
    assert dl.full(2, True).dtype is dl.bool_
    assert dl.full(2, np.float64(3.0)).dtype is dl.float32  # a float subclass
    assert dl.full(2, np.int64(3)).dtype is dl.int64  # a number, as PyTorch reads it
    with pytest.raises(TypeError, match="cannot infer a dtype from"):
        dl.full(2, "3")


def test_full_out_of_range_keeps_its_message():
    with pytest.raises(OverflowError, match="300 does not fit in int8"):
        dl.full(1, 300, "int8")
    with pytest.raises(OverflowError, match="-1 does not fit in uint64"):
        dl.full(1, -1, "uint64")
    with pytest.raises(ValueError):
        dl.full(1, float("nan"), "int32")


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e3m2fn", "int4", "uint2", "int1"])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 9, 1001])
def test_ones_of_packed_types_pack_every_code(name, size):
    assert _outcome(dl.ones, size, name) == _outcome(dl.full, size, 1, name)
    if name != "int1":  # 1 does not fit in int1 (-1 to 0)
        assert dl.ones(size, name).tolist() == [1] * size


@pytest.mark.parametrize("itemsize", [2, 4, 8, 16])
@pytest.mark.parametrize("count", [1, 3, 31, 32, 33, 127, 128, 129, 4097])
def test_fill_writes_exactly_its_items(itemsize, count):
    # Around the fill's block and word boundaries: every item, and nothing past the last.
    name = {2: "int16", 4: "int32", 8: "int64", 16: "complex128"}[itemsize]
    value = -2.5 + 1j if itemsize == 16 else -2
    base = dl.full(count + 8, 0x11, "uint8")
    target = dl.full(count, value, name)
    element = _raw(dl.full(1, value, name))
    assert _raw(target) == element * count
    assert _raw(base) == b"\x11" * (count + 8)


# -- memory_stats ------------------------------------------------------------------------


def test_memory_stats_count_every_path_exactly():
    made = [
        lambda: dl.empty((16,)),
        lambda: dl.zeros(16, "float64"),
        lambda: dl.zeros(200 << 10, "uint8"),
        lambda: dl.ones((4, 4), dl.int32),
        lambda: dl.full(3, 2.0),
        lambda: dl.full(5, 1, "int4"),
        lambda: dl.arange(100),
        lambda: dl.arange(0.0, 1.0, 0.25),
        lambda: dl.empty((1024, 1024), dtype=dl.float32),
    ]
    for make in made:
        before = dl.memory_stats()
        tensors = [make() for _ in range(5)]
        during = dl.memory_stats()
        assert during["live_buffers"] == before["live_buffers"] + 5
        assert during["live_bytes"] == before["live_bytes"] + sum(t.nbytes for t in tensors)
        assert during["total_allocations"] == before["total_allocations"] + 5
        assert during["peak_bytes"] >= during["live_bytes"]
        del tensors
        after = dl.memory_stats()
        assert after["live_buffers"] == before["live_buffers"]
        assert after["live_bytes"] == before["live_bytes"]
