"""dl.empty, zeros, ones and full: shapes, dtypes, the values they write, alignment, bad shapes."""

import math

import numpy as np
import pytest

import dlinterop as dl
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

from tensor_cases import (
    ALL_NAMES,
    ML_NAMES,
    PACKED_NAMES,
    _raw,
)

ml_dtypes = pytest.importorskip("ml_dtypes")


NUMPY_NAMES = list(numpy_shared_dtypes())


FULL_VALUES = {
    "bool": True,
    "int8": -128,
    "int16": -3,
    "int32": -3,
    "int64": -(2**62),
    "uint8": 255,
    "uint16": 7,
    "uint32": 7,
    "uint64": 2**64 - 1,
    "float16": -1.5,
    "float32": -1.5,
    "float64": -1.5,
    "complex64": 1.5 - 2j,
    "complex128": 1.5 - 2j,
}


def _packed_codes(raw, count, bits):
    """The `count` little bit-endian `bits`-bit codes packed in `raw`."""
    word = int.from_bytes(raw, "little")
    return [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(count)]


def _ml_code(name, value):
    return int(np.array([value], dtype=getattr(ml_dtypes, name)).view(np.uint8)[0])


# -- creation ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_empty_and_zeros_have_shape_dtype_and_c_strides(make, name):
    t = make((2, 3, 4), name)
    assert t.shape == (2, 3, 4)
    assert t.strides == (12, 4, 1)
    assert t.dtype is dl.dtype(name)
    assert t.device == "cpu"
    assert t.ndim == 3
    assert t.size == 24
    assert t.nbytes == math.ceil(24 * t.dtype.bits * t.dtype.lanes / 8)
    assert not t.readonly
    assert t.owner is None
    assert t.is_contiguous()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_zeros_is_all_zero_bytes(name):
    t = dl.zeros((3, 5), name)
    assert _raw(t) == bytes(t.nbytes)


def test_default_dtype_is_float32():
    assert dl.empty(3).dtype is dl.float32
    assert dl.zeros(3).dtype is dl.float32


@pytest.mark.parametrize("shape", [3, (3,), [3], (np.int64(3),)])
def test_shape_accepts_int_and_sequences_of_index(shape):
    assert dl.empty(shape).shape == (3,)


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_full_reads_back_through_numpy(name):
    value = FULL_VALUES[name]
    t = dl.full((2, 3), value, name)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(name)
    assert np.array_equal(a, np.full((2, 3), value, dtype=name))


@pytest.mark.parametrize("name", ML_NAMES)
def test_full_reads_back_through_ml_dtypes(name):
    value = 4.0 if name == "float8_e8m0fnu" else -1.5
    t = dl.full((2, 3), value, name)
    a = np.frombuffer(_raw(t), dtype=getattr(ml_dtypes, name))
    assert np.array_equal(a.astype(np.float32), np.full(6, value, np.float32))


def test_full_complex32_is_pairs_of_float16():
    t = dl.full(4, 1.5 - 2j, "complex32")
    assert np.array_equal(np.frombuffer(_raw(t), np.float16), [1.5, -2.0] * 4)


@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_full_float4_packs_two_codes_per_byte(size):
    t = dl.full(size, 1.5, "float4_e2m1fn")
    assert t.nbytes == math.ceil(size * 4 / 8)
    assert _packed_codes(_raw(t), size, 4) == [_ml_code("float4_e2m1fn", 1.5)] * size


@pytest.mark.parametrize("size", [1, 3])
def test_full_float4_x2_fills_both_lanes(size):
    t = dl.full(size, 1.5, "float4_e2m1fn_x2")
    assert t.nbytes == size
    assert _packed_codes(_raw(t), 2 * size, 4) == [_ml_code("float4_e2m1fn", 1.5)] * (2 * size)


@pytest.mark.parametrize("name", ["float6_e2m3fn", "float6_e3m2fn"])
@pytest.mark.parametrize("size", [4, 5])
def test_full_float6_packs_six_bit_codes(name, size):
    t = dl.full(size, 1.5, name)
    assert t.nbytes == math.ceil(size * 6 / 8)
    assert _packed_codes(_raw(t), size, 6) == [_ml_code(name, 1.5)] * size


@pytest.mark.parametrize("name", PACKED_NAMES)
@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 7, 9])
def test_packed_subbyte_nbytes_is_ceil_of_bits(name, size):
    dt = dl.dtype(name)
    t = dl.empty(size, name)
    assert t.nbytes == math.ceil(size * dt.bits * dt.lanes / 8)
    assert t.itemsize == 1


@pytest.mark.parametrize(
    "value, name", [(True, "bool"), (3, "int64"), (1.5, "float32"), (1.5 + 1j, "complex64")]
)
def test_full_infers_dtype_from_value(value, name):
    t = dl.full(2, value)
    assert t.dtype == name
    assert np.from_dlpack(t).tolist() == [value, value]


def test_full_out_of_range_integer_is_overflow_error():
    with pytest.raises(OverflowError):
        dl.full(1, 300, "int8")


# -- alignment ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("shape", [1, (3, 5), 1000])
def test_default_alignment_is_256(name, shape):
    assert dl.empty(shape, name).data_ptr % 256 == 0


@pytest.mark.parametrize("alignment", [64, 4096, 16, 8])
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_custom_alignment(make, alignment):
    for _ in range(4):
        assert make(17, "float64", alignment=alignment).data_ptr % alignment == 0


def test_full_honours_alignment():
    assert dl.full(5, 1.0, alignment=4096).data_ptr % 4096 == 0


@pytest.mark.parametrize("alignment", [0, -1, 3, 12, 100, -256])
def test_alignment_not_power_of_two_is_value_error(alignment):
    with pytest.raises(ValueError):
        dl.empty(4, alignment=alignment)


@pytest.mark.parametrize(
    "name, alignment", [("float32", 2), ("float64", 4), ("complex128", 8), ("int16", 1)]
)
def test_alignment_smaller_than_itemsize_is_value_error(name, alignment):
    with pytest.raises(ValueError):
        dl.empty(4, name, alignment=alignment)


def test_alignment_one_is_fine_for_single_bytes():
    assert dl.empty(4, "int8", alignment=1).shape == (4,)


# -- bad shapes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [-1, (2, -1), (-3, 0), (1,) * 65, (2**63,), (2**32, 2**32), (2**62, 4)]
)
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_bad_shape_is_value_error(make, shape):
    with pytest.raises(ValueError):
        make(shape)


@pytest.mark.parametrize("shape", [1.5, (2, 1.5), "ab", None, (2, None), object(), ((2,),)])
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_non_int_shape_is_type_error(make, shape):
    with pytest.raises(TypeError):
        make(shape)


def test_64_dims_is_the_maximum():
    t = dl.zeros((1,) * 63 + (2,), "int8")
    assert t.ndim == 64
    assert t.shape == (1,) * 63 + (2,)
    assert np.from_dlpack(t).shape == t.shape


def test_bad_shape_for_full_is_value_error():
    with pytest.raises(ValueError):
        dl.full((2, -1), 1.0)
