"""dl.from_dlpack and what is not a capsule, foreign capsules and producers that misbehave: their
errors propagate unchanged, their junk is refused clearly, nothing crashes.

Each rejected capsule must raise the named exception, be left unconsumed (same name, its
deleter not called), have its deleter called exactly once when the capsule is released,
and leave dl.memory_stats() unchanged. Inputs are forged with tests/support/forge/; the Forged
object is kept alive while the exception propagates (see forge's SystemError caveat)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlinterop as dl

from forge import CountingProducer, capsule_name, forge
from malformed_cases import (  # noqa: F401 (fixtures)
    SUPPORT,
    _no_automatic_gc,
    _stats,
)

# --------------------------------------------------------------------------------------
# Non-capsules and misbehaving producers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"copy": True}, {"copy": False}, {"device": "cpu"}],
    ids=["plain", "copy", "nocopy", "device"],
)
@pytest.mark.parametrize(
    "obj",
    [1, 1.5, "dltensor", b"dltensor", [], [1, 2], {}, None, object()],
    ids=lambda o: type(o).__name__,
)
def test_non_capsule_without_dlpack_is_type_error(obj, kwargs):
    before = _stats()
    with pytest.raises(TypeError):
        dl.from_dlpack(obj, **kwargs)
    assert dl.memory_stats() == before


class RaisingProducer:
    def __init__(self, error):
        self.error = error
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        raise self.error

    def __dlpack_device__(self):
        return (1, 0)


PRODUCER_ERRORS = [
    TypeError("bad keyword"),
    ValueError("no"),
    BufferError("cannot export"),
    RuntimeError("boom"),
    KeyError("k"),
    AttributeError("inner attribute"),
    MemoryError("oom"),
    NotImplementedError("later"),
    dl.CopyError("copy needed"),
]


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"copy": True}, {"copy": False}, {"device": "cpu"}],
    ids=["plain", "copy", "nocopy", "device"],
)
@pytest.mark.parametrize("error", PRODUCER_ERRORS, ids=lambda e: type(e).__name__)
def test_producer_exception_propagates_unchanged(error, kwargs):
    producer = RaisingProducer(error)
    before = _stats()
    with pytest.raises(type(error)) as info:
        dl.from_dlpack(producer, **kwargs)
    assert info.value is error
    assert str(info.value) == str(error)
    # One call, or two when the consumer retries (older signature, or without dl_device).
    assert 1 <= producer.calls <= 2
    assert dl.memory_stats() == before


class JunkProducer:
    def __init__(self, result):
        self.result = result

    def __dlpack__(self, **kwargs):
        return self.result

    def __dlpack_device__(self):
        return (1, 0)


JUNK = [None, 0, "dltensor", b"dltensor", [], (1, 2), object(), np.zeros(2)]


@pytest.mark.parametrize("kwargs", [{}, {"copy": True}], ids=["plain", "copy"])
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_producer_returning_non_capsule_is_clear_error(junk, kwargs):
    before = _stats()
    with pytest.raises(TypeError) as info:
        dl.from_dlpack(JunkProducer(junk), **kwargs)
    # Pinned: "JunkProducer.__dlpack__ returned NoneType, not a DLPack capsule".
    assert type(info.value) is TypeError
    assert "capsule" in str(info.value).lower()
    assert dl.memory_stats() == before


def test_producer_returning_a_tensor_instead_of_a_capsule_is_clear_error():
    t = dl.zeros((2,))
    base = sys.getrefcount(t)
    with pytest.raises((TypeError, ValueError)):
        dl.from_dlpack(JunkProducer(t))
    assert sys.getrefcount(t) == base


@pytest.mark.parametrize("junk", [None, [], np.zeros(2)], ids=lambda j: type(j).__name__)
def test_producer_returning_non_capsule_message_names_the_culprit(junk):
    with pytest.raises((TypeError, ValueError)) as info:
        dl.from_dlpack(JunkProducer(junk))
    assert "__dlpack__" in str(info.value)
    assert type(junk).__name__ in str(info.value)


# --------------------------------------------------------------------------------------
# Foreign capsules and more misbehaving producers
# --------------------------------------------------------------------------------------


def _foreign_capsules():
    """Real capsules of other C APIs, which must never be mistaken for tensors."""
    import datetime
    import unicodedata

    import numpy._core.multiarray as multiarray

    return {
        "datetime.datetime_CAPI": datetime.datetime_CAPI,
        "unicodedata._ucnhash_CAPI": unicodedata._ucnhash_CAPI,
        "numpy _ARRAY_API (no name)": multiarray._ARRAY_API,
    }


@pytest.mark.parametrize(
    "kwargs", [{}, {"copy": True}, {"device": "cpu"}], ids=["plain", "copy", "device"]
)
@pytest.mark.parametrize("how", ["capsule", "producer"])
@pytest.mark.parametrize("which", list(_foreign_capsules()))
def test_foreign_capsule_is_value_error_and_left_working(which, how, kwargs):
    capsule = _foreign_capsules()[which]
    name = capsule_name(capsule)
    before = _stats()
    with pytest.raises(ValueError, match="capsule"):
        dl.from_dlpack(capsule if how == "capsule" else JunkProducer(capsule), **kwargs)
    assert capsule_name(capsule) == name
    assert dl.memory_stats() == before
    import datetime

    assert datetime.date(2024, 1, 2).isoformat() == "2024-01-02"  # its capsule still works


@pytest.mark.parametrize(
    "kwargs", [{}, {"copy": True}, {"device": "cpu"}], ids=["plain", "copy", "device"]
)
@pytest.mark.parametrize("name", ["datetime.datetime_CAPI", "dlpack_exchange_api", "numpy_array"])
def test_producer_returning_foreign_named_capsule_is_value_error(name, kwargs):
    f = forge(name=name)
    before = _stats()
    with pytest.raises(ValueError, match="not a DLPack capsule"):
        dl.from_dlpack(CountingProducer(f), **kwargs)
    assert capsule_name(f.capsule) == name
    f.release()
    assert f.deleter_calls == 1
    assert dl.memory_stats() == before


class _OldSignatureProducer:
    """A pre-1.0 producer: __dlpack__(stream=None) only, so the consumer retries without
    max_version; what it returns then is `result` (or it raises `result`)."""

    def __init__(self, result):
        self.result = result
        self.calls = 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("kwargs", [{}, {"copy": True}], ids=["plain", "copy"])
@pytest.mark.parametrize(
    "result", [None, "dltensor", 7, RuntimeError("old boom"), BufferError("old refusal")], ids=repr
)
def test_old_signature_producer_junk_or_error_after_the_retry(result, kwargs):
    producer = _OldSignatureProducer(result)
    before = _stats()
    expected = type(result) if isinstance(result, BaseException) else TypeError
    with pytest.raises(expected) as info:
        dl.from_dlpack(producer, **kwargs)
    if isinstance(result, BaseException):
        assert info.value is result
    assert producer.calls == 1  # the max_version call fails in the signature, not the body
    assert dl.memory_stats() == before


@pytest.mark.parametrize(
    "error",
    [KeyboardInterrupt("stop"), SystemExit(3), GeneratorExit()],
    ids=lambda e: type(e).__name__,
)
def test_producer_base_exception_propagates_unchanged(error):
    producer = RaisingProducer(error)
    before = _stats()
    with pytest.raises(type(error)) as info:
        dl.from_dlpack(producer)
    assert info.value is error
    assert dl.memory_stats() == before


@pytest.mark.parametrize("attribute", [None, 5, "dltensor"], ids=repr)
def test_non_callable_dlpack_attribute_is_type_error(attribute):
    cls = type("Odd", (), {"__dlpack__": attribute, "__dlpack_device__": lambda self: (1, 0)})
    for kwargs in ({}, {"copy": True}):
        with pytest.raises(TypeError):
            dl.from_dlpack(cls(), **kwargs)


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
def test_producer_returning_its_capsule_twice_second_import_is_value_error():
    f = forge()
    producer = CountingProducer(f)
    t = dl.from_dlpack(producer)
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(producer)
    del t
    assert f.deleter_calls == 1
    f.release()
    assert f.deleter_calls == 1


@pytest.mark.parametrize(
    "error", [RuntimeError("device boom"), TypeError("bad device")], ids=lambda e: type(e).__name__
)
def test_dlpack_device_exception_propagates_unchanged(error):
    class Producer:
        def __dlpack__(self, **kwargs):
            raise AssertionError("__dlpack__ must not be called")

        def __dlpack_device__(self):
            raise error

    with pytest.raises(type(error)) as info:
        dl.from_dlpack(Producer(), stream=-1)
    assert info.value is error


# Regressions: each of these crashed the interpreter (segfault) before the fix, by indexing
# a producer's tuple past its end (the module was compiled with boundscheck=False) or by
# dereferencing a NULL managed tensor. In a subprocess, so that a crash fails one test.
_SHORT_TUPLES_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {support!r})
    import ctypes
    import numpy as np
    import dlinterop as dl
    from forge import forge, make_capsule

    class DeviceProducer:
        def __init__(self, device, forged):
            self.device, self.forged = device, forged
        def __dlpack__(self, **kwargs):
            return self.forged.capsule
        def __dlpack_device__(self):
            return self.device

    # __dlpack_device__ returning an empty or short tuple, with stream= (which reads it).
    for device in [(), (1,), [], None, "cpu", 5]:
        f = forge()
        try:
            dl.from_dlpack(DeviceProducer(device, f), stream=-1)
        except (TypeError, ValueError, IndexError, BufferError):
            pass
        f.release()
        assert f.deleter_calls == 1, device

    # __array_interface__ / __cuda_array_interface__ with short 'data' or 'strides'.
    base = np.zeros(6, np.float32)
    cases = [dict(data=()), dict(data=(base.ctypes.data,)),
             dict(data=(base.ctypes.data, False), strides=(12,)),
             dict(data=(base.ctypes.data, False), strides=())]
    for extra in cases:
        iface = dict(shape=(2, 3), typestr="<f4", version=3, **extra)
        for attr in ("__array_interface__", "__cuda_array_interface__"):
            cls = type("Iface", (), {{attr: iface, "base": base}})
            try:
                t = dl.asarray(cls())
            except (TypeError, ValueError, IndexError, BufferError):
                continue
            raise SystemExit(f"accepted {{attr}} {{extra}}: strides {{t.strides}}")

    # An exchange table whose from_py reports success but hands out no tensor.
    class Header(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                    ("prev", ctypes.c_void_p)]
    class Table(ctypes.Structure):
        _fields_ = [("header", Header)] + [(n, ctypes.c_void_p) for n in
                    ("alloc", "from_py", "to_py", "view", "stream")]
    FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
    from_py = FROM_PY(lambda obj, out: 0)
    table = Table()
    table.header.major, table.header.minor = 1, 3
    table.from_py = ctypes.cast(from_py, ctypes.c_void_p).value
    class Producer:
        __dlpack_c_exchange_api__ = make_capsule(ctypes.addressof(table), "dlpack_exchange_api")
        def __dlpack__(self, **kwargs):
            raise AssertionError("the table should have been used")
        def __dlpack_device__(self):
            return (1, 0)
    try:
        dl.from_dlpack(Producer())
    except (ValueError, BufferError):
        pass
    else:
        raise SystemExit("a NULL managed tensor was accepted")
""")


def test_short_tuples_and_null_tensors_from_producers_do_not_crash():
    script = _SHORT_TUPLES_SCRIPT.format(support=SUPPORT)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr == ""
