"""dl.from_dlpack rejects malformed shapes, extents and pointers cleanly; the crash-prone cases in a
child process, leaks, and broadcast views of more than 2**63 bytes.

Each rejected capsule must raise the named exception, be left unconsumed (same name, its
deleter not called), have its deleter called exactly once when the capsule is released,
and leave dl.memory_stats() unchanged. Inputs are forged with tests/support/forge/; the Forged
object is kept alive while the exception propagates (see forge's SystemError caveat)."""

import gc
import math
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import dlinterop as dl

from forge import CountingProducer, capsule_name, forge
from malformed_cases import (  # noqa: F401 (fixtures)
    INT32_MAX,
    INT32_MIN,
    ROUTES,
    SUPPORT,
    _import,
    _no_automatic_gc,
    _stats,
    assert_rejected,
)

INT64_MAX = 2**63 - 1


INT64_MIN = -(2**63)


UINT64_MAX = 2**64 - 1


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
