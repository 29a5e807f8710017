"""dlinterop's one-time set-ups (the CUDA module, PyTorch's bit readers, the NumPy import
route and hand-back) hold no lock while they run Python code: code they run may call
dlinterop again (a PyTorch mode), and fork() may copy a process while one runs. Every case
that used to hang runs in a child process under a timeout."""

import os
import subprocess
import sys
import textwrap

import pytest

import dlinterop as dl
from dlinterop import _core

# Slow (races with PyTorch's first import): deselected unless --run-slow (tests/conftest.py).
pytestmark = pytest.mark.slow

SETUPS = [
    "cuda",
    "torch",
    "numpy_route",
    "numpy_handback",
    "value_tables",
    "small_float_encodings",
]


def run_apart(code, timeout=120):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _torch():
    return pytest.importorskip("torch")


def test_torch_mode_calling_dlinterop_during_the_first_import_does_not_deadlock():
    # Regression: the PyTorch set-up held a lock while making its probe tensors, which a
    # TorchFunctionMode whose handler calls dlinterop turned into a call back into the
    # set-up, on the same thread: a deadlock.
    _torch()
    proc = run_apart(
        """
        import torch, dlinterop as dl
        from dlinterop import _core
        from torch.overrides import TorchFunctionMode

        class Share(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                result = func(*args, **(kwargs or {}))
                if (type(result) is torch.Tensor and not result.requires_grad
                        and not result.is_conj() and not result.is_neg()):
                    dl.from_dlpack(result)
                return result

        x = torch.arange(4.0)
        with Share():
            assert dl.from_dlpack(x).data_ptr == x.data_ptr()
            y = torch.ones(3)
        assert dl.from_dlpack(y).shape == (3,)
        print(_core._setup_state("torch"))
    """,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= -1  # decided (an offset, or -1: the Python methods)


def test_fork_while_a_thread_sets_up_torch_leaves_the_child_working():
    # Regression: a thread inside the PyTorch set-up (holding its lock) when another thread
    # forked left the child's first PyTorch import hung for good.
    _torch()
    proc = run_apart("""
        import os, signal, threading, warnings
        import torch, dlinterop as dl
        from dlinterop import _core

        warnings.simplefilter("ignore", DeprecationWarning)   # fork with threads (3.12+)
        entered, release = threading.Event(), threading.Event()
        real = torch._C.DisableTorchFunction

        class Paused:
            # The set-up makes its probes inside DisableTorchFunction(): hold it there.
            def __enter__(self):
                entered.set()
                release.wait()
                return self

            def __exit__(self, *exc):
                return False

        torch._C.DisableTorchFunction = Paused
        x = torch.arange(3.0)
        worker = threading.Thread(target=dl.from_dlpack, args=(x,))
        worker.start()
        entered.wait()
        assert _core._setup_state("torch") == "deciding"
        pid = os.fork()
        if pid == 0:
            torch._C.DisableTorchFunction = real
            signal.alarm(30)
            state = _core._setup_state("torch")
            t = dl.from_dlpack(torch.arange(5.0))
            try:
                dl.from_dlpack(torch.zeros(2, dtype=torch.complex64).conj())
                os._exit(3)
            except BufferError:
                pass
            decided = _core._setup_state("torch")
            os._exit(0 if state == "undecided" and t.shape == (5,)
                     and isinstance(decided, int) else 2)
        torch._C.DisableTorchFunction = real
        release.set()
        worker.join()
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0"


@pytest.mark.parametrize("name", SETUPS)
def test_a_set_up_deciding_at_fork_is_decided_again_in_the_child(name):
    # A thread that was deciding a set-up when another forked does not exist in the child:
    # the child finds the set-up undecided and decides it itself, with no lock to wait for.
    if name == "torch":
        _torch()
    proc = run_apart(f"""
        import os, signal
        import numpy as np
        import dlinterop as dl
        from dlinterop import _core

        name = {name!r}

        class CudaArray:
            # Host memory claimed as CUDA memory: dlinterop only records the pointer.
            def __init__(self):
                self.keep = np.zeros(4, np.float32)
                self.__cuda_array_interface__ = {{
                    "shape": (4,), "typestr": "<f4", "version": 3,
                    "data": (self.keep.ctypes.data, False)}}

        def use():
            if name == "cuda":
                return dl.asarray(CudaArray()).device.type == "cuda"
            if name == "torch":
                import torch
                return dl.from_dlpack(torch.arange(3.0)).shape == (3,)
            if name == "numpy_route":
                return dl.from_dlpack(np.arange(3.0)).shape == (3,)
            if name == "value_tables":  # decoded by casts, by item() and by tolist()
                f8 = dl.full(2, 1.5, "float8_e4m3fn")
                return f8.astype("float32").tolist() == [1.5, 1.5] == f8.tolist()
            if name == "small_float_encodings":  # encoded by casts
                return dl.tensor([1.3, -600.0]).astype("float8_e5m2").tolist() == [1.25, -640.0]
            return dl.to_framework(dl.zeros(3), like=np).shape == (3,)

        if name == "torch":
            import torch
        _core._setup_state(name, "deciding")     # as a thread running it would leave it
        assert use()                             # meanwhile: the general route
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            ok = _core._setup_state(name) == "undecided" and use()
            os._exit(0 if ok and isinstance(_core._setup_state(name), int) else 2)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), _core._setup_state(name))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "deciding"]


def test_numpy_route_decided_after_deciding_elsewhere():
    # An ndarray described while the route was being decided elsewhere takes __dlpack__
    # then, and the native route once it is decided.
    proc = run_apart("""
        import numpy as np, dlinterop as dl
        from dlinterop import _core
        _core._setup_state("numpy_route", "deciding")
        a = np.arange(4.0)
        t = dl.from_dlpack(a)
        assert t.owner is not a           # a capsule: __dlpack__ answered
        _core._setup_state("numpy_route", "undecided")
        t = dl.from_dlpack(a)
        print(_core._numpy_route(), t.owner is a)
    """)
    assert proc.returncode == 0, proc.stderr
    route, owner_is_array = proc.stdout.split()
    assert owner_is_array == route  # the native route's Tensor is owned by the array


# Calls made by one thread while another imports a framework for the first time: the
# framework's module is in sys.modules from the start of its import, half made until it ends.
_WHILE_ANOTHER_THREAD_IMPORTS = """
    import _thread, sys
    import dlinterop as dl
    from dlinterop import _core

    imported = []

    def import_it():
        try:
            import {module}
        finally:
            imported.append(True)

    source = dl.zeros(3)
    failures = []
    calls = 0
    _thread.start_new_thread(import_it, ())
    while not imported:
        try:
            {calls}
        except Exception as error:
            failures.append(repr(error))
        calls += 1
    assert not failures, (calls, failures[:3])
"""


def test_calls_while_another_thread_first_imports_torch():
    # Regression: dl.from_dlpack of an object of a type not seen before raised
    # AttributeError (torch.Tensor not yet defined) while another thread imported PyTorch.
    _torch()
    calls = """
            producer = type("Producer", (), {
                "__dlpack__": lambda self, **kw: source.__dlpack__(**kw),
                "__dlpack_device__": lambda self: source.__dlpack_device__()})
            assert dl.from_dlpack(producer()).data_ptr == source.data_ptr
    """
    proc = run_apart(
        _WHILE_ANOTHER_THREAD_IMPORTS.format(module="torch", calls=calls)
        + """
    import torch
    try:
        dl.from_dlpack(torch.zeros(2, requires_grad=True))
    except BufferError:
        print(_core._setup_state("torch"))
    """
    )
    assert proc.returncode == 0, proc.stderr
    offset = int(proc.stdout)
    assert offset >= 16 if sys.platform.startswith("linux") else offset >= -1


def test_to_framework_while_another_thread_first_imports_torch():
    # Regression: like=torch.Tensor, defined early in torch's import, took the half-made
    # torch module from sys.modules and said "package 'torch' has no from_dlpack"; it now
    # waits for the import to end.
    _torch()
    calls = """
            tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
            if tensor_type is not None:
                assert type(dl.to_framework(source, like=tensor_type)) is tensor_type
    """
    proc = run_apart(_WHILE_ANOTHER_THREAD_IMPORTS.format(module="torch", calls=calls))
    assert proc.returncode == 0, proc.stderr


def test_calls_while_another_thread_first_imports_numpy():
    # Regressions: dl.dtype of anything but a name raised AttributeError (numpy.dtype not
    # yet defined), and an ndarray made meanwhile (NumPy's core runs first) recorded its
    # type as one that never takes the native route.
    calls = """
            try:
                dl.dtype(object())
            except TypeError:
                pass
            multiarray = sys.modules.get("numpy._core.multiarray")
            if multiarray is not None and not multiarray.__spec__._initializing:
                array = multiarray.zeros(3)
                data = array.__array_interface__["data"][0]
                assert dl.from_dlpack(array).data_ptr == data
    """
    proc = run_apart(
        _WHILE_ANOTHER_THREAD_IMPORTS.format(module="numpy", calls=calls)
        + """
    import numpy
    array = numpy.zeros(3)
    owner_is_array = dl.from_dlpack(array).owner is array
    print(_core._numpy_route(), owner_is_array)
    """
    )
    assert proc.returncode == 0, proc.stderr
    route = dl.build_info()["numpy_route_built"] and _numpy_route_usable()
    assert proc.stdout.split() == [str(route), str(route)]


def test_ndarray_seen_while_numpy_is_out_of_sys_modules_takes_the_route_later():
    # Regression (a free-threaded CI run): once a module has run, importlib takes it out of
    # sys.modules and puts it back; an ndarray seen in that window, while another thread
    # imported NumPy, recorded numpy.ndarray as a type that never takes the native route.
    pytest.importorskip("numpy")
    proc = run_apart("""
        import sys
        import numpy
        import dlinterop as dl
        from dlinterop import _core
        array = numpy.zeros(3)
        data = array.__array_interface__["data"][0]
        numpy_module = sys.modules.pop("numpy")
        try:
            assert dl.from_dlpack(array).data_ptr == data  # numpy.ndarray first seen
        finally:
            sys.modules["numpy"] = numpy_module
        owner_is_array = dl.from_dlpack(array).owner is array
        print(_core._numpy_route(), owner_is_array)
    """)
    assert proc.returncode == 0, proc.stderr
    route = dl.build_info()["numpy_route_built"] and _numpy_route_usable()
    assert proc.stdout.split() == [str(route), str(route)]


def _numpy_route_usable():
    numpy = pytest.importorskip("numpy")
    previous = _core._set_numpy_route(True)
    dl.from_dlpack(numpy.zeros(1))
    usable = _core._numpy_route()
    _core._set_numpy_route(previous)
    return usable


def test_setup_states_are_reported():
    for name in SETUPS:
        assert _core._setup_state(name) in ("undecided", "deciding") or isinstance(
            _core._setup_state(name), int
        )
    with pytest.raises(KeyError):
        _core._setup_state("nothing")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_importing_in_a_forked_child_works():
    proc = run_apart("""
        import os, signal
        import dlinterop as dl
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            os._exit(0 if dl.zeros(3).shape == (3,) else 2)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "0", proc.stderr
