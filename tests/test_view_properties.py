"""Property tests for Tensor views: every view equals NumPy's view of the same data, shares
its memory, and survives its base being dropped; over shapes, dtypes, basic-index keys,
reshapes, transposes and dtype views. (Profiles as in tests/support/property_cases.py.)"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dlinterop as dl

# 200 examples each; derandomized in CI (CI=true), as tests/support/property_cases.py's profiles.
settings.register_profile(
    "views",
    deadline=None,
    max_examples=200,
    derandomize=bool(os.environ.get("CI")),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DTYPES = ["int8", "uint16", "int32", "float32", "float64", "complex64", "bool"]


@st.composite
def sources(draw):
    """A NumPy array with its own memory, as a Tensor would hold it, possibly read-only."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    a = np.arange(int(np.prod(shape)), dtype=np.int64).astype(dtype).reshape(shape)
    a.flags.writeable = not draw(st.booleans())
    return a


def _check_view(view, expected, base_array):
    got = np.from_dlpack(view)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.array_equal(got, expected)
    if expected.size:
        assert np.shares_memory(got, base_array)
        assert got.ctypes.data == expected.ctypes.data
    assert view.readonly == (not base_array.flags.writeable)


@settings(parent=settings.get_profile("views"))
@given(data=st.data(), a=sources())
def test_basic_index_equals_numpys_view(data, a):
    key = data.draw(hnp.basic_indices(a.shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True))
    t = dl.from_dlpack(a)
    expected = a[key]
    if isinstance(expected, np.generic):
        expected = a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
    view = t[key]
    # The view holds the memory, not t. No gc.collect() here: nothing here makes a cycle, so
    # t's last reference going is its end, and a collection per example (a quarter of a
    # second with PyTorch and JAX imported) made this file take minutes.
    del t
    _check_view(view, expected, a)


@settings(parent=settings.get_profile("views"))
@given(data=st.data(), a=sources())
def test_a_view_of_a_view_equals_numpys(data, a):
    first = data.draw(hnp.basic_indices(a.shape, allow_ellipsis=True))
    t = dl.from_dlpack(a)
    a1 = a[first]
    if isinstance(a1, np.generic):
        return
    second = data.draw(hnp.basic_indices(a1.shape, allow_newaxis=True))
    expected = a1[second]
    if isinstance(expected, np.generic):
        expected = a1[(second if isinstance(second, tuple) else (second,)) + (Ellipsis,)]
    view = t[first][second]
    del t
    _check_view(view, expected, a)


@settings(parent=settings.get_profile("views"))
@given(data=st.data(), a=sources())
def test_transpose_and_reshape_equal_numpys(data, a):
    axes = data.draw(st.permutations(range(a.ndim)))
    t = dl.from_dlpack(a).transpose(*axes)
    at = a.transpose(axes)
    _check_view(t, at, a)
    # a reshape to a shape of the same size: a view exactly where NumPy's is one
    size = at.size
    factors = [d for d in range(1, size + 1) if size % d == 0] if size else [0]
    first = data.draw(st.sampled_from(factors))
    shape = (first, -1) if first else (0, data.draw(st.integers(0, 3)))
    expected = at.reshape(shape)
    got = t.reshape(shape)
    assert np.array_equal(np.from_dlpack(got), expected)
    if np.shares_memory(expected, a) or not expected.size:
        view = t.view(shape)
        assert np.array_equal(np.from_dlpack(view), expected)
        if expected.size:
            assert np.shares_memory(np.from_dlpack(view), a)
    else:
        with pytest.raises(ValueError):
            t.view(shape)


@settings(parent=settings.get_profile("views"))
@given(data=st.data(), a=sources())
def test_dtype_view_equals_numpys(data, a):
    if a.dtype == np.bool_ or a.ndim == 0:
        return
    target = data.draw(st.sampled_from(["int8", "uint16", "int32", "float64"]))
    key = data.draw(hnp.basic_indices(a.shape, min_dims=1))
    sub = a[key]
    if isinstance(sub, np.generic) or sub.ndim == 0:
        return
    t = dl.from_dlpack(a)[key]
    try:
        expected = sub.view(target)
    except ValueError:
        with pytest.raises(ValueError):
            t.view(target)
        return
    if expected.size and any(
        n > 1 and stride % expected.itemsize
        for n, stride in zip(expected.shape[:-1], expected.strides[:-1], strict=True)
    ):
        # NumPy keeps byte strides that are not whole elements (int8 rows 3 bytes apart as
        # uint16); DLPack counts strides in elements, so no Tensor can describe that view.
        with pytest.raises(ValueError, match="does not divide"):
            t.view(target)
        return
    _check_view(t.view(target), expected, a)


def test_a_dtype_view_with_rows_not_whole_elements_apart_is_refused_where_numpy_allows_it():
    # Found by test_dtype_view_equals_numpys: int8 rows 3 bytes apart, viewed as uint16.
    a = np.arange(6, dtype=np.int8).reshape(2, 1, 1, 3)
    key = (slice(None), 0, 0, slice(None, 2))
    assert a[key].view("uint16").strides == (3, 2)  # NumPy: byte strides, any multiple
    with pytest.raises(ValueError, match="axis 0's stride does not divide into uint16"):
        dl.from_dlpack(a)[key].view(dl.uint16)
