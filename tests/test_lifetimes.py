"""Ownership of exported capsules (DLPack's capsule rules): names, versions and struct contents,
reference counts and live_exports, and chains of imports that hold one owner."""

import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlinterop as dl

from capsule_cases import (
    MAX_VERSIONS,
    CapsuleProducer,
    _set_name,
    live_exports,
    managed_struct,
    parametrize_max_version,
)
from forge import DLManagedTensor, capsule_name

# max_version -> (capsule name, version stamped on a versioned capsule)
EXPECTED = {
    None: ("dltensor", None),
    (0, 0): ("dltensor", None),
    (1, 0): ("dltensor_versioned", (1, 0)),
    (1, 3): ("dltensor_versioned", (1, 3)),
    (2, 0): ("dltensor_versioned", (1, 3)),
}


# --------------------------------------------------------------------------------------
# Names, versions, struct contents
# --------------------------------------------------------------------------------------


@parametrize_max_version
def test_capsule_name_follows_max_version(max_version):
    t = dl.zeros((2, 3))
    assert capsule_name(t.__dlpack__(max_version=max_version)) == EXPECTED[max_version][0]


@parametrize_max_version
def test_versioned_capsule_is_stamped_with_negotiated_version(max_version):
    t = dl.full((2, 3), 1.5)
    capsule = t.__dlpack__(max_version=max_version)
    m = managed_struct(capsule)
    version = EXPECTED[max_version][1]
    if version is None:
        assert isinstance(m, DLManagedTensor)
    else:
        assert (m.version.major, m.version.minor) == version
        assert m.flags == 0
    dlt = m.dl_tensor
    assert dlt.data + dlt.byte_offset == t.data_ptr
    assert (dlt.device.device_type, dlt.device.device_id) == (1, 0)
    assert (dlt.dtype.code, dlt.dtype.bits, dlt.dtype.lanes) == (2, 32, 1)
    assert [dlt.shape[i] for i in range(dlt.ndim)] == [2, 3]
    assert [dlt.strides[i] for i in range(dlt.ndim)] == [3, 1]
    assert m.deleter


@pytest.mark.parametrize(
    ("max_version", "expected"),
    [
        ((1, 1), (1, 1)),
        ((1, 2**40), (1, 3)),
        ((1, 2**70), (1, 3)),
        ((2**70, 0), (1, 3)),
        ((3, -5), (1, 3)),
        ((1, -1), (1, 0)),
        ((1, -(2**70)), (1, 0)),
        ((True, False), (1, 0)),
        ((0, 7), None),
        ((-1, 3), None),
        ((-(2**70), 9), None),
        ((2**30, 1), (1, 3)),
    ],
)
def test_max_version_parts_of_any_size(max_version, expected):
    # Small ints are read inline, others through PyLong_AsLongAndOverflow (saturating):
    # both must negotiate alike.
    capsule = dl.zeros((3, 2, 2)).__dlpack__(max_version=max_version)
    m = managed_struct(capsule)
    if expected is None:
        assert capsule_name(capsule) == "dltensor"
    else:
        assert capsule_name(capsule) == "dltensor_versioned"
        assert (m.version.major, m.version.minor) == expected
    assert [m.dl_tensor.shape[i] for i in range(3)] == [3, 2, 2]
    assert [m.dl_tensor.strides[i] for i in range(3)] == [4, 2, 1]


@pytest.mark.parametrize("versioned", [False, True])
def test_to_dlpack_name_and_version(versioned):
    t = dl.zeros((4,))
    capsule = dl.to_dlpack(t, versioned=versioned)
    assert capsule_name(capsule) == ("dltensor_versioned" if versioned else "dltensor")
    if versioned:
        m = managed_struct(capsule)
        assert (m.version.major, m.version.minor) == (1, 3)


# --------------------------------------------------------------------------------------
# Reference counts and live_exports
# --------------------------------------------------------------------------------------


@parametrize_max_version
def test_unconsumed_capsule_holds_one_reference(max_version):
    t = dl.zeros((2, 3))
    base, exports = sys.getrefcount(t), live_exports()
    capsule = t.__dlpack__(max_version=max_version)
    assert sys.getrefcount(t) == base + 1
    assert live_exports() == exports + 1
    del capsule
    assert sys.getrefcount(t) == base
    assert live_exports() == exports


@parametrize_max_version
def test_capsule_consumed_by_dlinterop_released_when_consumer_dies(max_version):
    t = dl.zeros((2, 3))
    base, exports = sys.getrefcount(t), live_exports()
    capsule = t.__dlpack__(max_version=max_version)
    view = dl.from_dlpack(capsule)
    assert capsule_name(capsule).startswith("used_")
    del capsule
    assert sys.getrefcount(t) == base + 1
    assert view.data_ptr == t.data_ptr
    del view
    gc.collect()
    assert sys.getrefcount(t) == base
    assert live_exports() == exports


@parametrize_max_version
def test_capsule_consumed_by_numpy_released_when_consumer_dies(max_version):
    t = dl.full((2, 3), 4.0)
    base, exports = sys.getrefcount(t), live_exports()
    capsule = t.__dlpack__(max_version=max_version)
    array = np.from_dlpack(CapsuleProducer(capsule))
    assert capsule_name(capsule).startswith("used_")
    del capsule
    assert sys.getrefcount(t) == base + 1
    assert live_exports() == exports + 1
    np.testing.assert_array_equal(array, np.full((2, 3), 4.0, np.float32))
    del array
    gc.collect()
    assert sys.getrefcount(t) == base
    assert live_exports() == exports


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
@parametrize_max_version
def test_consuming_twice_is_value_error(max_version):
    t = dl.zeros((3,))
    base = sys.getrefcount(t)
    capsule = t.__dlpack__(max_version=max_version)
    first = dl.from_dlpack(capsule)
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(capsule)
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(CapsuleProducer(capsule))
    del first, capsule
    gc.collect()
    assert sys.getrefcount(t) == base


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
def test_capsule_consumed_by_numpy_cannot_be_consumed_again():
    t = dl.zeros((3,))
    capsule = t.__dlpack__(max_version=(1, 3))
    array = np.from_dlpack(CapsuleProducer(capsule))
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(capsule)
    del array, capsule


@parametrize_max_version
def test_import_with_copy_releases_the_source_capsule_at_once(max_version):
    t = dl.full((3,), 2.0)
    base, exports = sys.getrefcount(t), live_exports()
    capsule = t.__dlpack__(max_version=max_version)
    copied = dl.from_dlpack(capsule, copy=True)
    assert capsule_name(capsule).startswith("used_")
    assert copied.data_ptr != t.data_ptr
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    del capsule, copied
    assert sys.getrefcount(t) == base


# Bytes objects whose buffers serve as capsule names: they must outlive the capsules.
_RESTORED_NAMES = {
    "dltensor": (b"used_dltensor", b"dltensor"),
    "dltensor_versioned": (b"used_dltensor_versioned", b"dltensor_versioned"),
}


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_capsule_with_restored_unconsumed_name_still_runs_deleter(versioned):
    # Regression: the destructors once compared the name *pointer* with dlinterop's own
    # string, so a name restored by a consumer (equal text, other buffer) leaked the export.
    t = dl.zeros((2,))
    base, exports = sys.getrefcount(t), live_exports()
    capsule = dl.to_dlpack(t, versioned=versioned)
    used, unconsumed = _RESTORED_NAMES[capsule_name(capsule)]
    assert _set_name(capsule, used) == 0
    assert _set_name(capsule, unconsumed) == 0
    assert capsule_name(capsule) == unconsumed.decode()
    del capsule
    assert live_exports() == exports
    assert sys.getrefcount(t) == base


def test_live_exports_goes_up_and_back_down():
    tensors = [dl.zeros((i + 1,)) for i in range(4)]
    exports = live_exports()
    capsules = [t.__dlpack__(max_version=mv) for t in tensors for mv in MAX_VERSIONS]
    assert live_exports() == exports + len(capsules)
    consumed = [dl.from_dlpack(c) for c in capsules[::2]]
    # dlinterop importing its own capsule releases that export at once: the new Tensor holds
    # the exported Tensor's memory owner instead.
    assert live_exports() == exports + len(capsules) - len(consumed)
    del capsules
    assert live_exports() == exports
    del consumed
    gc.collect()
    assert live_exports() == exports


# ---- ownership chains ----------------------------------------------------------------------

CHAINS = {
    "from_dlpack(t)": "t = dl.from_dlpack(t)",
    "versioned capsule": "t = dl.from_dlpack(dl.to_dlpack(t, versioned=True))",
    "legacy capsule": "t = dl.from_dlpack(dl.to_dlpack(t))",
    "__dlpack__": "t = dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))",
    "memoryview": "t = dl.asarray(memoryview(t))",
    # Through another framework each link holds the next through its objects, so no view can
    # skip it: deallocation queues what it releases past a depth (as CPython's trashcan).
    "numpy": "t = dl.from_dlpack(np.from_dlpack(t))",
    "torch": "t = dl.from_dlpack(torch.from_dlpack(t))",
}


@pytest.mark.parametrize("step", CHAINS.values(), ids=CHAINS.keys())
def test_a_long_chain_of_imports_is_freed_without_recursion(step):
    # Regression: 300,000 Tensors, each a view of the last, were freed by a recursion as
    # deep as the chain, which overflowed the C stack (a segfault).
    if "torch" in step:
        pytest.importorskip("torch")
    code = textwrap.dedent(f"""
        import numpy as np
        import dlinterop as dl
        if {"torch" in step}:
            import torch
        t = dl.full((3,), 2.0)
        for _ in range(300_000):
            {step}
        assert memoryview(t).tolist() == [2.0, 2.0, 2.0]
        del t
        stats = dl.memory_stats()
        print(stats["live_buffers"], stats["live_exports"])
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["0", "0"]


def test_a_view_holds_the_memory_owner_not_the_view_it_was_made_from():
    t = dl.zeros(4)
    u = dl.from_dlpack(t)
    v = dl.from_dlpack(u)
    w = dl.from_dlpack(dl.to_dlpack(v, versioned=True))
    assert u.owner is t and v.owner is t and w.owner is t
    a = np.arange(3.0)
    x = dl.from_dlpack(a)
    # Through NumPy's native route x views the array; through __dlpack__ x holds the
    # capsule's managed tensor itself.
    assert dl.from_dlpack(x).owner is (a if x.owner is a else x)


def test_importing_dlinterops_own_capsule_releases_the_export_at_once():
    t = dl.zeros(4)
    before = dl.memory_stats()["live_exports"]
    capsule = dl.to_dlpack(t, versioned=True)
    assert dl.memory_stats()["live_exports"] == before + 1
    u = dl.from_dlpack(capsule)
    assert dl.memory_stats()["live_exports"] == before
    assert capsule_name(capsule) == "used_dltensor_versioned"
    assert u.data_ptr == t.data_ptr and u.owner is t
    del t
    gc.collect()
    assert memoryview(u).tolist() == [0.0] * 4  # u keeps the memory alive
