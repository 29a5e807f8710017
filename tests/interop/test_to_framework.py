"""The way out (dlinterop.frameworks): dl.to_framework hands a Tensor back as the caller's
type (NumPy through its C API or np.from_dlpack, PyTorch, JAX), read-only memory kept
read-only or refused, the Tensor kept alive."""

import gc
import re
import sys

import numpy as np
import pytest

import dlinterop as dl

from way_out_cases import (
    live_buffers,
    needs_torch,
    torch,
)

# ---- to_framework ---------------------------------------------------------------------


def test_to_framework_numpy_by_instance_type_module_and_name():
    t = dl.full((2, 3), 4.0, "float32")
    for like in (np.zeros(1), np.ndarray, np, "numpy"):
        a = dl.to_framework(t, like=like)
        assert type(a) is np.ndarray and a.ctypes.data == t.data_ptr
        assert a.flags.writeable
        np.testing.assert_array_equal(a, np.full((2, 3), 4.0, np.float32))


@needs_torch
def test_to_framework_torch_by_instance_type_module_and_name():
    t = dl.full((2, 3), 4.0, "float32")
    for like in (torch.zeros(1), torch.Tensor, torch, "torch", torch.nn.Parameter(torch.ones(1))):
        y = dl.to_framework(t, like=like)
        assert type(y) is torch.Tensor and y.data_ptr() == t.data_ptr
        assert y.shape == (2, 3)


def test_to_framework_jax():
    jnp = pytest.importorskip("jax.numpy")
    t = dl.full((8,), 3.0, "float32")
    for like in (jnp.zeros(1), "jax"):
        y = dl.to_framework(t, like=like)
        assert type(y) is type(jnp.zeros(1))
        assert y.unsafe_buffer_pointer() == t.data_ptr
        assert float(y.sum()) == 24.0


def test_to_framework_dlinterop_is_the_tensor_itself():
    t = dl.zeros(3)
    assert dl.to_framework(t, like=dl.zeros(1)) is t
    assert dl.to_framework(t, like=dl.Tensor) is t
    assert dl.to_framework(t, like="dlinterop") is t


def test_to_framework_takes_anything_from_dlpack_takes():
    a = np.arange(5.0)
    b = dl.to_framework(a, like=np)
    assert b.ctypes.data == a.ctypes.data


def test_to_framework_keeps_read_only():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    b = dl.to_framework(t, like=np)
    assert b.ctypes.data == a.ctypes.data and not b.flags.writeable


def _read_only_tensor():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly_reason == "flag"
    return a, t


@needs_torch
@pytest.mark.parametrize("like", ["instance", "type", "module", "name"])
def test_to_framework_torch_refuses_read_only_memory(like):
    # Regression: torch has no read-only tensors, and the hand-back gave a writable one over
    # a read-only NumPy array (or an immutable bytes object).
    like = {"instance": torch.zeros(1), "type": torch.Tensor, "module": torch, "name": "torch"}[
        like
    ]
    a, t = _read_only_tensor()
    for copy in (None, False):
        with pytest.raises(BufferError, match="read-only.*copy=True"):
            dl.to_framework(t, like=like, copy=copy)
    y = dl.to_framework(t, like=like, copy=True)
    assert type(y) is torch.Tensor and y.data_ptr() != a.ctypes.data
    y += 1  # a writable copy; the source is untouched
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0] and y.tolist() == [1.0, 2.0, 3.0, 4.0]


@needs_torch
def test_to_framework_torch_refuses_an_immutable_buffer():
    t = dl.asarray(b"\0" * 16)
    assert t.readonly_reason == "flag"
    with pytest.raises(BufferError, match="read-only"):
        dl.to_framework(t, like=torch)


@needs_torch
def test_to_framework_torch_shares_memory_read_only_only_by_assumption():
    # A legacy capsule's memory is read-only by assumption only (it could not say): handed
    # on as PyTorch's own from_dlpack of that capsule would.
    t = dl.from_dlpack(np.arange(3.0).__dlpack__())
    assert t.readonly_reason == "legacy"
    assert dl.to_framework(t, like=torch).data_ptr() == t.data_ptr


def test_to_framework_numpy_shares_read_only_memory_read_only():
    a, t = _read_only_tensor()
    b = dl.to_framework(t, like=np)
    assert b.ctypes.data == a.ctypes.data and not b.flags.writeable
    c = dl.to_framework(t, like=np, copy=True)
    assert c.ctypes.data != a.ctypes.data and c.flags.writeable
    assert c.tolist() == a.tolist()


def test_to_framework_copy_true_always_copies():
    t = dl.full((3,), 2.0)
    assert dl.to_framework(t, like=np, copy=True).ctypes.data != t.data_ptr
    assert dl.to_framework(t, like=np, copy=False).ctypes.data == t.data_ptr
    with pytest.raises(TypeError, match="copy must be"):
        dl.to_framework(t, like=np, copy="yes")


def test_to_framework_keeps_memory_alive():
    t = dl.full((1000,), 7.0, "float64")
    b = dl.to_framework(t, like="numpy")
    del t
    gc.collect()
    assert b.sum() == 7000.0


# dl.to_framework(t, like=numpy) makes the ndarray through NumPy's C API where the core's
# NumPy route is built and its probes pass; otherwise np.from_dlpack does. Both must give
# what np.from_dlpack(t) gives.


@pytest.fixture(params=["native", "np.from_dlpack"])
def numpy_handback(request):
    native = request.param == "native"
    if native and not dl.build_info()["numpy_route_built"]:
        pytest.skip("built without NumPy's headers: there is no native hand-back")
    previous = dl._core._set_numpy_route(native)
    dl.to_framework(dl.zeros(1), like=np)  # decides the hand-back again
    assert dl._core._numpy_handback() is native
    yield native
    dl._core._set_numpy_route(previous)


def _handback_cases():
    base = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    frozen = np.arange(6, dtype=np.int32)
    frozen.flags.writeable = False
    cases = [
        base,
        base[:, ::2, 1:],
        base.transpose(2, 0, 1),
        base[::-1, :, ::-2],
        base[:0],
        base[1, 2, 3, ...],
        frozen,
        np.zeros((3, 0, 2), np.uint8),
    ]
    cases += [
        np.arange(6).astype(t).reshape(2, 3)[:, ::-1]
        for t in (
            np.bool_,
            np.int8,
            np.int16,
            np.int32,
            np.int64,
            np.uint8,
            np.uint16,
            np.uint32,
            np.uint64,
            np.float16,
            np.float32,
            np.complex64,
            np.complex128,
        )
    ]
    return cases


@pytest.mark.parametrize("case", range(len(_handback_cases())))
def test_to_framework_numpy_is_what_np_from_dlpack_makes(numpy_handback, case):
    t = dl.from_dlpack(_handback_cases()[case])
    ours, theirs = dl.to_framework(t, like=np), np.from_dlpack(t)
    assert type(ours) is np.ndarray
    assert (ours.dtype, ours.shape, ours.strides) == (theirs.dtype, theirs.shape, theirs.strides)
    assert ours.flags.writeable == theirs.flags.writeable
    assert ours.__array_interface__["data"] == theirs.__array_interface__["data"]
    assert ours.__dlpack_device__() == theirs.__dlpack_device__()
    np.testing.assert_array_equal(ours, theirs)
    if numpy_handback:
        assert ours.base is t  # the Tensor keeps the memory alive, no capsule
    else:
        assert type(ours.base).__name__ == "PyCapsule"


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "complex32"])
def test_to_framework_numpy_leaves_other_dtypes_to_np_from_dlpack(numpy_handback, name):
    # Types outside NumPy's builtin table go to np.from_dlpack, whatever it makes of them:
    # some NumPy versions take ml_dtypes' types through a registry, others refuse them.
    pytest.importorskip("ml_dtypes")
    t = dl.zeros((4,), name)
    try:
        theirs = np.from_dlpack(t)
    except Exception as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            dl.to_framework(t, like=np)
    else:
        ours = dl.to_framework(t, like=np)
        assert ours.dtype == theirs.dtype
        assert ours.ctypes.data == theirs.ctypes.data == t.data_ptr


def test_to_framework_numpy_native_keeps_the_tensor_alive(numpy_handback):
    t = dl.full((1000,), 7.0, "float64")
    before = sys.getrefcount(t)
    b = dl.to_framework(t, like=np)
    assert sys.getrefcount(t) == before + 1  # the array's base, or its capsule's export
    del b
    assert sys.getrefcount(t) == before
    b = dl.to_framework(t, like=np)
    del t
    gc.collect()
    assert b.sum() == 7000.0


@pytest.mark.parametrize(
    "like, error, match",
    [
        ("no_such_framework_here", TypeError, "no such framework"),
        (3, TypeError, "has no from_dlpack"),
        (str, TypeError, "like= must be"),
        (type, TypeError, "like= must be"),
        (sys, TypeError, "has no from_dlpack"),
    ],
)
def test_to_framework_rejects_what_it_cannot_make(like, error, match):
    with pytest.raises(error, match=match):
        dl.to_framework(dl.zeros(2), like=like)


@needs_torch
def test_to_framework_torch_round_trips_many_times_without_leaks():
    x = torch.ones(3)
    before = live_buffers()
    exports = dl.memory_stats()["live_exports"]
    for _ in range(2000):
        y = dl.to_framework(dl.zeros_like(x), like=x)
        assert type(y) is torch.Tensor
    del y
    gc.collect()
    assert live_buffers() == before
    assert dl.memory_stats()["live_exports"] == exports
