"""Ownership of exported capsules (DLPack's capsule rules): reference counts, deleters that run
exactly once on any thread and at shutdown, and exceptions that survive a capsule's death.

A dlinterop capsule holds one reference to its Tensor; its deleter drops that reference,
frees the managed struct and decrements memory_stats()["live_exports"]. So "the deleter
ran exactly once" is checked as: the Tensor's refcount is back to its base (a second run
would take it below) and live_exports is back to where it was.
"""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import dlinterop as dl

from forge import DLManagedTensor, DLManagedTensorVersioned, capsule_name

MAX_VERSIONS = [None, (0, 0), (1, 0), (1, 3), (2, 0)]
MV_IDS = ["None", "0.0", "1.0", "1.3", "2.0"]
# max_version -> (capsule name, version stamped on a versioned capsule)
EXPECTED = {
    None: ("dltensor", None),
    (0, 0): ("dltensor", None),
    (1, 0): ("dltensor_versioned", (1, 0)),
    (1, 3): ("dltensor_versioned", (1, 3)),
    (2, 0): ("dltensor_versioned", (1, 3)),
}
parametrize_max_version = pytest.mark.parametrize("max_version", MAX_VERSIONS, ids=MV_IDS)

# Private function objects, so that ctypes.pythonapi's shared ones keep their settings.
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi)
)
# A capsule keeps a raw pointer to its name: these bytes must outlive every capsule.
_USED_NAMES = {"dltensor": b"used_dltensor", "dltensor_versioned": b"used_dltensor_versioned"}
# A ctypes foreign call releases the GIL for its duration.
_RAW_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def managed_struct(capsule):
    """The capsule's DLManagedTensor[Versioned], read in place with forge's ctypes types."""
    name = capsule_name(capsule)
    address = _get_pointer(capsule, name.encode())
    assert address
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return struct.from_address(address)


def live_exports():
    return dl.memory_stats()["live_exports"]


class CapsuleProducer:
    """Hands a ready-made capsule to a consumer (NumPy) that only takes __dlpack__ objects."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        capsule, self.capsule = self.capsule, None
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


@pytest.fixture
def unraisable():
    """Everything reported through sys.unraisablehook while the test runs."""
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    yield seen
    sys.unraisablehook = old


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


# --------------------------------------------------------------------------------------
# Deleters on other threads
# --------------------------------------------------------------------------------------


def _detach_deleter(capsule):
    """Renames the capsule to used_* (so its destructor does nothing) and returns a
    zero-argument callable that runs its deleter through a GIL-releasing ctypes call."""
    name = capsule_name(capsule)
    address = _get_pointer(capsule, name.encode())
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    deleter = ctypes.c_void_p.from_address(address + struct.deleter.offset).value
    assert deleter
    assert _set_name(capsule, _USED_NAMES[name]) == 0
    function = _RAW_DELETER(deleter)
    return lambda: function(address)


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_deleter_called_from_another_thread_without_gil(versioned):
    t = dl.zeros((8,))
    base, exports = sys.getrefcount(t), live_exports()
    capsule = dl.to_dlpack(t, versioned=versioned)
    call_deleter = _detach_deleter(capsule)
    assert sys.getrefcount(t) == base + 1
    thread = threading.Thread(target=call_deleter)
    thread.start()
    thread.join()
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    del capsule  # used_*: its destructor must not run the deleter a second time
    assert sys.getrefcount(t) == base
    assert live_exports() == exports


def test_deleters_called_concurrently_from_many_threads():
    t = dl.zeros((8,))
    base, exports = sys.getrefcount(t), live_exports()
    capsules = [dl.to_dlpack(t, versioned=bool(i % 2)) for i in range(64)]
    calls = [_detach_deleter(c) for c in capsules]
    assert sys.getrefcount(t) == base + 64
    start = threading.Barrier(8)

    def worker(chunk):
        start.wait()
        for call in chunk:
            call()

    threads = [threading.Thread(target=worker, args=(calls[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    del capsules


def test_capsules_released_on_other_threads():
    t = dl.zeros((8,))
    base, exports = sys.getrefcount(t), live_exports()
    capsules = [t.__dlpack__(max_version=mv) for mv in MAX_VERSIONS * 4]
    views = [dl.from_dlpack(c) for c in capsules[::3]]
    box = [capsules, views]
    del capsules, views
    thread = threading.Thread(target=box.clear)
    thread.start()
    thread.join()
    assert sys.getrefcount(t) == base
    assert live_exports() == exports


# --------------------------------------------------------------------------------------
# Interpreter shutdown
# --------------------------------------------------------------------------------------

_SHUTDOWN_SCRIPT = textwrap.dedent("""
    import threading, time
    import numpy as np
    import dlinterop as dl

    # Module globals, released while the interpreter finalises.
    t = dl.zeros((4, 4))
    capsules = [t.__dlpack__(max_version=mv) for mv in (None, (0, 0), (1, 0), (1, 3), (2, 0))]
    legacy = dl.to_dlpack(dl.full((3,), 1.0))
    numpy_view = np.from_dlpack(dl.full((5,), 2.0))
    dl_view = dl.from_dlpack(np.arange(6.0))
    chained = dl.from_dlpack(dl.to_dlpack(dl.zeros((2,)), versioned=True))

    # Reference cycles, left for the final collection.
    class Node:
        pass
    a, b = Node(), Node()
    a.other, b.other = b, a
    a.capsule = dl.zeros((8,)).__dlpack__(max_version=(1, 3))
    b.tensor = dl.zeros((8,))
    b.view = np.from_dlpack(b.tensor)
    b.dl_view = dl.from_dlpack(b.tensor.__dlpack__(max_version=(1, 0)))
    cycle = [dl.to_dlpack(dl.zeros((2, 2))), dl.zeros((3,))]
    cycle.append(cycle)
    del a, b, cycle

    # Daemon threads: one holds capsules forever, one keeps making and dropping them.
    ready = threading.Event()
    def hold():
        held = [dl.zeros((16,)).__dlpack__(max_version=(1, 3)) for _ in range(4)]
        held.append(np.from_dlpack(dl.zeros((16,))))
        held.append(dl.to_dlpack(dl.zeros((16,))))
        ready.set()
        # Blocked for good, never woken: a daemon thread that wakes from time.sleep while
        # the interpreter finalises can crash CPython 3.10 itself in take_gil (no dlinterop
        # frame on the stack; python/cpython#110052 is that race).
        threading.Event().wait()
    def churn():
        source = dl.zeros((16,))
        while True:
            capsule = source.__dlpack__(max_version=(1, 3))
            view = np.from_dlpack(source)
            del capsule, view
    threading.Thread(target=hold, daemon=True).start()
    threading.Thread(target=churn, daemon=True).start()
    ready.wait()
    time.sleep(0.02)
""")


@pytest.mark.parametrize("run", range(3))
def test_deleters_at_interpreter_shutdown_are_silent(run):
    # Without the sanitizer, which lists what is still live at exit, as it should.
    env = {k: v for k, v in os.environ.items() if k != "DLINTEROP_SANITIZE"}
    proc = subprocess.run(
        [sys.executable, "-c", _SHUTDOWN_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr == ""


# --------------------------------------------------------------------------------------
# Deleters on threads Python has never seen
# --------------------------------------------------------------------------------------

# A native thread (pthread_create straight into dlinterop's deleter, no Python code on it)
# is what a C++ framework's worker releasing a tensor looks like: no thread state, no GIL.
_libc = ctypes.CDLL(None, use_errno=True)
_pthread_create = _libc.pthread_create
_pthread_create.argtypes = [
    ctypes.POINTER(ctypes.c_ulong),
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
]
_pthread_join = _libc.pthread_join
_pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]


def _native_deleter_call(capsule):
    """(deleter address, managed address) of a capsule detached as _detach_deleter does."""
    name = capsule_name(capsule)
    address = _get_pointer(capsule, name.encode())
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    deleter = ctypes.c_void_p.from_address(address + struct.deleter.offset).value
    assert _set_name(capsule, _USED_NAMES[name]) == 0
    return deleter, address


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_deleter_called_on_a_native_thread_python_never_saw(versioned):
    t = dl.zeros((8,))
    base, exports = sys.getrefcount(t), live_exports()
    capsules = [dl.to_dlpack(t, versioned=versioned) for _ in range(16)]
    calls = [_native_deleter_call(c) for c in capsules]
    assert sys.getrefcount(t) == base + 16
    threads = []
    for deleter, address in calls:
        thread = ctypes.c_ulong()
        # The deleter's signature, void(DLManagedTensor*), serves as a thread start routine.
        assert _pthread_create(ctypes.byref(thread), None, deleter, address) == 0
        threads.append(thread.value)
    for thread in threads:
        assert _pthread_join(thread, None) == 0  # a ctypes call: the GIL is released
    assert sys.getrefcount(t) == base
    assert live_exports() == exports
    del capsules
    assert sys.getrefcount(t) == base


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
