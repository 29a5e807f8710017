"""Ownership of exported capsules: deleters called on other threads, without the GIL, at
interpreter shutdown and on native threads Python has never seen."""

import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import dlinterop as dl

from capsule_cases import (
    MAX_VERSIONS,
    _get_pointer,
    _set_name,
    live_exports,
)
from forge import DLManagedTensor, DLManagedTensorVersioned, capsule_name

# A capsule keeps a raw pointer to its name: these bytes must outlive every capsule.
_USED_NAMES = {"dltensor": b"used_dltensor", "dltensor_versioned": b"used_dltensor_versioned"}


# A ctypes foreign call releases the GIL for its duration.
_RAW_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


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
