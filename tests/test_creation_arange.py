"""dl.arange on its common paths against its general one: the same values (Python's for
floats, NumPy's for ints), the same refusals and errors, whichever path an argument takes
(support/creation_cases.py)."""

import math

import numpy as np
import pytest

import dlinterop as dl

from creation_cases import Float, Int, _general, _outcome

ml_dtypes = pytest.importorskip("ml_dtypes")


# -- arange ------------------------------------------------------------------------------


def _python_values(start, stop, step):
    """arange's values as Python computes them, one by one."""
    return [start + i * step for i in range(max(0, math.ceil((stop - start) / step)))]


ARANGE_INT_CASES = [
    (0, 100, 1),
    (0, 0, 1),
    (5, 0, 1),
    (5, 0, -1),
    (-7, 30, 4),
    (30, -7, -4),
    (0, 10, 3),
    (2**52 - 10, 2**52, 3),
    (-(2**52), -(2**52) + 5, 1),
    (2**53, 2**53 + 6, 2),
    (0, 2**31 + 2, 2**30),
]


@pytest.mark.parametrize("start, stop, step", ARANGE_INT_CASES, ids=repr)
@pytest.mark.parametrize(
    "dtype",
    [
        None,
        "int8",
        "uint8",
        "int16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float32",
        "float64",
        "float16",
        "bool",
    ],
)
def test_arange_of_ints_as_the_general_path(start, stop, step, dtype):
    common = _outcome(dl.arange, start, stop, step, dtype=dtype)
    general = _outcome(dl.arange, Int(start), Int(stop), Int(step), dtype=dtype)
    if dtype is None and isinstance(general[0], tuple):
        assert common[1] == "int64"
    assert common == general


ARANGE_FLOAT_CASES = [
    (0.0, 1.0, 0.1),
    (0, 1, 0.1),
    (1.0, 0.0, -0.1),
    (-5, 12.5, 0.25),
    (0.0, 0.0, 0.5),
    (1.0, 0.0, 0.5),
    (0.0, 1e-3, 1e-5),
    (0.3, 7, 0.7),
    (-3.4e38, 3.4e38, 1e37),
    (0.0, 1e300, 1e298),
    (2**52, 2**52 + 4.0, 0.5),
]


@pytest.mark.parametrize("start, stop, step", ARANGE_FLOAT_CASES, ids=repr)
@pytest.mark.parametrize("dtype", [None, "float32", "float64", "float16", "int32"])
def test_arange_of_floats_as_the_general_path(start, stop, step, dtype):
    common = _outcome(dl.arange, start, stop, step, dtype=dtype)
    general = _outcome(dl.arange, _general(start), _general(stop), Float(step), dtype=dtype)
    assert common == general


@pytest.mark.parametrize("start, stop, step", ARANGE_FLOAT_CASES[:8], ids=repr)
def test_arange_float64_values_are_pythons(start, stop, step):
    t = dl.arange(start, stop, step, dtype="float64")
    assert t.tolist() == _python_values(start, stop, step)


@pytest.mark.parametrize("start, stop, step", ARANGE_INT_CASES[:8], ids=repr)
def test_arange_int64_values_are_numpys(start, stop, step):
    assert dl.arange(start, stop, step).tolist() == np.arange(start, stop, step).tolist()


@pytest.mark.parametrize(
    "args",
    [
        (1j,),
        (0, 5, 0),
        (0.0, 5.0, 0.0),
        (0, float("nan"), 1),
        (0, float("inf"), 1.0),
        (0, 2**80),
        (0, 2**62, 0.5),
        ("3",),
        (None,),
    ],
    ids=repr,
)
def test_arange_refusals_are_the_general_paths(args):
    common = _outcome(dl.arange, *args)
    general = _outcome(dl.arange, *[_general(a) for a in args])
    assert isinstance(common[0], type) and common == general


@pytest.mark.parametrize("args", [(True,), (0, True), (0, 5, True), (False, 5)], ids=repr)
def test_arange_refuses_bools(args):
    with pytest.raises(TypeError, match="is a real number, not bool"):
        dl.arange(*args)


def test_arange_out_of_range_keeps_its_overflow_error():
    with pytest.raises(OverflowError):
        dl.arange(200, dtype="int8")
    with pytest.raises(OverflowError):
        dl.arange(-1, 3, dtype="uint16")
    assert dl.arange(-128, 128, dtype="int8").tolist() == list(range(-128, 128))


def test_arange_result_on_another_device_form():
    assert dl.arange(4, device=None).device == "cpu"
    assert dl.arange(4, device="cpu:0").tolist() == [0, 1, 2, 3]
