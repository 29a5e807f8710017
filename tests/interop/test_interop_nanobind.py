"""Interop with nanobind's `nb::ndarray`, through a small extension module built for the
purpose (dlinterop.testing._nanobind, the checker's nanobind peer): every dtype it takes,
layouts, 0-d and zero-size arrays, read-only memory and lifetimes, both ways.

What nanobind does (asked of it, docs/frameworks.md): `nb::ndarray<nb::ro>` takes any
producer's tensor, whatever its dtype, calling `__dlpack__()` with no max_version (so
dlinterop answers with a legacy capsule), and neutralises the capsule by clearing its
destructor rather than renaming it; a function that returns an imported array hands back
the object it came from, so only an object that holds the `nb::ndarray` keeps the import
alive (the module's `Held`). Its own ndarray object exports versioned capsules, READ_ONLY
for `nb::ro` arrays.
"""

import gc

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
from peer_values import STANDARD, values_of  # noqa: E402

pytest.importorskip("nanobind")
nanobind_peer = pytest.importorskip("dlinterop.testing._nanobind")


@pytest.fixture(scope="module")
def peer():
    try:
        return nanobind_peer.peer()
    except ImportError as e:  # no C++ compiler: nothing of nanobind's can be built here
        pytest.skip(str(e))


DTYPES = STANDARD + ["bfloat16", "float8_e4m3fn", "float8_e5m2"]


def tensor_of(name):
    if name.startswith("float8"):
        return dl.tensor(values_of("float32").tolist(), name)
    return dl.tensor(values_of(name).tolist(), name)


@pytest.mark.parametrize("name", DTYPES)
def test_nanobind_takes_every_dtype_without_copying(peer, name):
    t = tensor_of(name)
    held = peer.from_dlpack(t)
    back = dl.from_dlpack(held)
    assert back.dtype == t.dtype and back.data_ptr == t.data_ptr
    assert back.tolist() == t.tolist()
    # taken as nb::ndarray<nb::ro>, it is exported READ_ONLY
    assert back.readonly_reason == "flag"


@pytest.mark.parametrize("name", DTYPES)
def test_arrays_nanobind_owns_import_writable(peer, name):
    t = tensor_of(name)
    owned = peer.copy(t)
    out = dl.from_dlpack(owned)
    assert out.tolist() == t.tolist() and out.data_ptr != t.data_ptr
    assert not out.readonly
    del owned
    gc.collect()
    assert out.tolist() == t.tolist()


def test_layouts_zero_d_and_zero_size(peer):
    grid = dl.arange(12, dtype="float32").reshape((3, 4))
    for view in (grid.T, grid[::-1], grid[:, ::2], grid[1:], grid[2]):
        back = dl.from_dlpack(peer.from_dlpack(view))
        assert back.strides == view.strides and back.tolist() == view.tolist()
        assert dl.from_dlpack(peer.copy(view)).tolist() == view.tolist()
    scalar = dl.full((), 2.5, "float64")
    assert dl.from_dlpack(peer.from_dlpack(scalar)).tolist() == 2.5
    assert dl.from_dlpack(peer.copy(scalar)).tolist() == 2.5
    assert dl.from_dlpack(peer.from_dlpack(dl.zeros((0, 3), "int32"))).shape == (0, 3)


def test_the_import_keeps_the_tensor_alive_until_its_holder_dies(peer):
    t = dl.arange(1000, dtype="int64")
    stats = dl.memory_stats()
    held = peer.from_dlpack(t)
    del t
    gc.collect()
    assert dl.memory_stats()["live_buffers"] == stats["live_buffers"]
    assert dl.from_dlpack(held).tolist() == list(range(1000))
    del held
    gc.collect()
    assert dl.memory_stats()["live_buffers"] == stats["live_buffers"] - 1


def test_nanobind_ndarrays_publish_no_exchange_table(peer):
    owned = peer.copy(dl.zeros((2,), "float32"))
    assert not hasattr(type(owned), "__dlpack_c_exchange_api__")
    assert not hasattr(type(owned), "__c_dlpack_exchange_api__")
