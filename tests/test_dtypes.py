"""dl.DType and dl.dtype() (every DLPack 1.3 data type): the constants' codes, bits and
lanes, what dl.dtype() takes and refuses, and the way to NumPy (to_numpy())."""

import pickle

import numpy as np
import pytest

import dlinterop as dl
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

ml_dtypes = pytest.importorskip("ml_dtypes")

# name -> (code, bits, lanes, itemsize), as DLPack 1.3 defines them (include/dlpack/dlpack.h).
DTYPES = {
    "bool": (6, 8, 1, 1),
    "int8": (0, 8, 1, 1),
    "int16": (0, 16, 1, 2),
    "int32": (0, 32, 1, 4),
    "int64": (0, 64, 1, 8),
    "uint8": (1, 8, 1, 1),
    "uint16": (1, 16, 1, 2),
    "uint32": (1, 32, 1, 4),
    "uint64": (1, 64, 1, 8),
    "float16": (2, 16, 1, 2),
    "float32": (2, 32, 1, 4),
    "float64": (2, 64, 1, 8),
    "bfloat16": (4, 16, 1, 2),
    "complex32": (5, 32, 1, 4),
    "complex64": (5, 64, 1, 8),
    "complex128": (5, 128, 1, 16),
    "float8_e3m4": (7, 8, 1, 1),
    "float8_e4m3": (8, 8, 1, 1),
    "float8_e4m3b11fnuz": (9, 8, 1, 1),
    "float8_e4m3fn": (10, 8, 1, 1),
    "float8_e4m3fnuz": (11, 8, 1, 1),
    "float8_e5m2": (12, 8, 1, 1),
    "float8_e5m2fnuz": (13, 8, 1, 1),
    "float8_e8m0fnu": (14, 8, 1, 1),
    "float6_e2m3fn": (15, 6, 1, 1),
    "float6_e3m2fn": (16, 6, 1, 1),
    "float4_e2m1fn": (17, 4, 1, 1),
    "float4_e2m1fn_x2": (17, 4, 2, 1),
}
NAMES = list(DTYPES)
# The module attribute for a name ("bool" is exported as bool_).
ATTR = {name: ("bool_" if name == "bool" else name) for name in NAMES}

NUMPY_NAMES = list(numpy_shared_dtypes())
ML_DTYPES_NAMES = [
    "bfloat16",
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
]


def _ml_param(name):
    return name


# -- DType constants --------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_dtype_constant_has_spec_code_bits_lanes(name):
    dt = getattr(dl, ATTR[name])
    code, bits, lanes, _ = DTYPES[name]
    assert type(dt) is dl.DType
    assert (dt.code, dt.bits, dt.lanes) == (code, bits, lanes)
    assert dt.__dlpack_data_type__() == (code, bits, lanes)


@pytest.mark.parametrize("name", NAMES)
def test_dtype_itemsize_rounds_bits_up_to_bytes(name):
    assert getattr(dl, ATTR[name]).itemsize == DTYPES[name][3]


@pytest.mark.parametrize("name", ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"])
def test_subbyte_dtype_itemsize_is_one_and_bits_exact(name):
    dt = getattr(dl, ATTR[name])
    assert dt.itemsize == 1
    assert dt.bits < 8


@pytest.mark.parametrize("name", NAMES)
def test_dtype_name_str_and_equality_with_name(name):
    dt = getattr(dl, ATTR[name])
    assert dt.name == name
    assert str(dt) == name
    assert dt == name
    assert name == dt
    assert not (dt != name)
    assert dt != "not_a_dtype"
    assert hash(dt) == hash(name)


@pytest.mark.parametrize("name", NAMES)
def test_dtype_equal_to_itself_only(name):
    dt = getattr(dl, ATTR[name])
    others = [getattr(dl, ATTR[n]) for n in NAMES if n != name]
    assert dt == dt
    assert all(dt != o for o in others)
    assert len({dt, *others}) == len(NAMES)


def test_dtype_compares_unequal_to_unrelated_objects():
    assert dl.float32 != 1.5
    assert dl.float32 != None  # noqa: E711
    assert not (dl.float32 == object())


@pytest.mark.parametrize("attr", ["code", "bits", "lanes", "itemsize", "name"])
def test_dtype_attributes_are_read_only(attr):
    with pytest.raises(AttributeError):
        setattr(dl.float32, attr, getattr(dl.float32, attr))
    assert dl.float32.name == "float32"


def test_dtype_has_no_instance_dict():
    with pytest.raises(AttributeError):
        dl.float32.extra = 1


def test_dtype_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        dl.DType()


@pytest.mark.parametrize("name", NAMES)
def test_dtype_pickles_to_the_same_interned_instance(name):
    dt = getattr(dl, ATTR[name])
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(dt, protocol=protocol)) is dt


# -- dl.dtype() ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_dtype_of_dtype_is_identity(name):
    dt = getattr(dl, ATTR[name])
    assert dl.dtype(dt) is dt


@pytest.mark.parametrize("name", NAMES)
def test_dtype_from_name(name):
    assert dl.dtype(name) is getattr(dl, ATTR[name])


@pytest.mark.parametrize("name", NAMES)
def test_dtype_from_triple(name):
    code, bits, lanes, _ = DTYPES[name]
    assert dl.dtype((code, bits, lanes)) is getattr(dl, ATTR[name])


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_dtype_from_numpy_dtype_and_scalar_type(name):
    expected = getattr(dl, ATTR[name])
    npdt = np.dtype(name)
    assert dl.dtype(npdt) is expected
    assert dl.dtype(npdt.type) is expected


@pytest.mark.parametrize(
    "x, name",
    [
        (np.float32, "float32"),
        (np.dtype("int16"), "int16"),
        (np.bool_, "bool"),
        (np.complex64, "complex64"),
        (np.uint64, "uint64"),
        (np.float16, "float16"),
        (np.dtype("<f8"), "float64"),
        (np.dtype("|u1"), "uint8"),
    ],
)
def test_dtype_from_numpy_examples(x, name):
    assert dl.dtype(x) == name


@pytest.mark.parametrize("name", [_ml_param(n) for n in ML_DTYPES_NAMES])
def test_dtype_from_ml_dtypes_maps_to_dlpack_code(name):
    expected = getattr(dl, ATTR[name])
    ml_type = getattr(ml_dtypes, name)
    assert dl.dtype(ml_type) is expected
    assert dl.dtype(np.dtype(ml_type)) is expected
    assert dl.dtype(ml_type).code == DTYPES[name][0]


@pytest.mark.parametrize("x", [1.5, None, object(), 3, [2, 32, 1], b"float32", str, list])
def test_dtype_of_other_objects_is_type_error(x):
    with pytest.raises(TypeError):
        dl.dtype(x)


@pytest.mark.parametrize("x", [(2, 32), (2, 32, 1, 0), (2.0, 32, 1), (2, "32", 1)])
def test_dtype_of_malformed_tuple_is_type_error(x):
    with pytest.raises(TypeError):
        dl.dtype(x)


@pytest.mark.parametrize("x", ["float", "Float32", "float33", "", "int3", "bool_", "complex"])
def test_dtype_of_unknown_name_is_value_error(x):
    with pytest.raises(ValueError):
        dl.dtype(x)


@pytest.mark.parametrize(
    "x",
    [
        (2, 33, 1),  # no 33-bit float
        (0, 32, 2),  # vectors are not supported
        (3, 64, 1),  # opaque handle
        (99, 8, 1),  # unknown code
        (17, 4, 3),  # float4 x3
        (-1, 8, 1),
        (0, 256, 1),
        (0, 8, 70000),
    ],
)
def test_dtype_of_impossible_triple_is_value_error(x):
    with pytest.raises(ValueError):
        dl.dtype(x)


@pytest.mark.parametrize(
    "x",
    [
        np.dtype(">i4"),
        np.dtype("U3"),
        np.dtype("O"),
        np.dtype("datetime64[s]"),
        np.dtype("V8"),
        np.dtype([("a", "f4")]),
    ],
)
def test_dtype_of_numpy_dtype_without_dlpack_type_is_value_error(x):
    with pytest.raises(ValueError):
        dl.dtype(x)


# -- to_numpy() -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_to_numpy_round_trips_numpy_types(name):
    dt = getattr(dl, ATTR[name])
    npdt = dt.to_numpy()
    assert isinstance(npdt, np.dtype)
    assert npdt == np.dtype(name)
    assert dl.dtype(npdt) is dt


@pytest.mark.parametrize("name", [_ml_param(n) for n in ML_DTYPES_NAMES])
def test_to_numpy_round_trips_ml_dtypes(name):
    dt = getattr(dl, ATTR[name])
    npdt = dt.to_numpy()
    assert npdt == np.dtype(getattr(ml_dtypes, name))
    assert dl.dtype(npdt) is dt


@pytest.mark.parametrize("name", ["complex32", "float4_e2m1fn_x2"])
def test_to_numpy_without_numpy_equivalent_is_type_error(name):
    with pytest.raises(TypeError):
        getattr(dl, ATTR[name]).to_numpy()


@pytest.mark.parametrize("name", NUMPY_NAMES + [_ml_param(n) for n in ML_DTYPES_NAMES])
def test_numpy_takes_a_dtype_wherever_it_takes_one(name):
    # NumPy reads a `dtype` attribute from what it is given as a dtype: np.dtype(dl.float32),
    # np.zeros(2, dtype=dl.float32), and Dask's or pandas' code that calls np.dtype(x).
    dt = getattr(dl, ATTR[name])
    assert np.dtype(dt) == dt.to_numpy() == dt.dtype
    assert np.zeros(2, dtype=dt).dtype == dt.to_numpy()


@pytest.mark.parametrize("name", ["complex32", "float4_e2m1fn_x2"])
def test_numpy_dtype_of_a_type_numpy_cannot_hold_is_type_error(name):
    with pytest.raises(TypeError):
        np.dtype(getattr(dl, ATTR[name]))
