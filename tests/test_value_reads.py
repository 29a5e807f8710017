"""Values read in C (src/values.h, dlinterop/core/values.pxi): tolist for every data type
dlinterop has, over every layout (strided, negative strides, byte_offset, broadcast, 0-d,
empty, more than four dimensions); ==, `in` and repr, which read values too; the tables of
the small float formats, filled while other threads read. Two references: the reader in Python,
dlinterop._lib.values, which the C reader must equal bit for bit (NaN payloads, -0.0 and
the types of the results included), and NumPy or ml_dtypes wherever they have the type."""

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

from value_cases import (
    ALL_DTYPES,
    INT_CODES,
    c_order_raw,
    forged,
    is_packed,
    pattern_tensor,
    patterns,
    python_values,
    same,
)

NUMPY_NAMES = set(numpy_shared_dtypes())


def close(a, b):
    """As `same`, except that NaN matches NaN whatever its sign and payload (NumPy and
    ml_dtypes widen NaN their own way)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if type(a) is float and type(b) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if type(a) is complex and type(b) is complex:
        return close(a.real, b.real) and close(a.imag, b.imag)
    return type(a) is type(b) and a == b


def numpy_values(dt, raw, shape):
    """NumPy's (or ml_dtypes') values of the C-order elements `raw`, or None where neither
    has the type."""
    try:
        np_dtype = dt.to_numpy()
    except TypeError:
        return None
    a = np.frombuffer(raw, dtype=np_dtype).reshape(shape)
    if dt.name in NUMPY_NAMES:
        return a.tolist()
    kind = np.int64 if dt.code in INT_CODES else complex if dt.code == 18 else np.float64
    with np.errstate(invalid="ignore"):
        return a.astype(kind).tolist()


# -- tolist over every layout ------------------------------------------------------------

LAYOUTS = {
    "0-d": dict(shape=()),
    "one": dict(shape=(1,)),
    "1-d": dict(shape=(7,)),
    "2-d": dict(shape=(3, 5)),
    "empty": dict(shape=(0, 3)),
    "empty inner": dict(shape=(3, 0)),
    "empty 0-len 3-d": dict(shape=(2, 0, 4)),
    "every other": dict(shape=(4,), strides=(2,)),
    "reversed": dict(shape=(5,), strides=(-1,)),
    "reversed 2-d": dict(shape=(3, 4), strides=(-4, -1)),
    "rows reversed": dict(shape=(3, 4), strides=(-4, 1)),
    "transposed": dict(shape=(3, 4), strides=(1, 3)),
    "broadcast": dict(shape=(3, 4), strides=(0, 1)),
    "all broadcast": dict(shape=(2, 3), strides=(0, 0)),
    "byte offset": dict(shape=(2, 3), byte_offset=5),
    "byte offset strided": dict(shape=(2, 3), strides=(-1, 2), byte_offset=3),
    "5-d": dict(shape=(2, 1, 3, 1, 2)),
    "6-d strided": dict(shape=(2, 2, 1, 2, 2, 3), strides=(1, 2, 5, 4, 8, -16)),
    "9-d": dict(shape=(1, 2, 1, 2, 1, 2, 1, 2, 2)),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_tolist_is_the_python_readers_and_numpys(dt, layout):
    f = forged(dt, seed=len(layout), **LAYOUTS[layout])
    t = dl.from_dlpack(f.capsule)
    raw = c_order_raw(f, dt)
    values = t.tolist()
    assert same(values, python_values(t, raw))
    reference = numpy_values(dt, raw, t.shape)
    if reference is not None:
        assert close(values, reference)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_every_bit_pattern_is_read_as_the_python_reader_reads_it(dt):
    f, t, expected = pattern_tensor(dt, patterns(dt))
    assert same(t.tolist(), expected)
    reference = numpy_values(dt, c_order_raw(f, dt), t.shape)
    if reference is not None:
        assert close(t.tolist(), reference)
    if not is_packed(dt):
        # the same patterns through views: reversed, every other, with a byte offset
        assert same(t[::-1].tolist(), expected[::-1])
        assert same(t[1::3].tolist(), expected[1::3])
        assert same(t[5:].tolist(), expected[5:])


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_host_memory_of_another_device_is_read_in_place(dt):
    # kDLCUDAHost: pinned host memory, which the CPU reads as it is
    f = forged(dt, (2, 3), strides=(1, -2), device=(3, 0), seed=3)
    t = dl.from_dlpack(f.capsule)
    assert t.device == "cuda_host:0"
    assert same(t.tolist(), python_values(t, c_order_raw(f, dt)))
    g = forged(dt, (), device=(3, 0), seed=4)
    one = dl.from_dlpack(g.capsule)
    value = python_values(one, c_order_raw(g, dt))
    assert same(one.item(), value) and bool(one) is bool(value)


def test_a_view_of_a_packed_type_reads_its_own_elements():
    values = [-8, -1, 0, 1, 7, 3, -5, 6, 2, -2, 4, -3]
    t = dl.tensor(values, dtype="int4").reshape(3, 4)
    a = np.array(values).reshape(3, 4)
    assert t[:, 2:].tolist() == a[:, 2:].tolist()
    assert t[::-1].tolist() == a[::-1].tolist()
    assert t[2, 2:].tolist() == a[2, 2:].tolist()


def test_empty_tensors_with_huge_extents():
    assert dl.empty((3, 0)).tolist() == [[], [], []]
    assert dl.empty((0, 2**62)).tolist() == []
    with pytest.raises(MemoryError):
        dl.empty((2**62, 0)).tolist()
    assert (dl.empty((2**62, 0)) != 1).shape == (2**62, 0)  # compares no element
    assert 1.0 not in dl.empty((2**62, 0))


# -- comparisons and text, which read values too -----------------------------------------


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_comparisons_read_the_same_values(dt):
    f = forged(dt, (3, 4), strides=(-1, 3), byte_offset=2, seed=11)
    t = dl.from_dlpack(f.capsule)
    expected = python_values(t, c_order_raw(f, dt))
    flat = [x for row in expected for x in row]
    c = t.copy()
    assert (t == c).tolist() == [[x == x for x in row] for row in expected]
    assert (t != c).tolist() == [[x != x for x in row] for row in expected]
    assert (t == c[:1]).tolist() == [[x == y for x, y in zip(row, expected[0])] for row in expected]
    i = next(i for i, x in enumerate(flat) if x == x)  # not NaN; packed types have none
    assert c.reshape(-1)[i : i + 1] in t
    if dt.code in INT_CODES and -(2**63) <= flat[i] < 2**63:  # dl.asarray makes an int64
        assert flat[i] in t
    if not is_packed(dt):  # repr of a strided view of packed elements shows no values
        assert repr(t) == repr(c)


# -- the tables of the small float formats -----------------------------------------------


def test_values_while_another_thread_fills_the_tables():
    # While one thread fills the tables (the set-up state DECIDING), the others read the
    # small float formats through the reader in Python: the same values.
    dt = dl.float8_e4m3fn
    f, t, expected = pattern_tensor(dt, patterns(dt))
    try:
        _core._setup_state("value_tables", "deciding")
        assert same(t.tolist(), expected)
        assert same(t[3].item(), expected[3]) and same(float(t[200]), expected[200])
    finally:
        _core._setup_state("value_tables", "undecided")
    assert same(t.tolist(), expected)
    assert _core._setup_state("value_tables") == 1


def test_threads_racing_to_fill_the_tables_read_the_right_values():
    code = textwrap.dedent("""
        import threading
        import dlinterop as dl
        from dlinterop import _core
        from dlinterop._lib import minifloat

        names = ["float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float4_e2m1fn"]
        tensors, expected = {}, {}
        for name in names:
            bits = dl.dtype(name).bits
            values = [minifloat.decode(name, c) for c in range(1 << bits)]
            finite = [v for v in values if v == v]
            tensors[name] = dl.tensor(finite, dtype=name)
            expected[name] = finite
        assert _core._setup_state("value_tables") == "undecided"
        start = threading.Barrier(8)
        errors = []

        def read(i):
            try:
                start.wait()
                for k in range(50):
                    name = names[(i + k) % len(names)]
                    assert tensors[name].tolist() == expected[name], name
                    assert float(tensors[name][:1]) == expected[name][0], name
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        assert _core._setup_state("value_tables") == 1
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
