"""NumPy scalars and arrays of no axis taken as numbers wherever dlinterop takes a number
for values: dl.tensor (each keeps its own type there, as in NumPy and PyTorch), dl.full and
dl.arange (the Python number each holds, as PyTorch's full and NumPy's arange read them),
and assignment (NumPy 2's rules: a NumPy scalar is a Python value, a 0-d array an array)."""

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the version matrix's environments have no PyTorch: its cases drop out
    torch = None

import dlinterop as dl

# ml_dtypes has no wheel for free-threaded CPython 3.13: these tests need its types
ml_dtypes = pytest.importorskip("ml_dtypes")

SCALARS = [
    np.float32(2.5),
    np.float16(-1.5),
    np.float64(0.25),
    np.int64(3),
    np.int8(-4),
    np.uint16(7),
    np.bool_(True),
    np.complex64(1 - 2j),
    ml_dtypes.bfloat16(1.5),
    ml_dtypes.float8_e4m3fn(-2),
]


def zero_d_forms(scalar):
    """The arrays of no axis holding scalar: a NumPy 0-d array, a 0-d Tensor, a 0-d PyTorch
    tensor where PyTorch has the type."""
    forms = [np.array(scalar), dl.tensor(np.array(scalar))]
    torch_has = ("float32", "float16", "float64", "int64", "int8", "bool")
    if torch is not None and np.dtype(scalar.dtype).name in torch_has:
        forms.append(torch.from_numpy(np.array(scalar)))
    return forms


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_tensor_of_a_numpy_scalar_or_0d_array_keeps_its_type(scalar):
    expected = dl.dtype(np.dtype(scalar.dtype))
    for value in [scalar, *zero_d_forms(scalar)]:
        t = dl.tensor(value)
        assert t.shape == () and t.dtype is expected and t.item() == scalar.item()
        nested = dl.tensor([[value, value]])
        assert nested.shape == (1, 2) and nested.dtype is expected
        assert nested.tolist() == [[scalar.item(), scalar.item()]]


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_0d_arrays_promote_with_python_numbers_as_numpy_scalars_do(scalar):
    for value in zero_d_forms(scalar):
        assert dl.tensor([value, 1]).dtype is dl.tensor([scalar, 1]).dtype
        assert dl.tensor([value, 1.5]).dtype is dl.tensor([scalar, 1.5]).dtype


def test_tensor_of_0d_arrays_takes_a_dtype():
    values = [np.array(1.9), dl.tensor(3.5)] + ([torch.tensor(2)] if torch is not None else [])
    t = dl.tensor(values, dtype="int16")
    assert t.dtype is dl.int16 and t.tolist() == [1, 3, 2][: len(values)]


def test_an_array_with_axes_is_no_number():
    with pytest.raises(TypeError, match="holds numbers, not ndarray"):
        dl.tensor([np.ones(2), np.ones(2)])
    with pytest.raises(TypeError, match="vector type"):
        dl.tensor([dl.full((), 1.5, "float4_e2m1fn_x2")])


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
def test_full_takes_a_numpy_scalar_or_0d_array_as_its_number(scalar):
    number = scalar.item()
    expected = dl.full(3, number)
    for value in [scalar, *zero_d_forms(scalar)]:
        t = dl.full(3, value)
        assert t.dtype is expected.dtype and t.tolist() == expected.tolist()
        assert dl.full(2, value, "complex128").tolist() == [complex(number)] * 2


@pytest.mark.parametrize(
    "args",
    [
        (np.int64(5),),
        (np.array(5),),
        *([(torch.tensor(5),)] if torch is not None else []),
        (np.int32(1), np.int64(7), np.int8(2)),
        (np.float32(2.5),),
        (np.float64(0.5), dl.tensor(3.0), np.array(0.5, np.float32)),
        (0, np.float32(1), 0.25),
        (np.uint8(3), 0, -1),
    ],
    ids=str,
)
def test_arange_takes_numpy_scalars_and_0d_arrays_as_numpy_does(args):
    numbers = [np.asarray(a).item() if not isinstance(a, dl.Tensor) else a.item() for a in args]
    t = dl.arange(*args)
    assert t.tolist() == np.arange(*numbers).tolist()
    assert t.dtype is dl.arange(*numbers).dtype  # int64 for integers, else float32


@pytest.mark.parametrize("value", [np.complex64(1j), np.array(1j), np.bool_(True)])
def test_arange_refuses_what_is_no_real_number(value):
    with pytest.raises(TypeError, match="real number"):
        dl.arange(value)


def test_assignment_reads_a_numpy_scalar_as_a_python_value_as_numpy_2():
    t, a = dl.zeros(3, "int8"), np.zeros(3, np.int8)
    for value in (np.int64(300), np.float64(300.5)):
        with pytest.raises(OverflowError):
            t[0] = value
        with pytest.raises(OverflowError):
            a[0] = value
    t[0] = np.float64(2.7)
    a[0] = np.float64(2.7)
    t[1] = np.array(300)  # a 0-d array is an array: cast, wrapping, as NumPy's
    a[1] = np.array(300)
    assert t.tolist() == a.tolist() == [2, 44, 0]
