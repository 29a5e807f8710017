"""Shared fixtures, and the quick suite.

`python -P -m pytest` runs the quick suite (a few minutes on two cores): the tests marked
``slow`` (property runs, stress, builds, process and cluster tests, the benchmark and
conformance runners; whole files carry ``pytestmark = pytest.mark.slow``) are deselected.
``--run-slow`` runs them too (everything: CI does, after the quick suite, with
``-m slow --run-slow``).

Every test must leave dlinterop's allocator and export counters where it found them:
``dl.memory_stats()``'s ``live_buffers``, ``live_bytes`` and ``live_exports`` are compared
before and after each test that passed, and a rise fails it. A full ``gc.collect()`` costs
about a quarter of a second once PyTorch and JAX are imported, so it runs only when the
counters differ (objects caught in a reference cycle), never on the fast path. Opt out with
``@pytest.mark.no_leak_check`` (a test that parks memory on purpose).
"""

import gc
import time
import weakref

import pytest

try:
    import dlinterop as _dl
except ImportError:  # the compiled package is not built: the pure-Python tests still run
    _dl = None

# pytester: the pytest plugin's tests (tests/plugin/) run pytest sessions of their own.
pytest_plugins = ["pytester"]

_LEAK_KEYS = ("live_buffers", "live_bytes", "live_exports")

# False after a test whose counters were not checked (it failed, was skipped or opted out):
# garbage it left may still hold dlinterop memory, so the next baseline collects first.
_last_check_clean = False


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run the tests marked slow (the whole suite; without it they are deselected)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "no_leak_check: do not compare dl.memory_stats() before and after the test"
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        kept = [item for item in items if not item.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)
        items[:] = kept


def pytest_report_header(config):
    if not config.getoption("--run-slow"):
        return "the quick suite: tests marked slow are deselected (--run-slow runs them too)"


_CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        # An xfail that failed as expected is "skipped" with wasxfail; only a real pass counts.
        item.stash[_CALL_PASSED] = report.passed and not hasattr(report, "wasxfail")
    return report


def _live_counters():
    stats = _dl.memory_stats()
    return {key: stats[key] for key in _LEAK_KEYS}


@pytest.fixture(autouse=True)
def dl_memory_baseline(request):
    """Fails a passing test that left dlinterop buffers or capsules alive."""
    global _last_check_clean
    if _dl is None or request.node.get_closest_marker("no_leak_check"):
        _last_check_clean = False
        yield
        return
    if not _last_check_clean:
        gc.collect()
    _last_check_clean = False
    before = _live_counters()
    yield
    if not request.node.stash.get(_CALL_PASSED, False):
        return  # the failure itself is the report; its traceback still holds the locals
    # This fixture is set up first, so every other function-scoped fixture has been torn
    # down by now; pytest drops their values from item.funcargs only after teardown.
    # Drop them now, or a fixture that returns a Tensor would read as a leak.
    funcargs = getattr(request.node, "funcargs", None)
    if funcargs:
        for name in list(funcargs):
            if name != "request":
                funcargs[name] = None
    # Only a rise is a leak: a fall is something alive before the test (another test's
    # object its garbage collection had not reached yet; free-threaded CPython frees some
    # objects later than the GIL build) dying during it.
    after = _live_counters()
    if any(after[key] > before[key] for key in _LEAK_KEYS):
        gc.collect()
        after = _live_counters()
    assert all(after[key] <= before[key] for key in _LEAK_KEYS), (
        f"dlinterop memory not back to its baseline after the test: before {before}, "
        f"after {after} (a Tensor or capsule outlived the test)"
    )
    _last_check_clean = True


@pytest.fixture
def settled():
    """For tests marked no_leak_check whose engine (Dask, Ray) lets go of Tensors
    asynchronously: waits up to 60 s for the counters to come back to where they were."""
    gc.collect()
    before = _live_counters()
    yield
    deadline = time.monotonic() + 60
    while _live_counters() != before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _live_counters() == before, "a Tensor sent to the engine outlived its references"


@pytest.fixture
def machine(tmp_path):
    """A machine and cgroups of the test's making for the allocators' memory rule:
    machine(meminfo, cgroup="", files={}) lays out /proc/meminfo (fields in bytes),
    /proc/self/cgroup (its text) and files under /sys/fs/cgroup (path: text) in tmp_path,
    has dlinterop read its limits there until the test ends, and returns
    dl._core._memory_room()."""

    def lay_out(meminfo, cgroup="", files=None):
        proc, cgroups = tmp_path / "proc", tmp_path / "sys" / "fs" / "cgroup"
        (proc / "self").mkdir(parents=True)
        (proc / "meminfo").write_text(
            "".join(f"{name}: {size // 1024} kB\n" for name, size in meminfo.items())
        )
        (proc / "self" / "cgroup").write_text(cgroup)
        for path, text in (files or {}).items():
            (cgroups / path).parent.mkdir(parents=True, exist_ok=True)
            (cgroups / path).write_text(text)
        _dl._core._read_memory_limits_from(str(proc), str(tmp_path / "sys"))
        return _dl._core._memory_room()

    yield lay_out
    _dl._core._read_memory_limits_from()


@pytest.fixture
def live_counters():
    """dl.memory_stats() restricted to the counters that must return to baseline."""
    return _live_counters


# Layouts built over dlinterop-owned (256-byte aligned) memory through NumPy views, so that
# every peer test can hand the same strided tensors to its framework. Each entry maps a
# C-contiguous (2, 3, 4) array to a view of it.
def _layouts():
    from numpy.lib.stride_tricks import as_strided

    def size1_odd_strides(a):
        s = a.itemsize
        return as_strided(a, shape=(3, 1, 2), strides=(8 * s, 1000 * s, s))

    def zero_strides(a):
        return as_strided(a[0, 0], shape=(3, 4), strides=(0, a.itemsize))

    return {
        "0d": lambda a: a[1, 2, 3, ...],
        "zero_size_(0,)": lambda a: a.reshape(-1)[:0],
        "zero_size_(3,0)": lambda a: a[0, :, :0],
        "zero_size_(2,0,1)": lambda a: a[:, :0, :1],
        "size1_odd_strides": size1_odd_strides,
        "32_dims": lambda a: a.reshape(-1)[:4].reshape((2, 2) + (1,) * 30),
        "slice": lambda a: a[:, ::2, 1:],
        "transpose": lambda a: a.transpose(2, 0, 1),
        "zero_strides": zero_strides,
        "offset_view": lambda a: a[1, 1:, 2:],
        "negative_strides": lambda a: a[:, ::-1, ::-2],
    }


@pytest.fixture
def dl_layout():
    """dl_layout(name, dtype="float32") -> (tensor, view): a writable dl.Tensor with that
    layout over memory dlinterop allocated, and the NumPy view of the same elements (values
    0..23 in C order of the (2, 3, 4) base)."""
    np = pytest.importorskip("numpy")
    layouts = _layouts()

    def make(name, dtype="float32"):
        owned = _dl.empty((2, 3, 4), dtype)
        base = np.from_dlpack(owned)
        base[...] = np.arange(24).reshape(2, 3, 4).astype(base.dtype)
        view = layouts[name](base)
        tensor = _dl.from_dlpack(view)
        assert tensor.shape == view.shape and not tensor.readonly
        return tensor, view

    return make


def _a_class_can_die():
    cls = type("Probe", (), {})
    ref = weakref.ref(cls)
    del cls
    gc.collect()
    return ref() is None


@pytest.fixture
def classes_can_die():
    """Free-threaded CPython 3.13 makes every class immortal once a second thread has run
    (https://github.com/python/cpython/issues/117783; 3.14 collects them again). Its own test
    hook turns that off where the interpreter has it; a class dlinterop never saw proves that
    classes can die here, else the test skips: no class can, cached or not."""
    try:
        from _testinternalcapi import suppress_immortalization
    except ImportError:
        suppress_immortalization = None
    if suppress_immortalization is not None:
        suppress_immortalization(True)
    try:
        if not _a_class_can_die():
            pytest.skip(
                "this interpreter never frees a class (free-threaded 3.13 after a "
                "thread has run, without its test hook)"
            )
        yield
    finally:
        if suppress_immortalization is not None:
            suppress_immortalization(False)
