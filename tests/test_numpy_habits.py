"""What a NumPy user types first, and gets NumPy's answer for: Python's number types as
dtypes, NumPy scalars and 0-d arrays taken as numbers, flatten/ravel/copy(order=), the
ordering comparisons, and arithmetic refused with a pointer to the frameworks. NumPy's own
result for the same operation is the reference. Casts are tested in test_casts.py,
assignment in test_setitem.py."""

import numpy as np
import pytest

import dlinterop as dl

# -- Python's number types as dtypes ------------------------------------------------------


@pytest.mark.parametrize("python_type", [bool, int, float, complex])
def test_python_number_type_is_numpys_dtype(python_type):
    assert dl.dtype(python_type) is dl.dtype(np.dtype(python_type))


def test_int_is_int64_as_numpy_2_and_pytorch_read_it():
    assert dl.dtype(int) is dl.int64 and dl.dtype(float) is dl.float64


@pytest.mark.parametrize("python_type", [bool, int, float, complex])
def test_python_number_type_is_taken_wherever_a_dtype_is(python_type):
    expected = dl.dtype(np.dtype(python_type))
    assert dl.zeros(2, python_type).dtype is expected
    assert dl.empty(2, dtype=python_type).dtype is expected
    assert dl.ones(2, python_type).dtype is expected
    assert dl.full(2, 1, dtype=python_type).dtype is expected
    assert dl.tensor([1, 0], dtype=python_type).dtype is expected
    if python_type is not bool:
        assert dl.arange(3, dtype=python_type).dtype is expected
    assert expected == python_type


@pytest.mark.parametrize("name", ["float", "int", "complex"])
def test_ambiguous_names_stay_refused(name):
    with pytest.raises(ValueError, match="ambiguous"):
        dl.dtype(name)


@pytest.mark.parametrize("other", [str, list, object, type(None)])
def test_other_python_types_are_no_dtype(other):
    with pytest.raises(TypeError, match="cannot interpret"):
        dl.dtype(other)
