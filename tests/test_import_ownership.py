"""The one ownership step of every import of a managed tensor: a versioned capsule, a legacy
capsule and the stable ABI's tensor_from_managed (what the C exchange table's import calls)
each leave the producer's deleter called exactly once, when the Tensor dies, when padded
data was repacked, or at once when the import fails after taking ownership; dlinterop's own
export comes back without a link to the export. Forged tensors (tests/support/forge/)
count their deleter's calls."""

import ctypes

import numpy as np
import pytest

import dlinterop as dl

from abi_table import abi_entry
from forge import IS_SUBBYTE_TYPE_PADDED, capsule_name, forge

ROUTES = ["versioned capsule", "legacy capsule", "tensor_from_managed"]
VERSIONED_ROUTES = ["versioned capsule", "tensor_from_managed"]

_from_managed = None


def from_managed(address, readonly=0):
    """The stable ABI's tensor_from_managed entry, called as a C producer would."""
    global _from_managed
    if _from_managed is None:
        _from_managed = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_int)(
            abi_entry("tensor_from_managed")
        )
    return _from_managed(address, readonly)


def give_up(f):
    """Renames f's capsule as consumed, so that only the entry it is handed to owns it."""
    ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ctypes.pythonapi.PyCapsule_SetName(f.capsule, b"used_dltensor_versioned")


def forged_for(route, **kwargs):
    return forge(versioned=route != "legacy capsule", **kwargs)


def import_through(route, f):
    if route == "tensor_from_managed":
        give_up(f)
        return from_managed(f.address)
    return dl.from_dlpack(f.capsule)


@pytest.mark.parametrize("route", ROUTES)
def test_a_producers_tensor_is_released_once_when_the_tensor_dies(route):
    f = forged_for(route, shape=(2, 3))
    t = import_through(route, f)
    assert t.data_ptr == f.element_ptr and f.deleter_calls == 0
    assert capsule_name(f.capsule).startswith("used_")
    # A capsule's Tensor holds the consumed capsule; the C entry's holds nothing else.
    assert t.owner is (None if route == "tensor_from_managed" else f.capsule)
    del t
    assert f.deleter_calls == 1
    f.release()
    assert f.deleter_calls == 1


@pytest.mark.parametrize("route", VERSIONED_ROUTES)
def test_padded_data_is_repacked_and_its_producer_released_at_once(route):
    f = forge(shape=(4,), dtype=(1, 4, 1), strides=(1,), flags=IS_SUBBYTE_TYPE_PADDED)
    ctypes.memmove(f.data_ptr, bytes([0xF1, 0x02, 0x03, 0x0F]), 4)
    t = import_through(route, f)
    assert f.deleter_calls == 1  # the copy holds the values
    assert t.tolist() == [1, 2, 3, 15] and t.is_copied and t.owner is None
    del t
    f.release()
    assert f.deleter_calls == 1


@pytest.mark.parametrize("route", VERSIONED_ROUTES)
def test_padded_data_on_a_device_is_refused_after_one_release(route):
    f = forge(shape=(4,), dtype=(17, 4, 1), device=(2, 0), flags=IS_SUBBYTE_TYPE_PADDED)
    with pytest.raises(BufferError, match="padded float4_e2m1fn data on cuda:0"):
        import_through(route, f)
    # Ownership was taken before the repacking failed: the deleter ran then, once.
    assert f.deleter_calls == 1
    assert capsule_name(f.capsule) == "used_dltensor_versioned"
    f.release()
    assert f.deleter_calls == 1


@pytest.mark.parametrize("route", ROUTES)
def test_a_tensor_refused_before_ownership_is_the_callers_to_release(route):
    f = forged_for(route, shape=(2,), dtype=(2, 32, 3))  # three lanes: refused
    with pytest.raises(BufferError, match="lanes"):
        import_through(route, f)
    if route == "tensor_from_managed":
        assert f.deleter_calls == 1  # the entry calls the deleter of what it refuses
    else:
        assert f.deleter_calls == 0 and not capsule_name(f.capsule).startswith("used_")
        f.release()  # the capsule still owns it
        assert f.deleter_calls == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_an_own_export_comes_back_holding_the_memorys_owner(versioned):
    t = dl.from_dlpack(np.arange(6, dtype=np.float32)).copy()
    before = dl.memory_stats()["live_exports"]
    u = dl.from_dlpack(t.__dlpack__(max_version=(1, 3) if versioned else None))
    assert u.owner is t and u.data_ptr == t.data_ptr
    assert u.readonly_reason == (None if versioned else "legacy")
    assert dl.memory_stats()["live_exports"] == before  # the export released at once
