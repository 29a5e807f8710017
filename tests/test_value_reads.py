"""Values read in C (src/values.h, dlinterop/core/values.pxi): tolist, item, float(t),
int(t), complex(t), bool(t), operator.index(t), ==, `in` and repr, for every data type
dlinterop has, over every layout (strided, negative strides, byte_offset, broadcast, 0-d,
empty, more than four dimensions). Two references: the reader in Python,
dlinterop._lib.values, which the C reader must equal bit for bit (NaN payloads, -0.0 and
the types of the results included), and NumPy or ml_dtypes wherever they have the type."""

import ctypes
import itertools
import math
import operator
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from dlinterop._lib import values as python_reader
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

from forge import c_strides, forge

ALL_DTYPES = sorted({v for v in vars(dl).values() if isinstance(v, dl.DType)}, key=str)
NUMPY_NAMES = set(numpy_shared_dtypes())
INT_CODES = (0, 1)  # kDLInt, kDLUInt


def width(dt):
    return dt.bits * dt.lanes


def is_packed(dt):
    return width(dt) < 8


# -- references --------------------------------------------------------------------------


def same(a, b):
    """a and b are the same values, bit for bit: the same types, floats with the same bit
    pattern (NaN payloads and -0.0 too), the same nesting."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) is complex:
        return same(a.real, b.real) and same(a.imag, b.imag)
    return a == b


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


def forged(dt, shape, strides=None, byte_offset=0, device=(1, 0), data=None, seed=0):
    """A forged tensor of dt over a buffer of random bytes (or `data` from element 0 on)."""
    f = forge(
        shape=shape,
        dtype=dt.__dlpack_data_type__(),
        strides=strides,
        byte_offset=byte_offset,
        device=device,
    )
    buffer = np.frombuffer(f.data, dtype=np.uint8)
    buffer[:] = np.random.default_rng(seed).integers(0, 256, buffer.size, dtype=np.uint8)
    if data is not None:
        start = f.element_ptr - ctypes.addressof(f.data)
        buffer[start : start + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return f


def c_order_raw(f, dt):
    """The forged tensor's elements in C order as the Python reader takes them: their
    bytes, or one code a byte for the packed sub-byte types."""
    buffer = bytes(f.data) + b"\0"
    element0 = f.element_ptr - ctypes.addressof(f.data)
    strides = f.strides if f.strides is not None else c_strides(f.shape)
    out = bytearray()
    for index in itertools.product(*[range(n) for n in f.shape]):
        e = sum(i * s for i, s in zip(index, strides))
        if is_packed(dt):
            bit = element0 * 8 + e * width(dt)
            word = buffer[bit >> 3] | buffer[(bit >> 3) + 1] << 8
            out.append((word >> (bit & 7)) & ((1 << width(dt)) - 1))
        else:
            n = width(dt) // 8
            out += buffer[element0 + e * n : element0 + (e + 1) * n]
    return bytes(out)


def python_values(t, raw):
    return python_reader.values(t, memoryview(raw))


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


def pack(dt, codes):
    """The bytes of `codes` packed as DLPack packs sub-byte elements (little bit-endian)."""
    bits = width(dt)
    value = sum(c << (i * bits) for i, c in enumerate(codes))
    return value.to_bytes((len(codes) * bits + 7) // 8, "little")


# -- bit patterns worth reading ----------------------------------------------------------


def _hex(text):
    return [int(word, 16) for word in text.split()]


# Bit patterns of each float width: the zeros, the infinities, quiet and signalling NaNs of
# either sign with payloads, the smallest and largest subnormals and normals, a few others.
FLOAT_SPECIALS = {
    16: _hex(
        "0000 8000 7C00 FC00 7E00 FE00 7C01 7D55 FD55 0001 8001 03FF 0400 7BFF FBFF 3C00 BC00 3555"
    ),
    32: _hex(
        "00000000 80000000 7F800000 FF800000 7FC00000 FFC00000 7F800001 7FA00000"
        " FFA5A5A5 7FFFFFFF 00000001 80000001 007FFFFF 00800000 7F7FFFFF FF7FFFFF"
        " 3F800000 BF800000 3EAAAAAB 4B800001 5F000000"
    ),
    64: _hex(
        "0 8000000000000000 7FF0000000000000 FFF0000000000000 7FF8000000000000"
        " FFF8000000000000 7FF0000000000001 7FF4000000000000 FFFA5A5A5A5A5A5A 1"
        " 800FFFFFFFFFFFFF 0010000000000000 7FEFFFFFFFFFFFFF 3FF0000000000000"
        " BFF0000000000000 3FD5555555555555 4340000000000001 C3E0000000000000"
    ),
}


def int_specials(bits):
    """Bit patterns of the extremes of a `bits`-bit integer, either signedness."""
    mask = (1 << bits) - 1
    top = 1 << (bits - 1)
    values = [0, 1, -1, 2, top - 1, -top, top - 2, -top + 1, mask - 1]
    values += [(1 << 24) + 1, (1 << 53) + 1, -(1 << 53) - 1, (1 << 63) + 1]
    return sorted({v & mask for v in values})


def patterns(dt, extra=64):
    """Element bit patterns of dt: all of them for types of at most 16 bits, else the
    special ones (each lane's, for the complex types) and `extra` random ones. Each is
    the element's bytes, or a code for the packed sub-byte types."""
    bits, n = width(dt), width(dt) // 8
    if bits < 8:
        return list(range(1 << bits))
    if bits <= 16:
        return [c.to_bytes(n, "little") for c in range(1 << bits)]
    if dt.code in INT_CODES:
        special = [v.to_bytes(n, "little") for v in int_specials(bits)]
    elif dt.code == 2:
        special = [v.to_bytes(n, "little") for v in FLOAT_SPECIALS[bits]]
    else:  # complex (5) and bcomplex (18): pairs of special halves
        half = FLOAT_SPECIALS[bits // 2] if dt.code == 5 else [v >> 16 for v in FLOAT_SPECIALS[32]]
        special = [
            re.to_bytes(n // 2, "little") + im.to_bytes(n // 2, "little")
            for re, im in itertools.product(half, half)
        ]
    rng = np.random.default_rng(bits)
    return special + [rng.bytes(n) for _ in range(extra)]


def pattern_tensor(dt, pats):
    """A 1-d forged tensor holding the patterns, and its reference values."""
    data = pack(dt, pats) if is_packed(dt) else b"".join(pats)
    f = forged(dt, (len(pats),), data=data)
    t = dl.from_dlpack(f.capsule)
    return f, t, python_values(t, c_order_raw(f, dt))


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


# -- one element -------------------------------------------------------------------------


def outcome(convert, value):
    """('value', the result) or ('error', the exception's type and text)."""
    try:
        return "value", convert(value)
    except (TypeError, ValueError, OverflowError) as error:
        return "error", type(error), str(error)


def same_outcome(a, b):
    if a[0] != b[0]:
        return False
    return same(a[1], b[1]) if a[0] == "value" else a == b


CONVERSIONS = {
    "item": (lambda t: t.item(), lambda v: v),
    "float": (float, float),
    "int": (int, int),
    "complex": (complex, complex),
    "bool": (bool, bool),
    "index": (operator.index, operator.index),
}


def one_element_views(dt, pats):
    """(reference value, [one-element tensors holding it]) for each pattern: a 0-d view,
    a one-element view of shape (1, 1) with a byte offset, and a forged 0-d tensor."""
    f, t, expected = pattern_tensor(dt, pats)
    out = []
    for i, value in enumerate(expected):
        tensors = []
        if not is_packed(dt):
            tensors += [t[i], t[i : i + 1].reshape(1, 1)]
        data = pack(dt, [pats[i]]) if is_packed(dt) else pats[i]
        g = forged(dt, (), data=data, seed=i)
        tensors.append(dl.from_dlpack(g.capsule))
        out.append((value, tensors, g))
    return f, out


def few_patterns(dt):
    """patterns(dt), at most a few hundred: for the 16-bit types the special ones and every
    251st."""
    if width(dt) != 16:
        return patterns(dt, extra=16)
    if dt.code in INT_CODES:
        special = int_specials(16)
    elif dt.code == 2:
        special = FLOAT_SPECIALS[16]
    else:
        special = [v >> 16 for v in FLOAT_SPECIALS[32]]
    return [v.to_bytes(2, "little") for v in special + list(range(0, 1 << 16, 251))]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_one_element_conversions_are_pythons(dt):
    # Each conversion of a one-element Tensor is the conversion of its value: the same
    # result (bit for bit, of the same type) or the same error (type and message): int(t)
    # of a float truncates, NaN and the infinities raise, bool(NaN) is True.
    _keep, cases = one_element_views(dt, few_patterns(dt))
    for name, (on_tensor, on_value) in CONVERSIONS.items():
        for value, tensors, _forged in cases:
            expected = outcome(on_value, value)
            if name == "index" and dt.code not in INT_CODES:
                expected = ("error", TypeError, f"only integer tensors can be an index, not {dt}")
            for t in tensors:
                got = outcome(on_tensor, t)
                assert same_outcome(got, expected), (name, t.shape, value, got, expected)


@pytest.mark.parametrize(
    "name,values",
    [
        ("float32", [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**-149, 3.4028234663852886e38]),
        ("float64", [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308]),
        ("float16", [-0.0, math.inf, math.nan, 2.0**-24, 2.0**-14 - 2.0**-24, 65504.0]),
        ("bfloat16", [-0.0, math.inf, math.nan, 2.0**-133, 3.3895313892515355e38]),
        ("int8", [-128, 127]),
        ("int16", [-32768, 32767]),
        ("int32", [-(2**31), 2**31 - 1]),
        ("int64", [-(2**63), 2**63 - 1]),
        ("uint8", [0, 255]),
        ("uint16", [65535]),
        ("uint32", [2**32 - 1]),
        ("uint64", [2**64 - 1, 2**63 + 1]),
        ("int4", [-8, 7]),
        ("int2", [-2, 1]),
        ("int1", [-1, 0]),
        ("uint4", [15]),
        ("uint2", [3]),
        ("uint1", [1]),
    ],
)
def test_special_values(name, values):
    t = dl.tensor(values, dtype=name)
    got = t.tolist()
    for v, x in zip(values, got):
        assert type(x) is type(v)
        assert (math.isnan(x) and math.isnan(v)) if v != v else same(x, v)
    for i, v in enumerate(values):
        one = dl.tensor([v], dtype=name)
        assert same(one.item(), got[i])
        if got[i] != got[i]:
            with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
                int(one)
        elif got[i] in (math.inf, -math.inf):
            with pytest.raises(OverflowError, match="cannot convert float infinity to integer"):
                int(one)
        else:
            assert same(int(one), int(got[i]))
        assert same(float(one), float(got[i])) or math.isnan(got[i])
        assert same(complex(one), complex(got[i])) or math.isnan(got[i])
        assert bool(one) is bool(got[i])


def test_float_of_a_wide_int_rounds_as_float_of_the_int():
    for name, value in [
        ("int64", 2**53 + 1),
        ("int64", -(2**63) + 1),
        ("uint64", 2**64 - 1),
        ("uint64", 2**63 + 2**10 + 1),
        ("int32", 2**24 + 1),
    ]:
        t = dl.full((), value, name)
        assert same(float(t), float(value)) and same(complex(t), complex(value))


def test_int_of_a_float_truncates_toward_zero():
    for value, expected in [(2.9, 2), (-2.9, -2), (-0.5, 0), (1e20, int(1e20))]:
        assert same(int(dl.full((1,), value, "float64")), expected)
    assert int(dl.full((), 2.5, "float8_e4m3fn")) == 2
    assert int(dl.full((), -3.0, "float4_e2m1fn")) == -3


def test_conversions_of_vector_types_are_of_their_tuples():
    t = dl.full((), 0.5, "float4_e2m1fn_x2")
    assert t.item() == (0.5, 0.5) and bool(t) is True
    for convert in (float, int, complex):
        with pytest.raises(TypeError, match="tuple"):
            convert(t)
    with pytest.raises(TypeError, match="only integer tensors can be an index"):
        operator.index(t)


def test_refusals_of_several_elements_keep_their_messages():
    t = dl.zeros((2, 3), "float32")
    for convert, what in [(float, "a float"), (int, "an int"), (complex, "a complex")]:
        with pytest.raises(TypeError) as error:
            convert(t)
        assert str(error.value) == (
            f"only a tensor of one element can be converted to {what}; this one has shape (2, 3)"
        )
    with pytest.raises(TypeError) as error:
        t.item()
    assert "converted to a Python scalar" in str(error.value)
    with pytest.raises(TypeError) as error:
        operator.index(dl.zeros((0,), "int8"))
    assert "converted to an index; this one has shape (0,)" in str(error.value)
    with pytest.raises(ValueError) as error:
        bool(t)
    assert str(error.value) == (
        "the truth value of a tensor of shape (2, 3) is ambiguous (it holds 6 elements)"
    )


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
