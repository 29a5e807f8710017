"""DLPack's import rules: what dl.from_dlpack does with a producer or a capsule (copy=,
device= and stream=, legacy capsules imported read-only, a capsule renamed when consumed and
consumed only once, objects that are not DLPack producers).

Moved from tests/interop/test_numpy_interop.py: each test still runs under both NumPy routes
(the autouse numpy_route fixture of tests/support/numpy_route.py).
"""

import numpy as np
import pytest

import dlinterop as dl

from numpy_route import (  # noqa: F401 (numpy_route and tensor are fixtures)
    _arange,
    capsule_name,
    numpy_route,
    tensor,
)

# -- capsules ---------------------------------------------------------------------------


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
@pytest.mark.parametrize("versioned", [False, True])
def test_capsule_is_renamed_when_consumed_and_only_once(tensor, versioned):
    capsule = dl.to_dlpack(tensor, versioned=versioned)
    u = dl.from_dlpack(capsule)
    assert u.data_ptr == tensor.data_ptr
    assert capsule_name(capsule) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert u.readonly is (not versioned)  # a legacy capsule cannot say it is writable
    with pytest.raises(ValueError, match="consumed"):
        dl.from_dlpack(capsule)


# -- dl.from_dlpack ---------------------------------------------------------------------


def test_from_dlpack_copy_true_from_numpy_makes_new_buffer():
    a = _arange((3, 4))
    t = dl.from_dlpack(a, copy=True)
    assert t.data_ptr != a.ctypes.data
    assert t.is_copied
    assert np.array_equal(np.from_dlpack(t), a)


@pytest.mark.parametrize("source", ["tensor", "capsule", "versioned_capsule"])
def test_from_dlpack_copy_true_from_dlinterop_makes_new_buffer(tensor, source):
    obj = {
        "tensor": tensor,
        "capsule": dl.to_dlpack(tensor),
        "versioned_capsule": dl.to_dlpack(tensor, versioned=True),
    }[source]
    u = dl.from_dlpack(obj, copy=True)
    assert u.data_ptr != tensor.data_ptr
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(tensor))


@pytest.mark.parametrize(
    "kwargs", [{"copy": False}, {"device": "cpu"}, {"device": "cpu", "copy": False}, {"stream": -1}]
)
def test_from_dlpack_numpy_shares_when_no_copy_is_needed(kwargs):
    a = _arange((3, 4))
    t = dl.from_dlpack(a, **kwargs)
    assert t.data_ptr == a.ctypes.data


def test_from_dlpack_of_numpy_legacy_capsule_is_readonly_and_shared():
    a = _arange((2, 2))
    t = dl.from_dlpack(a.__dlpack__())
    assert t.data_ptr == a.ctypes.data
    assert t.readonly


def test_from_dlpack_of_tensor_shares_memory(tensor):
    u = dl.from_dlpack(tensor)
    assert u is not tensor
    assert u.data_ptr == tensor.data_ptr
    assert u.owner is tensor
    assert u.shape == tensor.shape and u.strides == tensor.strides
    assert u.readonly is tensor.readonly
    memoryview(u)[1, 2] = 99.0
    assert memoryview(tensor)[1, 2] == 99.0


def test_from_dlpack_of_readonly_tensor_stays_readonly():
    a = np.arange(3.0)
    a.flags.writeable = False
    assert dl.from_dlpack(dl.from_dlpack(a)).readonly


@pytest.mark.parametrize("obj", [[1, 2, 3], 1.5, None, b"abc", object()])
def test_from_dlpack_of_non_dlpack_object_is_type_error(obj):
    with pytest.raises(TypeError):
        dl.from_dlpack(obj)
