"""dlinterop's per-type caches (what the importer learned about a producer type, how
dl.to_framework hands tensors back to a type) must let their types die, and must still hit
for the types that live."""

import gc
import importlib.util
import os
import subprocess
import sys
import sysconfig
import types
import weakref

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core, frameworks

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_producer_type(i):
    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)

    def __init__(self):
        self.array = np.arange(3.0)

    return type(
        f"Producer{i}",
        (),
        {"__init__": __init__, "__dlpack__": __dlpack__, "__dlpack_device__": __dlpack_device__},
    )


def test_producer_types_made_and_dropped_are_collected(classes_can_die):
    # Regression: the importer's dict kept every producer type alive (5,000 classes made
    # on the fly: +62 MiB that gc.collect() could not return).
    gc.collect()
    cached_before = _core._producer_types_cached()
    refs = []
    for i in range(2000):
        cls = make_producer_type(i)
        assert dl.from_dlpack(cls()).shape == (3,)
        refs.append(weakref.ref(cls))
        del cls
    gc.collect()
    assert sum(ref() is not None for ref in refs) == 0
    assert _core._producer_types_cached() <= cached_before + 1


def test_producer_type_whose_dlpack_refers_to_its_class_is_collected(classes_can_die):
    # A __dlpack__ that uses super() holds its class in a cell: caching the method itself
    # would keep the class alive through it.
    class Base:
        def __dlpack__(self, **kwargs):
            return np.arange(2.0).__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    class Child(Base):
        def __dlpack__(self, **kwargs):
            return super().__dlpack__(**kwargs)

    assert dl.from_dlpack(Child()).shape == (2,)
    ref = weakref.ref(Child)
    del Child
    gc.collect()
    assert ref() is None


def test_cache_hits_for_live_types_even_when_they_alternate():
    a_type, b_type = make_producer_type("A"), make_producer_type("B")
    a, b = a_type(), b_type()
    for obj in (a, b, np.arange(2.0)):
        dl.from_dlpack(obj)
    described = _core._producer_descriptions_made()
    for _ in range(50):
        dl.from_dlpack(a)
        dl.from_dlpack(b)  # alternating: the one-entry cache misses, the table hits
        dl.from_dlpack(np.arange(2.0))
    assert _core._producer_descriptions_made() == described


def test_a_changed_type_is_described_again():
    cls = make_producer_type("Changed")
    obj = cls()
    dl.from_dlpack(obj)
    described = _core._producer_descriptions_made()
    calls = []

    def __dlpack__(self, **kwargs):
        calls.append(kwargs)
        return self.array.__dlpack__(**kwargs)

    cls.__dlpack__ = __dlpack__
    dl.from_dlpack(obj)
    assert _core._producer_descriptions_made() == described + 1
    assert len(calls) == 1


def test_a_method_replaced_between_lookup_and_call_is_not_called_stale():
    # The cached __dlpack__ is borrowed from the type: after the type changes (here from
    # inside the producer's own __dlpack_device__, between the lookup and the call) the
    # new method must be the one called, and the old one may already be freed.
    calls = []

    class Shifty:
        def __dlpack__(self, **kwargs):
            calls.append("old")
            return np.arange(2.0).__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    obj = Shifty()
    dl.from_dlpack(obj)

    def new(self, **kwargs):
        calls.append("new")
        return np.arange(2.0).__dlpack__(**kwargs)

    def replace_then_answer(self):
        Shifty.__dlpack__ = new
        return (1, 0)

    Shifty.__dlpack_device__ = replace_then_answer
    dl.from_dlpack(obj, stream=-1)  # asks __dlpack_device__ first, then __dlpack__
    assert calls[-1] == "new"


def test_adapter_types_made_and_dropped_are_collected(classes_can_die):
    module = types.ModuleType("dl_fake_framework")
    module.from_dlpack = dl.from_dlpack
    sys.modules["dl_fake_framework"] = module
    try:
        gc.collect()
        before = frameworks._adapter_types_cached()
        refs = []
        t = dl.zeros(3)
        for i in range(500):
            cls = type(f"Array{i}", (), {"__module__": "dl_fake_framework"})
            assert isinstance(dl.to_framework(t, like=cls()), dl.Tensor)
            assert isinstance(dl.to_framework(t, like=cls), dl.Tensor)
            refs.append(weakref.ref(cls))
            del cls
        gc.collect()
        assert sum(ref() is not None for ref in refs) == 0
        assert frameworks._adapter_types_cached() <= before + 1
    finally:
        del sys.modules["dl_fake_framework"]


def _nanobind_kernels():
    spec = importlib.util.spec_from_file_location(
        "dl_bench_kernels", os.path.join(REPO, "benchmarks", "kernels.py")
    )
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    try:
        path = kernels.build_nanobind_extension(abort_on_leak=True)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"building the nanobind kernels failed:\n{e.stderr}")
    if path is None:
        pytest.skip("nanobind or a C++ compiler is not installed")
    return path  # loaded only in the child: it aborts the process that leaks


@pytest.mark.skipif(
    bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    reason="nanobind disables its leak checker on free-threaded builds",
)
def test_nanobind_leak_checker_finds_no_type_kept_alive():
    # Regression: after one dl.from_dlpack of an object of a class bound with nanobind,
    # nanobind's leak checker (built as nanobind's tests build it) aborted the process at
    # exit: "leaked 1 types!", the importer's cache still held the class.
    path = _nanobind_kernels()
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('nb_kernels', {path!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "import dlinterop as dl\n"
        "x = m.ramp(4)\n"
        "assert dl.from_dlpack(x).shape == (4,)\n"
        "assert dl.to_framework(dl.zeros(2), like=dl).shape == (2,)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "leaked" not in proc.stderr
