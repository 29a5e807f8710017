"""Ownership of exported capsules: producer and consumer dying in either order, and capsules dying
while an exception is in flight (it survives, unchanged)."""

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import dlinterop as dl

from capsule_cases import (
    CapsuleProducer,
    live_exports,
    managed_struct,
    parametrize_max_version,
)


@pytest.fixture
def unraisable():
    """Everything reported through sys.unraisablehook while the test runs."""
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    yield seen
    sys.unraisablehook = old


# --------------------------------------------------------------------------------------
# Producer and consumer dying in either order
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "producer_dies_first", [True, False], ids=["producer-first", "consumer-first"]
)
@parametrize_max_version
def test_dl_to_numpy_either_order(max_version, producer_dies_first, live_counters):
    before = live_counters()
    t = dl.full((3, 2), 7.0)
    capsule = t.__dlpack__(max_version=max_version)
    array = np.from_dlpack(CapsuleProducer(capsule))
    del capsule
    if producer_dies_first:
        del t
        gc.collect()
        assert live_counters()["live_buffers"] == before["live_buffers"] + 1
        np.testing.assert_array_equal(array, np.full((3, 2), 7.0, np.float32))
        del array
    else:
        del array
        gc.collect()
        assert live_exports() == before["live_exports"]
        assert t.shape == (3, 2)
        del t
    gc.collect()
    assert live_counters() == before


@pytest.mark.parametrize(
    "producer_dies_first", [True, False], ids=["producer-first", "consumer-first"]
)
def test_dl_to_numpy_direct_either_order(producer_dies_first, live_counters):
    before = live_counters()
    t = dl.full((5,), 3.0, dtype="float64")
    array = np.from_dlpack(t)
    first, second = ("t", "array") if producer_dies_first else ("array", "t")
    namespace = {"t": t, "array": array}
    del t, array
    namespace.pop(first)
    gc.collect()
    if producer_dies_first:
        np.testing.assert_array_equal(namespace["array"], np.full(5, 3.0))
    namespace.pop(second)
    gc.collect()
    assert live_counters() == before


@pytest.mark.parametrize(
    "producer_dies_first", [True, False], ids=["producer-first", "consumer-first"]
)
def test_numpy_to_dl_either_order(producer_dies_first):
    array = np.arange(6.0).reshape(2, 3)
    alive = weakref.ref(array)
    base = sys.getrefcount(array)
    t = dl.from_dlpack(array)
    assert sys.getrefcount(array) > base
    if producer_dies_first:
        del array
        gc.collect()
        assert alive() is not None
        np.testing.assert_array_equal(np.asarray(t), np.arange(6.0).reshape(2, 3))
        del t
    else:
        del t
        gc.collect()
        assert sys.getrefcount(array) == base
        del array
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize(
    "producer_dies_first", [True, False], ids=["producer-first", "consumer-first"]
)
@parametrize_max_version
def test_dl_to_dl_either_order(max_version, producer_dies_first, live_counters):
    before = live_counters()
    t = dl.full((4,), 2.0)
    u = dl.from_dlpack(t.__dlpack__(max_version=max_version))
    if producer_dies_first:
        del t
        gc.collect()
        assert np.asarray(u).tolist() == [2.0] * 4
        del u
    else:
        del u
        gc.collect()
        del t
    gc.collect()
    assert live_counters() == before


# --------------------------------------------------------------------------------------
# Exceptions in flight
# --------------------------------------------------------------------------------------


@parametrize_max_version
def test_exception_survives_capsule_deleted_in_handler(max_version, unraisable):
    t = dl.zeros((2,))
    base = sys.getrefcount(t)
    capsule = t.__dlpack__(max_version=max_version)
    raised = KeyError("x")
    try:
        try:
            raise raised
        except KeyError:
            del capsule
            raise
    except BaseException as caught:
        assert caught is raised
    assert sys.getrefcount(t) == base
    assert unraisable == []


@parametrize_max_version
def test_exception_survives_capsule_dying_during_unwinding(max_version, unraisable):
    # map() drops its reference to the capsule in C right after the call raised, i.e.
    # while the TypeError is set: the capsule destructor and deleter run with it pending.
    t = dl.zeros((2,))
    base, exports = sys.getrefcount(t), live_exports()
    with pytest.raises(TypeError, match="fromhex") as info:
        list(map(bytes.fromhex, (t.__dlpack__(max_version=max_version) for _ in range(3))))
    assert type(info.value) is TypeError
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    assert unraisable == []


@parametrize_max_version
def test_exception_survives_consumer_tensor_dying_during_unwinding(max_version, unraisable):
    t = dl.zeros((2,))
    base, exports = sys.getrefcount(t), live_exports()
    views = (dl.from_dlpack(t.__dlpack__(max_version=max_version)) for _ in range(3))
    with pytest.raises(TypeError, match="fromhex"):
        list(map(bytes.fromhex, views))
    del views
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    assert unraisable == []


class _RejectedCapsuleProducer:
    """Returns a real dlinterop capsule made unimportable (major version 2) after export:
    the importer rejects it and drops the last reference with the BufferError set."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        capsule = self.tensor.__dlpack__(max_version=(1, 3))
        managed_struct(capsule).version.major = 2
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_exception_survives_rejected_dl_capsule_dying_in_importer(unraisable):
    t = dl.zeros((2,))
    base, exports = sys.getrefcount(t), live_exports()
    producer = _RejectedCapsuleProducer(t)
    with pytest.raises(BufferError, match="major version 2") as info:
        dl.from_dlpack(producer)
    assert type(info.value) is BufferError
    with pytest.raises(BufferError, match="major version 2"):
        dl.from_dlpack(producer, copy=True)
    assert sys.getrefcount(t) == base + 1  # producer.tensor
    del producer
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    assert unraisable == []


_PYTHON_DELETER_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {support!r})
    import dlinterop as dl
    from forge import forge

    for versioned in (True, False):
        forged = forge(versioned=versioned)
        def capsules():
            # The capsule holds the only reference to a Tensor whose deleter is a Python
            # (ctypes) callback: that callback must run with no exception set.
            yield dl.from_dlpack(forged.capsule).__dlpack__(max_version=(1, 3))
        try:
            list(map(bytes.fromhex, capsules()))
        except TypeError as error:
            assert "fromhex" in str(error), error
        else:
            raise AssertionError("no TypeError")
        assert forged.deleter_calls == 1, forged.deleter_calls
    assert dl.memory_stats()["live_exports"] == 0
""")


def test_exception_survives_capsule_death_that_runs_python_deleters():
    # In a subprocess: if the exception were set while the ctypes deleter runs, CPython
    # 3.11 can crash while unwinding (see forge's caveat).
    script = _PYTHON_DELETER_SCRIPT.format(
        support=os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr == ""
