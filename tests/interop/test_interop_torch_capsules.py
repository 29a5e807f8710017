"""Interop with PyTorch (CPU): the capsule functions of torch.utils.dlpack both ways, lifetimes
whichever side dies first, and read-only memory.

Zero-copy is proven by pointer equality, values by comparing bytes."""

import warnings

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")


torch = pytest.importorskip("torch")


tud = pytest.importorskip("torch.utils.dlpack")


pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")


# -- capsules ---------------------------------------------------------------------------


def _capsule_name(capsule):
    import ctypes

    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi)
    )
    return get_name(capsule).decode()


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
def test_torch_legacy_capsule_into_dl_is_read_only_and_consumed_once():
    x = torch.arange(6.0)
    capsule = tud.to_dlpack(x)
    assert _capsule_name(capsule) == "dltensor"
    t = dl.from_dlpack(capsule)
    assert _capsule_name(capsule) == "used_dltensor"
    assert t.data_ptr == x.data_ptr()
    assert t.readonly  # a legacy capsule cannot say the memory is writable
    assert np.array_equal(np.from_dlpack(t), x.numpy())
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(capsule)


def test_torch_versioned_capsule_into_dl_is_writable():
    x = torch.arange(6.0)
    capsule = x.__dlpack__(max_version=(1, 3))
    assert _capsule_name(capsule) == "dltensor_versioned"
    t = dl.from_dlpack(capsule)
    assert _capsule_name(capsule) == "used_dltensor_versioned"
    assert t.data_ptr == x.data_ptr() and not t.readonly
    np.from_dlpack(t)[0] = 42.0
    assert x[0] == 42.0


@pytest.mark.parametrize("versioned", [False, True], ids=["dltensor", "dltensor_versioned"])
@pytest.mark.parametrize("consumer", ["torch.utils.dlpack.from_dlpack", "torch.from_dlpack"])
def test_dl_capsule_into_torch(live_counters, versioned, consumer):
    before = live_counters()
    t = dl.full((2, 3), 7.0, dtype="float32")
    capsule = dl.to_dlpack(t, versioned=versioned)
    y = (tud.from_dlpack if consumer.startswith("torch.utils") else torch.from_dlpack)(capsule)
    assert _capsule_name(capsule) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert y.data_ptr() == t.data_ptr
    assert torch.equal(y, torch.full((2, 3), 7.0))
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del y  # torch calls the deleter
    assert live_counters()["live_exports"] == before["live_exports"]


def test_torch_refuses_a_consumed_dl_capsule():
    t = dl.zeros(3)
    capsule = dl.to_dlpack(t)
    y = tud.from_dlpack(capsule)
    with pytest.raises(RuntimeError):
        tud.from_dlpack(capsule)
    del y


@pytest.mark.parametrize("versioned", [False, True], ids=["dltensor", "dltensor_versioned"])
def test_unconsumed_capsules_release_everything(live_counters, versioned):
    before = live_counters()
    t = dl.zeros((4, 4))
    capsule = dl.to_dlpack(t, versioned=versioned)
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del capsule
    assert live_counters()["live_exports"] == before["live_exports"]
    # torch's own capsules, never consumed, die with torch's deleter (no crash, nothing of
    # dlinterop's involved).
    x = torch.arange(4.0)
    torch_capsule = x.__dlpack__(max_version=(1, 3) if versioned else None)
    del torch_capsule, x


# -- lifetimes --------------------------------------------------------------------------


def test_torch_producer_deleted_before_dl_consumer():
    x = torch.arange(1000, dtype=torch.float64)
    t = dl.from_dlpack(x)
    del x
    torch.zeros(1000, dtype=torch.float64)  # would reuse freed memory
    assert np.array_equal(np.from_dlpack(t), np.arange(1000.0))


def test_dl_consumer_deleted_before_torch_producer():
    x = torch.arange(10.0)
    t = dl.from_dlpack(x)
    del t
    assert torch.equal(x, torch.arange(10.0))
    x.mul_(2)


def test_dl_producer_deleted_before_torch_consumer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = torch.from_dlpack(t)
    del t
    # PyTorch's reference keeps dlinterop's buffer alive.
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    assert torch.equal(y, torch.full((100,), 3.0, dtype=torch.float64))
    del y
    assert live_counters() == before


def test_torch_consumer_deleted_before_dl_producer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = torch.from_dlpack(t)
    del y
    assert live_counters()["live_exports"] == before["live_exports"]
    assert np.array_equal(np.from_dlpack(t), np.full(100, 3.0))


# -- read-only --------------------------------------------------------------------------


def _read_only_dl_tensor():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    return t, a


def test_torch_ignores_read_only_flag():
    """PyTorch has no read-only tensors: it accepts a versioned capsule with READ_ONLY and
    shares the memory writable, silently. Pinned (a PyTorch limitation); dlinterop did its
    part by setting the flag."""
    t, a = _read_only_dl_tensor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = torch.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr
    y[0] = 42.0
    assert a[0] == 42.0


def test_read_only_tensor_cannot_travel_as_a_legacy_capsule_to_torch():
    t, _ = _read_only_dl_tensor()
    with pytest.raises(BufferError, match="read-only"):
        dl.to_dlpack(t)
    y = tud.from_dlpack(dl.to_dlpack(t, versioned=True))
    assert y.data_ptr() == t.data_ptr
