"""dl.Tensor: attributes, layout, copies, repr, construction."""

import gc
import math

import numpy as np
import pytest

import dlinterop as dl

from tensor_cases import (
    ALL_NAMES,
    LAYOUTS,
    _raw,
    _write_pattern,
)

# -- attributes -------------------------------------------------------------------------


@pytest.mark.parametrize("ndim", [0, 1, 4, 5, 8, 32])
def test_attributes_of_owned_tensor(ndim):
    shape = tuple(2 if i % 3 == 0 else 1 for i in range(ndim))
    t = dl.zeros(shape, "int16")
    assert t.shape == shape
    assert type(t.shape) is tuple and type(t.strides) is tuple
    assert len(t.strides) == ndim
    assert t.ndim == ndim
    assert t.size == math.prod(shape)
    assert t.itemsize == 2
    assert t.nbytes == 2 * t.size
    assert isinstance(t.data_ptr, int) and t.data_ptr != 0
    assert t.readonly is False
    assert t.owner is None
    assert t.dtype is dl.int16
    assert isinstance(t.device, dl.Device) and t.device == "cpu:0"


def test_attributes_of_imported_view():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)[:, 1:, ::2]
    t = dl.from_dlpack(a)
    assert t.shape == (2, 2, 2)
    assert t.strides == (12, 4, 2)
    assert t.size == 8
    assert t.nbytes == 64
    assert t.itemsize == 8
    assert t.data_ptr == a.ctypes.data
    assert t.owner is not None
    assert t.readonly is False


def test_zero_d_tensor_attributes():
    t = dl.full((), 7, "int32")
    assert t.shape == () and t.strides == () and t.ndim == 0
    assert t.size == 1 and t.nbytes == 4
    with pytest.raises(TypeError):
        len(t)


def test_len_is_first_dimension():
    assert len(dl.empty((5, 2))) == 5


@pytest.mark.parametrize(
    "attr",
    [
        "shape",
        "strides",
        "dtype",
        "device",
        "ndim",
        "size",
        "nbytes",
        "itemsize",
        "data_ptr",
        "readonly",
        "readonly_reason",
        "owner",
    ],
)
def test_tensor_attributes_are_read_only(attr):
    t = dl.zeros((2, 3))
    with pytest.raises(AttributeError):
        setattr(t, attr, getattr(t, attr))


def test_owned_buffers_are_freed():
    gc.collect()
    before = dl.memory_stats()
    tensors = [dl.zeros((16, 16), "float64") for _ in range(5)]
    during = dl.memory_stats()
    assert during["live_buffers"] == before["live_buffers"] + 5
    assert during["live_bytes"] >= before["live_bytes"] + 5 * 16 * 16 * 8
    del tensors
    gc.collect()
    after = dl.memory_stats()
    assert after["live_buffers"] == before["live_buffers"]
    assert after["live_bytes"] == before["live_bytes"]


# -- is_contiguous ----------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_is_contiguous_follows_c_order(layout):
    make, expected = LAYOUTS[layout]
    assert dl.from_dlpack(make()).is_contiguous() is expected


@pytest.mark.parametrize("shape", [(0,), (3, 0), (2, 0, 1), (0, 0)])
def test_zero_size_tensor_is_contiguous(shape):
    assert dl.empty(shape).is_contiguous()
    assert dl.empty(shape).size == 0
    assert dl.empty(shape).nbytes == 0


# -- copy and to ------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_is_new_c_contiguous_buffer_with_same_values(layout):
    a = LAYOUTS[layout][0]()
    t = dl.from_dlpack(a)
    c = t.copy()
    assert c.is_contiguous()
    assert c.owner is None
    assert not c.readonly
    assert c.shape == t.shape and c.dtype is t.dtype
    if a.size > 0:
        assert c.data_ptr != t.data_ptr
    b = np.from_dlpack(c)
    assert b.flags.c_contiguous
    assert np.array_equal(b, a)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_copy_of_owned_tensor_keeps_bytes(name):
    t = dl.empty((3, 4), name)
    pattern = _write_pattern(t)
    c = t.copy()
    assert c.data_ptr != t.data_ptr
    assert c.dtype is t.dtype and c.shape == t.shape
    assert _raw(c) == pattern


def test_copy_does_not_alias():
    t = dl.zeros(4, "int32")
    c = t.copy()
    memoryview(c)[0] = 9
    assert memoryview(t)[0] == 0


def test_copy_to_cpu_device_keyword():
    t = dl.full(3, 2.0)
    c = t.copy(device="cpu")
    assert c.data_ptr != t.data_ptr and np.from_dlpack(c).tolist() == [2.0] * 3


def test_to_same_device_returns_self():
    t = dl.zeros(3)
    assert t.to("cpu") is t
    assert t.to(dl.Device("cpu")) is t
    assert t.to("cpu:0", copy=False) is t


def test_to_with_copy_true_copies():
    t = dl.full(3, 5, "int64")
    c = t.to("cpu", copy=True)
    assert c is not t
    assert c.data_ptr != t.data_ptr
    assert np.from_dlpack(c).tolist() == [5, 5, 5]


def test_to_cuda_without_gpu_raises_a_clear_error():
    if dl.cuda.is_available():
        pytest.skip("a GPU is present")
    t = dl.zeros(3)
    with pytest.raises(Exception, match="cuda") as info:
        t.to("cuda")
    assert not isinstance(info.value, (SystemError, AttributeError))
    with pytest.raises(dl.CopyError):
        t.to("cuda", copy=False)


def test_to_rejects_bad_copy_argument():
    with pytest.raises(TypeError):
        dl.zeros(3).to("cpu", copy="yes")


# -- repr and construction --------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, name, text",
    [
        (
            (2, 3),
            "float32",
            "Tensor([[0.0, 0.0, 0.0],\n        [0.0, 0.0, 0.0]], shape=(2, 3), dtype=float32, "
            "device=cpu:0)",
        ),
        ((), "int64", "Tensor(0, shape=(), dtype=int64, device=cpu:0)"),
        (
            (4,),
            "bfloat16",
            "Tensor([0.0, 0.0, 0.0, 0.0], shape=(4,), dtype=bfloat16, device=cpu:0)",
        ),
        ((0, 2), "bool", "Tensor([], shape=(0, 2), dtype=bool, device=cpu:0)"),
    ],
)
def test_repr(shape, name, text):
    assert repr(dl.zeros(shape, name)) == text


@pytest.mark.parametrize("args, kwargs", [((), {}), ((2, 3), {}), ((), {"shape": (2,)})])
def test_tensor_cannot_be_constructed_directly(args, kwargs):
    with pytest.raises(TypeError):
        dl.Tensor(*args, **kwargs)


def test_readonly_reason_tells_an_assumption_from_a_flag():
    t = dl.zeros((6,))
    assert t.readonly_reason is None
    legacy = dl.from_dlpack(dl.to_dlpack(t))  # a legacy capsule cannot say
    assert legacy.readonly and legacy.readonly_reason == "legacy"
    assert repr(legacy).endswith("readonly='legacy')")
    flagged = dl.from_dlpack(dl.to_dlpack(legacy, versioned=True))  # says READ_ONLY
    assert flagged.readonly and flagged.readonly_reason == "flag"
    assert repr(flagged).endswith("readonly='flag')")
    assert legacy.copy().readonly_reason is None


@pytest.mark.parametrize(
    "export",
    [
        lambda t: dl.to_dlpack(t),
        lambda t: t.__dlpack__(),
        lambda t: t.__dlpack__(stream=-1),
        lambda t: t.__dlpack__(max_version=(0, 8), copy=False),
    ],
    ids=["to_dlpack", "__dlpack__", "stream=-1", "copy=False"],
)
def test_legacy_export_of_read_only_tensors_depends_on_the_reason(export):
    legacy = dl.from_dlpack(dl.to_dlpack(dl.zeros((2, 3))))
    again = dl.from_dlpack(export(legacy))
    assert again.data_ptr == legacy.data_ptr and again.readonly_reason == "legacy"
    flagged = dl.from_dlpack(dl.to_dlpack(legacy, versioned=True))
    with pytest.raises(BufferError, match="read-only"):
        export(flagged)
    # A copy is writable, so it travels as a legacy capsule.
    assert dl.from_dlpack(flagged.__dlpack__(copy=True)).readonly_reason == "legacy"
