"""dl.from_dlpack rejects every malformed DLPack input cleanly (validated before it is consumed).

Each rejected capsule must raise the named exception, be left unconsumed (same name, its
deleter not called), have its deleter called exactly once when the capsule is released,
and leave dl.memory_stats() unchanged. Inputs are forged with tests/support/forge/; the Forged
object is kept alive while the exception propagates (see forge's SystemError caveat).
"""

import ctypes
import gc
import math
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import dlinterop as dl

from forge import CountingProducer, capsule_name, forge

# Where forge lives, for the scripts run in a child process.
SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)

# Every (code, bits, lanes) dlinterop imports (DLPack 1.3 and kDLBcomplex,
# include/dlpack/dlpack.h; sub-byte integers packed as DLPack packs sub-byte floats).
VALID_DTYPES = {
    (0, 1, 1),
    (0, 2, 1),
    (0, 4, 1),
    (0, 8, 1),
    (0, 16, 1),
    (0, 32, 1),
    (0, 64, 1),
    (1, 1, 1),
    (1, 2, 1),
    (1, 4, 1),
    (1, 8, 1),
    (1, 16, 1),
    (1, 32, 1),
    (1, 64, 1),
    (2, 16, 1),
    (2, 32, 1),
    (2, 64, 1),
    (4, 16, 1),
    (5, 32, 1),
    (5, 64, 1),
    (5, 128, 1),
    (6, 8, 1),
    *((code, 8, 1) for code in range(7, 15)),
    (15, 6, 1),
    (16, 6, 1),
    (17, 4, 1),
    (17, 4, 2),
    (18, 32, 1),
}

# How a malformed capsule reaches the importer: directly, or returned by a producer.
ROUTES = ["capsule", "capsule-copy", "producer", "producer-copy"]


def _import(route, forged):
    if route == "capsule":
        return dl.from_dlpack(forged.capsule)
    if route == "capsule-copy":
        return dl.from_dlpack(forged.capsule, copy=True)
    producer = CountingProducer(forged)
    if route == "producer":
        return dl.from_dlpack(producer)
    return dl.from_dlpack(producer, copy=True)


@pytest.fixture(autouse=True)
def _no_automatic_gc():
    """Nothing here makes reference cycles, so refcounting frees everything at once;
    turning the cyclic collector off keeps an unrelated collection (another test's
    garbage) from changing memory_stats() mid-test, and is much cheaper than collecting."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


def _stats():
    return dl.memory_stats()


def assert_rejected(forged, exc=BufferError, *, route="capsule", match=None, deleter_calls=1):
    """Import must raise `exc` and leave the capsule untouched; releasing the capsule must
    then call the deleter `deleter_calls` times (1, or 0 for a forged used_* capsule)."""
    before = _stats()
    name = capsule_name(forged.capsule)
    with pytest.raises(exc, match=match) as info:
        _import(route, forged)
    assert type(info.value) is not SystemError
    assert capsule_name(forged.capsule) == name, "a rejected capsule must not be consumed"
    assert forged.deleter_calls == 0, "the deleter ran before the capsule was released"
    forged.release()
    assert forged.deleter_calls == deleter_calls
    assert dl.memory_stats() == before


# --------------------------------------------------------------------------------------
# Capsule names
# --------------------------------------------------------------------------------------

WRONG_NAMES = [
    "foo",
    "",
    "DLTENSOR",
    "dltensor ",
    "dltensor_versioned_",
    "Dltensor_versioned",
    "dltensor\x01",
    "used_",
    "used_dltensor_versioned_x",
    "numpy_array",
]


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("name", WRONG_NAMES)
def test_wrong_capsule_name_is_value_error_and_untouched(name, versioned):
    f = forge(versioned=versioned, name=name)
    # forge's destructor treats any used_* name as consumed and never calls the deleter.
    assert_rejected(f, ValueError, deleter_calls=0 if name.startswith("used_") else 1)


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("name", ["used_dltensor", "used_dltensor_versioned"])
def test_used_capsule_is_value_error_already_consumed(name, versioned):
    # A used_* capsule belongs to its consumer: its destructor never calls the deleter.
    f = forge(versioned=versioned, name=name)
    assert_rejected(f, ValueError, match="already consumed", deleter_calls=0)


@pytest.mark.parametrize("route", ["producer", "producer-copy"])
def test_producer_returning_used_capsule_is_value_error(route):
    f = forge(name="used_dltensor_versioned")
    assert_rejected(f, ValueError, route=route, match="already consumed", deleter_calls=0)


def test_capsule_with_null_name_is_value_error():
    new_capsule = ctypes.PYFUNCTYPE(
        ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
    )(("PyCapsule_New", ctypes.pythonapi))
    f = forge()
    capsule = new_capsule(f.address, None, None)  # no destructor: f's capsule owns the tensor
    before = _stats()
    with pytest.raises(ValueError):
        dl.from_dlpack(capsule)
    assert capsule_name(capsule) is None
    del capsule
    assert f.deleter_calls == 0
    f.release()
    assert f.deleter_calls == 1
    assert dl.memory_stats() == before


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
def test_consumed_capsule_cannot_be_imported_again():
    f = forge()
    t = dl.from_dlpack(f.capsule)
    assert capsule_name(f.capsule) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(f.capsule)
    assert f.deleter_calls == 0
    del t
    assert f.deleter_calls == 1
    f.release()
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("major", [0, 2, 3, 255, 2**32 - 1])
def test_versioned_major_not_1_is_buffer_error(major, route):
    assert_rejected(forge(version=(major, 0)), route=route, match="version")


@pytest.mark.parametrize("minor", [0, 1, 3, 4, 99, 2**32 - 1])
def test_versioned_any_minor_of_major_1_is_accepted(minor):
    f = forge(shape=(2, 3), version=(1, minor))
    t = dl.from_dlpack(f.capsule)
    assert t.shape == (2, 3)
    del t
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Data types
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("code", range(19))
def test_every_invalid_bits_for_known_code_is_buffer_error(code, versioned):
    rejected = 0
    for bits in range(256):
        if (code, bits, 1) in VALID_DTYPES:
            continue
        f = forge(dtype=(code, bits, 1), versioned=versioned)
        with pytest.raises(BufferError):
            dl.from_dlpack(f.capsule)
        assert capsule_name(f.capsule) == f.name, (code, bits)
        f.release()
        assert f.deleter_calls == 1, (code, bits)
        rejected += 1
    assert rejected == 256 - sum(1 for c, _, lanes in VALID_DTYPES if c == code and lanes == 1)


@pytest.mark.parametrize("bits", [0, 1, 8, 16, 32, 64, 128, 255])
@pytest.mark.parametrize("code", [19, 20, 32, 100, 128, 254, 255])
def test_unknown_dtype_code_is_buffer_error(code, bits):
    assert_rejected(forge(dtype=(code, bits, 1)))


# (17, 4, 2) is float4_e2m1fn_x2, accepted (test_float4_e2m1fn_x2_is_accepted).
MULTI_LANE = [
    (code, bits, lanes)
    for code, bits in sorted({(c, b) for c, b, _ in VALID_DTYPES})
    for lanes in (0, 2, 3, 4, 16, 65535)
    if (code, bits, lanes) != (17, 4, 2)
]


@pytest.mark.parametrize("triple", MULTI_LANE, ids=str)
def test_lanes_other_than_1_is_buffer_error(triple):
    assert_rejected(forge(dtype=triple), match="lanes")


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_float4_e2m1fn_x2_is_accepted(versioned):
    f = forge(shape=(4, 2), dtype=(17, 4, 2), versioned=versioned)
    t = dl.from_dlpack(f.capsule)
    assert t.dtype == dl.float4_e2m1fn_x2
    assert t.shape == (4, 2)
    del t
    assert f.deleter_calls == 1


@pytest.mark.parametrize("triple", sorted(VALID_DTYPES))
def test_every_valid_dtype_is_accepted(triple):
    # The other side of the dtype tests: the rejections above are not blanket ones.
    f = forge(shape=(2, 3), dtype=triple)
    t = dl.from_dlpack(f.capsule)
    assert t.dtype == dl.dtype(triple)
    del t
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("device_type", [0, 5, 6, 22, 1000, -1, INT32_MIN, INT32_MAX])
def test_unknown_device_type_is_buffer_error(device_type, route, versioned):
    f = forge(device=(device_type, 0), versioned=versioned)
    assert_rejected(f, route=route, match="device")


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("device", [(1, -1), (1, INT32_MIN), (2, -1), (13, -7)])
def test_negative_device_id_is_buffer_error(device, versioned):
    assert_rejected(forge(device=device, versioned=versioned), match="device")


@pytest.mark.parametrize("device_type", [t for t in range(1, 22) if t not in (5, 6)])
def test_every_known_device_type_is_accepted_as_a_view(device_type):
    f = forge(device=(device_type, 3))
    t = dl.from_dlpack(f.capsule)
    assert t.__dlpack_device__() == (device_type, 3)
    del t
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Shapes, extents and pointers
# --------------------------------------------------------------------------------------

# Cases where the importer, believing the struct, could read out of bounds or compute an
# address that overflows. nbytes keeps forge from allocating the (impossible) extent.
MALFORMED = {
    "ndim=-1": dict(shape=(2,), ndim=-1),
    "ndim=int32_min": dict(shape=(2,), ndim=INT32_MIN),
    "ndim=65": dict(shape=(2, 3), ndim=65),
    "ndim=100": dict(shape=(2,), ndim=100),
    "ndim=int32_max": dict(shape=(1,), ndim=INT32_MAX),
    "null_shape-1d": dict(shape=(3,), null_shape=True),
    "null_shape-2d-strided": dict(shape=(3, 4), strides=(4, 1), null_shape=True),
    "negative_dim": dict(shape=(-1,)),
    "negative_dim-2d": dict(shape=(2, -3)),
    "negative_dim-after-zero": dict(shape=(0, -1)),
    "negative_dim-int64_min": dict(shape=(INT64_MIN,), nbytes=64),
    "count_overflow-2^64": dict(shape=(2**32, 2**32), nbytes=64),
    "count_overflow-3d": dict(shape=(2**21, 2**21, 2**22), nbytes=64),
    "count_overflow-int64_max*2": dict(shape=(INT64_MAX, 2), nbytes=64),
    "count_overflow-strided": dict(shape=(2**40, 2**40), strides=(0, 0), nbytes=64),
    "extent-stride_2^62-float32": dict(shape=(2,), strides=(2**62,), nbytes=64),
    "extent-stride_2^60-float64": dict(shape=(2,), strides=(2**60,), dtype=(2, 64, 1), nbytes=64),
    "extent-stride_int64_min": dict(shape=(2,), strides=(INT64_MIN,), nbytes=64),
    "extent-negative_stride": dict(shape=(3,), strides=(-(2**62),), nbytes=64),
    "extent-sum_of_spans": dict(shape=(2, 2), strides=(2**62, 2**62), dtype=(1, 8, 1), nbytes=64),
    "extent-int64_max_dim": dict(shape=(INT64_MAX,), dtype=(2, 64, 1), nbytes=64),
    "byte_offset-2^63": dict(shape=(2,), byte_offset=2**63, nbytes=64),
    "byte_offset-uint64_max": dict(shape=(2,), byte_offset=UINT64_MAX, nbytes=64),
    "byte_offset-int64_max": dict(shape=(1,), byte_offset=INT64_MAX, nbytes=64),
    "byte_offset-plus-extent": dict(shape=(2,), strides=(2**60,), byte_offset=2**62, nbytes=64),
    "null_data": dict(shape=(2, 3), data=None),
    "null_data-scalar": dict(shape=(), data=None),
    "null_data-broadcast": dict(shape=(4,), strides=(0,), data=None),
}


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_tensor_is_buffer_error(case, route, versioned):
    assert_rejected(forge(versioned=versioned, **MALFORMED[case]), route=route)


# Regression: the byte extent (furthest byte + 1, plus byte_offset) is 2**63 or more here;
# the importer once computed `extent + 1` in int64 unchecked, so a strided span of exactly
# INT64_MAX bytes with 1-byte elements wrapped to INT64_MIN and was accepted.
EXTENT_WRAP = {
    "stride_int64_max-int8": dict(shape=(2,), strides=(INT64_MAX,), dtype=(0, 8, 1)),
    "stride_-int64_max-int8": dict(shape=(2,), strides=(-INT64_MAX,), dtype=(0, 8, 1)),
    "spans_sum_to_int64_max-uint8": dict(shape=(2, 2), strides=(2**62, 2**62 - 1), dtype=(1, 8, 1)),
    "stride_int64_max-int8-byte_offset_2^62": dict(
        shape=(2,), strides=(INT64_MAX,), dtype=(0, 8, 1), byte_offset=2**62
    ),
}


@pytest.mark.parametrize("case", list(EXTENT_WRAP))
def test_byte_extent_of_exactly_int64_max_plus_one_is_buffer_error(case):
    f = forge(nbytes=64, **EXTENT_WRAP[case])
    try:
        t = dl.from_dlpack(f.capsule)
    except BufferError:
        f.release()
        assert f.deleter_calls == 1
        return
    del t
    raise AssertionError(f"{case}: byte extent >= 2**63 was accepted")


ZERO_SIZE_NULL_DATA = {
    "1d": dict(shape=(0,)),
    "3d": dict(shape=(2, 0, 3)),
    "strided": dict(shape=(0, 5), strides=(5, 1)),
    "huge_other_dims": dict(shape=(INT64_MAX, 0)),
}


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("case", list(ZERO_SIZE_NULL_DATA))
def test_null_data_with_zero_elements_is_accepted(case, versioned):
    f = forge(data=None, versioned=versioned, **ZERO_SIZE_NULL_DATA[case])
    before = _stats()
    t = dl.from_dlpack(f.capsule)
    assert t.size == 0
    assert t.shape == f.shape
    if max(t.shape) < 2**31:  # NumPy refuses shapes whose product of non-zero dims overflows
        assert np.asarray(t).size == 0
    del t
    assert f.deleter_calls == 1
    assert dl.memory_stats() == before


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_null_shape_with_ndim_0_is_accepted(versioned):
    f = forge(shape=(), null_shape=True, versioned=versioned)
    t = dl.from_dlpack(f.capsule)
    assert t.shape == () and t.size == 1
    del t
    assert f.deleter_calls == 1


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_null_deleter_is_accepted_and_released_without_crash(versioned):
    before = _stats()
    f = forge(shape=(2, 3), null_deleter=True, versioned=versioned)
    t = dl.from_dlpack(f.capsule)
    assert t.shape == (2, 3)
    f.release()
    del t
    unconsumed = forge(null_deleter=True, versioned=versioned)
    unconsumed.release()
    rejected = forge(ndim=-1, null_deleter=True, versioned=versioned)
    with pytest.raises(BufferError):
        dl.from_dlpack(rejected.capsule)
    rejected.release()
    gc.collect()
    assert dl.memory_stats() == before


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
# Crash isolation and leaks
# --------------------------------------------------------------------------------------

_CRASH_SCRIPT = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, {support!r})
    import numpy as np
    import dlinterop as dl
    from forge import forge

    INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
    rejected = {rejected!r}
    accepted = [
        dict(shape=(0,), data=None), dict(shape=(2, 0, 3), data=None),
        dict(shape=(INT64_MAX, 0), data=None), dict(shape=(), null_shape=True),
        dict(shape=(2, 3), null_deleter=True), dict(shape=(70,) + (1,) * 63),
        dict(shape=(3,), strides=(-1,)), dict(shape=(4,), strides=(0,)),
    ]
    before = dl.memory_stats()
    for versioned in (True, False):
        for kw in rejected:
            for null_deleter in (False, True):
                f = forge(versioned=versioned, null_deleter=null_deleter, **kw)
                try:
                    dl.from_dlpack(f.capsule)
                except BufferError:
                    pass
                else:
                    raise SystemExit(f"accepted: {{kw}}")
                f.release()
                assert f.deleter_calls == (0 if null_deleter else 1), kw
        for kw in accepted:
            f = forge(versioned=versioned, **kw)
            t = dl.from_dlpack(f.capsule)
            repr(t); t.shape; t.strides; t.data_ptr; t.nbytes; t.is_contiguous()
            if t.size < 1000 and max(t.shape, default=0) < 2**31:
                np.asarray(t).sum(); t.copy()
            del t
            gc.collect()
            f.release()
    assert dl.memory_stats()["live_exports"] == before["live_exports"]
    assert dl.memory_stats()["live_buffers"] == before["live_buffers"]
""")


def test_crash_prone_cases_in_a_subprocess():
    script = _CRASH_SCRIPT.format(support=SUPPORT, rejected=list(MALFORMED.values()))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr == ""


def _rejects():
    """A few malformed capsules, each rejected without being consumed."""
    return [
        forge(ndim=-1),
        forge(dtype=(3, 32, 1)),
        forge(device=(22, 0)),
        forge(name="used_dltensor_versioned"),
        forge(name="foo"),
        forge(data=None),
        forge(version=(2, 0)),
        forge(shape=(2**32, 2**32), nbytes=64, versioned=False),
    ]


def test_many_rejected_imports_leak_nothing():
    forged = _rejects()
    producers = [CountingProducer(f) for f in forged[:2]]
    before = _stats()

    def run(n):
        for i in range(n):
            obj = forged[i % len(forged)].capsule
            if i % 5 == 0:
                obj = producers[i % len(producers)]
            try:
                dl.from_dlpack(obj)
            except (BufferError, ValueError):
                pass
            else:
                raise AssertionError("a malformed capsule was accepted")
        for p in producers:
            p.calls.clear()

    tracemalloc.start()
    try:
        run(1000)  # warm caches (interned strings, freelists)
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        run(10_000)
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert growth < 64 * 1024, f"{growth} bytes retained by 10,000 rejected imports"
    assert dl.memory_stats() == before
    for f in forged:
        assert capsule_name(f.capsule) == f.name
        assert f.deleter_calls == 0
        f.release()
        assert f.deleter_calls == (0 if f.name.startswith("used_") else 1)


# --------------------------------------------------------------------------------------
# More versions, foreign capsules and misbehaving producers
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("version", [(2, 99), (2, 3), (0, 99), (2**31, 1)], ids=str)
def test_versioned_major_not_1_is_buffer_error_whatever_the_minor(version, route):
    assert_rejected(forge(version=version), route=route, match="major version")


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


# --------------------------------------------------------------------------------------
# Broadcast views of more than 2**63 bytes (found by UBSan under the fuzzer)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, strides, dtype",
    [
        ((2**62,), (0,), (2, 32, 1)),
        ((2**61, 2), (0, 0), (2, 64, 1)),
        ((INT64_MAX,), (0,), (5, 128, 1)),
    ],
    ids=["2^62xfloat32", "2^61x2xfloat64", "int64_maxxcomplex128"],
)
def test_nbytes_of_a_huge_broadcast_view_is_exact(shape, strides, dtype):
    # Regression: nbytes was count * bits computed in int64 (signed overflow: 0 or garbage).
    f = forge(shape=shape, strides=strides, dtype=dtype, nbytes=64)
    t = dl.from_dlpack(f.capsule)
    assert t.size == math.prod(shape)
    assert t.nbytes == math.prod(shape) * dtype[1] // 8
    del t
    f.release()


def test_buffer_of_a_huge_broadcast_view_is_refused():
    # Regression (UBSan): len = count * itemsize overflowed and memoryview reported 0 bytes.
    f = forge(shape=(2**62,), strides=(0,), dtype=(2, 32, 1), nbytes=64)
    t = dl.from_dlpack(f.capsule)
    try:
        with pytest.raises(BufferError):
            memoryview(t)
    finally:
        del t
        f.release()


def test_empty_tensor_with_huge_dims_behind_a_zero_has_no_overflow():
    # Regression (UBSan): C strides of (0, 3, 2**62) overflowed int64 while being filled.
    for shape in [(0, 3, 2**62), (0, 2**62, 2**62)]:
        t = dl.empty(shape, "uint8")
        assert t.size == 0 and t.nbytes == 0 and t.is_contiguous()
        assert len(t.strides) == 3 and t.strides[-1] == 1
        f = forge(shape=shape, dtype=(1, 8, 1), data=None)
        u = dl.from_dlpack(f.capsule)
        assert u.size == 0 and u.shape == shape
        del t, u
        f.release()
