"""DLPack's export rules on the CPU: what Tensor.__dlpack__, __dlpack_device__ and
dl.to_dlpack hand a consumer (max_version negotiation, legacy and versioned capsules, the
read-only and is-copied flags, and the stream=, copy= and dl_device= keywords), read in
place from the capsule.

Moved from tests/interop/test_numpy_interop.py: each test still runs under both NumPy routes
(the autouse numpy_route fixture of tests/support/numpy_route.py).
"""

import numpy as np
import pytest

import dlinterop as dl

from numpy_route import (  # noqa: F401 (numpy_route and tensor are fixtures)
    IS_COPIED,
    READ_ONLY,
    _arange,
    capsule_name,
    inspect_capsule,
    numpy_route,
    tensor,
)

# -- read-only --------------------------------------------------------------------------


def test_readonly_export_sets_read_only_flag():
    a = np.arange(3.0)
    a.flags.writeable = False
    _, flags, _ = inspect_capsule(dl.from_dlpack(a).__dlpack__(max_version=(1, 0)))
    assert flags & READ_ONLY
    assert not flags & IS_COPIED


def test_readonly_tensor_legacy_export_is_buffer_error():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    with pytest.raises(BufferError):
        t.__dlpack__()
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(0, 8))
    with pytest.raises(BufferError):
        dl.to_dlpack(t)


def test_readonly_tensor_legacy_export_with_copy_true_works():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    capsule = t.__dlpack__(copy=True)
    assert capsule_name(capsule) == "dltensor"
    _, _, info = inspect_capsule(capsule)
    assert info["data_ptr"] != t.data_ptr
    u = dl.from_dlpack(capsule)
    assert np.array_equal(np.from_dlpack(u), a)


def test_versioned_to_dlpack_of_readonly_tensor_works():
    a = np.arange(3.0)
    a.flags.writeable = False
    _, flags, _ = inspect_capsule(dl.to_dlpack(dl.from_dlpack(a), versioned=True))
    assert flags & READ_ONLY


# -- __dlpack__ keyword rules (DLPack) --------------------------------------------------


def test_dlpack_device_is_cpu_zero(tensor):
    assert tensor.__dlpack_device__() == (dl.DeviceType.CPU, 0)
    assert type(tensor.__dlpack_device__()[0]) is dl.DeviceType


@pytest.mark.parametrize("args", [(None,), (None, (1, 0)), ((1, 0),)])
def test_dlpack_positional_arguments_are_type_error(tensor, args):
    with pytest.raises(TypeError):
        tensor.__dlpack__(*args)


@pytest.mark.parametrize(
    "kwargs",
    [{"foo": 1}, {"device": (1, 0)}, {"version": (1, 0)}, {"max_version": (1, 0), "streams": None}],
)
def test_dlpack_unknown_keyword_is_type_error(tensor, kwargs):
    with pytest.raises(TypeError):
        tensor.__dlpack__(**kwargs)


@pytest.mark.parametrize(
    "max_version", [(1,), [1, 0], "1.0", (1, "0"), (1, 0, 0), 1, (1.0, 0), ("1", "0")]
)
def test_dlpack_malformed_max_version_is_type_error(tensor, max_version):
    with pytest.raises(TypeError):
        tensor.__dlpack__(max_version=max_version)


@pytest.mark.parametrize(
    "max_version, expected",
    [
        (None, None),
        ((0, 0), None),
        ((0, 9), None),
        ((1, 0), (1, 0)),
        ((1, 1), (1, 1)),
        ((1, 2), (1, 2)),
        ((1, 3), (1, 3)),
        ((1, 99), (1, 3)),
        ((2, 0), (1, 3)),
    ],
)
def test_dlpack_max_version_negotiation(tensor, max_version, expected):
    capsule = tensor.__dlpack__(max_version=max_version)
    version, flags, info = inspect_capsule(capsule)
    assert capsule_name(capsule) == ("dltensor" if expected is None else "dltensor_versioned")
    assert version == expected
    if expected is not None:
        assert flags == 0
    assert info["data_ptr"] == tensor.data_ptr
    assert info["shape"] == (2, 3)
    assert info["strides"] == (3, 1)
    assert info["dtype"] == (2, 32, 1)
    assert info["device"] == (1, 0)


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_zero_d_has_null_shape_and_strides(max_version):
    t = dl.full((), 1.0)
    _, _, info = inspect_capsule(t.__dlpack__(max_version=max_version))
    assert info["ndim"] == 0
    assert info["shape"] is None and info["strides"] is None


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_strides_are_always_filled(max_version):
    a = _arange((3, 4)).T
    _, _, info = inspect_capsule(dl.from_dlpack(a).__dlpack__(max_version=max_version, copy=False))
    assert info["strides"] == (1, 4)


@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("stream", [None, -1])
def test_dlpack_cpu_stream_none_or_minus_one_is_fine(tensor, stream, max_version):
    capsule = tensor.__dlpack__(stream=stream, max_version=max_version)
    assert inspect_capsule(capsule)[2]["data_ptr"] == tensor.data_ptr


@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("stream", [0, 1, 2, 3, -2, 2**40])
def test_dlpack_cpu_stream_other_int_is_value_error(tensor, stream, max_version):
    with pytest.raises(ValueError):
        tensor.__dlpack__(stream=stream, max_version=max_version)


@pytest.mark.parametrize("stream", ["0", 1.5, object(), (1,), True])
def test_dlpack_stream_not_int_is_type_error(tensor, stream):
    with pytest.raises(TypeError):
        tensor.__dlpack__(stream=stream)


@pytest.mark.parametrize("copy", ["yes", 1, 0])
def test_dlpack_copy_not_bool_is_type_error(tensor, copy):
    with pytest.raises(TypeError):
        tensor.__dlpack__(copy=copy)


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_copy_true_makes_a_new_buffer(tensor, max_version):
    capsule = tensor.__dlpack__(copy=True, max_version=max_version)
    _, flags, info = inspect_capsule(capsule)
    assert info["data_ptr"] != tensor.data_ptr
    if max_version is not None:
        assert flags & IS_COPIED
    u = dl.from_dlpack(capsule)
    assert np.array_equal(np.from_dlpack(u.copy()), np.from_dlpack(tensor))
    assert u.is_copied is (max_version is not None)


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_dlpack_copy_false_shares(tensor, max_version):
    _, flags, info = inspect_capsule(tensor.__dlpack__(copy=False, max_version=max_version))
    assert info["data_ptr"] == tensor.data_ptr
    assert not (flags or 0) & IS_COPIED


@pytest.mark.parametrize("dl_device", [(1, 0), (dl.DeviceType.CPU, 0)])
@pytest.mark.parametrize("copy", [None, False])
def test_dlpack_dl_device_cpu_shares(tensor, dl_device, copy):
    capsule = tensor.__dlpack__(dl_device=dl_device, copy=copy, max_version=(1, 3))
    _, flags, info = inspect_capsule(capsule)
    assert info["data_ptr"] == tensor.data_ptr
    assert flags == 0


def test_dlpack_dl_device_cpu_with_copy_true_copies(tensor):
    _, flags, info = inspect_capsule(
        tensor.__dlpack__(dl_device=(1, 0), copy=True, max_version=(1, 3))
    )
    assert info["data_ptr"] != tensor.data_ptr
    assert flags & IS_COPIED


@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("dl_device", [(2, 0), (10, 0), (99, 0)])
def test_dlpack_unreachable_dl_device_is_buffer_error(tensor, dl_device, max_version):
    if dl_device[0] == 2 and dl.cuda.is_available():
        pytest.skip("a GPU is present: the CPU tensor can be copied to it")
    with pytest.raises(BufferError):
        tensor.__dlpack__(dl_device=dl_device, max_version=max_version)


def test_dlpack_other_dl_device_with_copy_false_is_copy_error(tensor):
    with pytest.raises(dl.CopyError) as info:
        tensor.__dlpack__(dl_device=(2, 0), copy=False, max_version=(1, 3))
    assert isinstance(info.value, BufferError)
    assert isinstance(info.value, ValueError)


def test_copy_error_is_buffer_error_and_value_error():
    assert issubclass(dl.CopyError, BufferError)
    assert issubclass(dl.CopyError, ValueError)


# -- capsules ---------------------------------------------------------------------------


def test_to_dlpack_default_is_legacy_capsule(tensor):
    capsule = dl.to_dlpack(tensor)
    assert capsule_name(capsule) == "dltensor"
    assert inspect_capsule(capsule)[2]["data_ptr"] == tensor.data_ptr


def test_to_dlpack_versioned_capsule(tensor):
    capsule = dl.to_dlpack(tensor, versioned=True)
    assert capsule_name(capsule) == "dltensor_versioned"
    version, flags, info = inspect_capsule(capsule)
    assert version == (1, 3)
    assert flags == 0
    assert info["data_ptr"] == tensor.data_ptr


def test_to_dlpack_rejects_non_tensors():
    with pytest.raises(TypeError):
        dl.to_dlpack(np.zeros(3))
