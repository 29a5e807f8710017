"""Casts between data types (Tensor.astype, and the casts of dl.asarray, dl.tensor and
assignment, which share them): every pair of the types NumPy and ml_dtypes can cast is
compared, value for value and bit for bit, with NumPy's own astype; NaN to an integer type
and real values out of its range are refused where NumPy gives machine-dependent values."""

import ctypes
import math
import random
import warnings

import numpy as np
import pytest

import dlinterop as dl

# ml_dtypes has no wheel for free-threaded CPython 3.13: these tests need its types
ml_dtypes = pytest.importorskip("ml_dtypes")

from forge import forge  # noqa: E402

ALL = sorted(
    {v for v in vars(dl).values() if isinstance(v, dl.DType)}, key=lambda d: (d.code, d.bits)
)
# complex32 and the vector float4_e2m1fn_x2 have no NumPy dtype: tested on their own below.
CASTABLE = [d for d in ALL if d.name not in ("complex32", "float4_e2m1fn_x2")]
KIND = {0: "int", 1: "int", 2: "float", 4: "float", 5: "complex", 6: "bool", 18: "complex"}


def kind(dt):
    return KIND.get(dt.code, "float")  # DLPack codes 7 to 17: the small float formats


def integer_range(dt):
    if dt.code == 0:
        return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
    return 0, (1 << dt.bits) - 1


def small_float_midpoints():
    """Every value halfway between two neighbours of each small float format and bfloat16,
    and the neighbours: where rounding has to choose."""
    out = []
    for dt in ALL:
        if kind(dt) == "float" and dt.code != 2 and dt.lanes == 1:
            codes = np.arange(1 << min(dt.bits, 16)).astype(
                np.uint16 if dt.bits == 16 else np.uint8
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # NaN codes
                values = codes.view(dt.to_numpy()).astype(np.float64)
            finite = np.unique(values[np.isfinite(values)])
            out += list(finite) + list((finite[1:] + finite[:-1]) / 2)
    return out


FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 3.75, 7.9, -7.9, 100.25, -128.5]
FLOATS += [255.5, 256.0, 1e4, 65504.0, 65520.0, 1e6, 3e38, 1e300, -1e300, math.inf]
FLOATS += [-math.inf, math.nan, -math.nan, 1e-8, 1e-40, 2.0**-24, 2.0**-25, 3 * 2.0**-26]
FLOATS += [1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-30, float(2**60 + 2**36 + 1)]
_rng = random.Random(53)
FLOATS += [
    _rng.choice((-1, 1)) * math.ldexp(_rng.random(), _rng.randint(-30, 30)) for _ in range(64)
]
INTS = [0, 1, -1, 2, -2, 5, -7, 7, 8, -8, 15, 16, 100, -100, 127, -128, 128, 255, 256, -129]
INTS += [300, 1000, 32767, -32768, 65535, 65520, 2**24 + 1, 2**30 + 2**22 + 1, 2**31 - 1]
INTS += [-(2**31), 2**32 - 1, 2**53 + 1, 2**60 + 2**36 + 1, 2**62, -(2**63), 2**63 - 1, 2**64 - 1]


def source_values(dt):
    """A NumPy array of varied values of dt: every code of a type of at most 8 bits."""
    np_dtype = dt.to_numpy()
    if dt.bits <= 8 and kind(dt) in ("float", "int"):
        if kind(dt) == "int":
            low, high = integer_range(dt)
            return np.arange(low, high + 1).astype(np_dtype)
        return np.arange(1 << dt.bits).astype(np.uint8).view(np_dtype)
    if kind(dt) == "bool":
        return np.array([False, True, True, False])
    if kind(dt) == "int":
        low, high = integer_range(dt)
        return np.array([v for v in INTS if low <= v <= high], dtype=object).astype(np_dtype)
    floats = FLOATS + (small_float_midpoints() if dt.bits == 64 else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind(dt) == "complex":
            parts = np.array(FLOATS)
            return (parts + 1j * parts[::-1]).astype(np_dtype)
        return np.array(floats).astype(np_dtype)


def castable(value, source, target):
    """Whether one source value (a NumPy scalar of source) has a cast to target: an integer
    type takes every integer, and only the real values whose truncation it holds."""
    if kind(target) != "int" or kind(source) in ("int", "bool"):
        return True
    x = float(np.float64(value.real if kind(source) == "complex" else value))
    low, high = integer_range(target)
    return math.isfinite(x) and low <= math.trunc(x) <= high


def float_bits(a):
    """Each element of a float array as (is NaN, sign, bits): NaN payloads aside."""
    wide = a.astype(np.float64)
    raw = a.view(np.dtype(f"u{a.dtype.itemsize}"))
    return [
        (True, math.copysign(1, w) < 0, None) if w != w else (False, None, int(r))
        for w, r in zip(wide.tolist(), raw.tolist())
    ]


def assert_same(got, expected, target):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if kind(target) == "complex":
        part = np.float32 if target.bits == 64 else np.float64
        if target.code == 18:
            part = ml_dtypes.bfloat16
        got, expected = got.view(part), expected.view(part)
        target = dl.dtype(part)
    if kind(target) == "float":
        assert float_bits(got) == float_bits(expected)
    else:
        assert (
            got.astype(np.int64 if target.code != 1 else np.uint64).tolist()
            == expected.astype(np.int64 if target.code != 1 else np.uint64).tolist()
        )


def cast_quietly(array, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return array.astype(target)


@pytest.mark.parametrize("source", CASTABLE, ids=lambda d: d.name)
@pytest.mark.parametrize("target", CASTABLE, ids=lambda d: d.name)
def test_astype_gives_numpys_values(source, target):
    values = source_values(source)
    kept = values[[castable(v, source, target) for v in values]]
    t = dl.asarray(kept)
    assert t.dtype is source
    got = cast_quietly(t, target)
    assert got.dtype is target and got.shape == kept.shape and got.is_contiguous()
    assert_same(np.asarray(got), cast_quietly(kept, target.to_numpy()), target)


def refused_values(source, target):
    return [v for v in source_values(source) if not castable(v, source, target)]


# The pairs with a value to refuse (float6 and float4 have no NaN, and hold only small values).
REFUSING = [
    pytest.param(s, t, id=f"{s.name}-{t.name}")
    for s in CASTABLE
    for t in CASTABLE
    if kind(s) in ("float", "complex") and kind(t) == "int" and refused_values(s, t)
]


@pytest.mark.parametrize("source,target", REFUSING)
def test_a_value_no_integer_holds_is_refused(source, target):
    for value in refused_values(source, target)[:3]:
        x = float(np.float64(value.real if kind(source) == "complex" else value))
        error = ValueError if x != x else OverflowError
        with pytest.raises(error, match=f"to {target.name}"):
            cast_quietly(dl.asarray(np.array([value])), target)


def test_integers_wrap_as_numpys():
    assert dl.tensor([300, -200]).astype("int8").tolist() == [44, 56]
    assert dl.tensor([2**64 - 1], dtype="uint64").astype(dl.int8).tolist() == [-1]
    assert dl.tensor([-1], dtype="int8").astype("uint64").tolist() == [2**64 - 1]
    assert dl.tensor([9, -9, 300]).astype("int4").tolist() == [-7, 7, -4]
    assert dl.tensor([True, False]).astype("uint2").tolist() == [1, 0]


def test_reals_truncate_toward_zero():
    assert dl.tensor([1.9, -1.9, -0.5, 127.99]).astype("int8").tolist() == [1, -1, 0, 127]
    assert dl.tensor([-0.99]).astype("uint8").tolist() == [0]


def test_integers_round_once_to_float32():
    value = 2**60 + 2**36 + 1
    got = dl.tensor([value]).astype("float32")
    assert (
        np.asarray(got).view(np.uint32)[0]
        == np.array([value]).astype(np.float32).view(np.uint32)[0]
    )
    assert got.tolist()[0] != float(np.float32(float(value)))  # through a double: rounded twice


def test_float64_rounds_once_to_float16_and_bfloat16():
    half = dl.tensor([1 + 2.0**-11 + 2.0**-40], dtype="float64").astype("float16")
    assert half.tolist() == [1 + 2.0**-10]
    brain = dl.tensor([1 + 2.0**-8 + 2.0**-30], dtype="float64").astype("bfloat16")
    assert brain.tolist() == [1 + 2.0**-7]


def test_complex_to_real_keeps_the_real_part_and_warns_as_numpy():
    t = dl.tensor([1.5 + 2j, -3 - 1j])
    with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary part") as w:
        assert t.astype("float64").tolist() == [1.5, -3.0]
    assert w[0].filename == __file__  # the caller's line, as NumPy's warning names it
    assert t.astype(bool).tolist() == [True, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.astype("complex128").tolist() == [1.5 + 2j, -3 - 1j]


@pytest.mark.parametrize("source", CASTABLE, ids=lambda d: d.name)
def test_complex32_holds_float16_parts(source):
    values = source_values(source)
    kept = values[[castable(v, source, dl.float16) for v in values]]
    got = cast_quietly(dl.asarray(kept), dl.complex32)
    assert got.dtype is dl.complex32
    wide = cast_quietly(kept, np.complex128)
    expected = cast_quietly(np.stack([wide.real, wide.imag], -1), np.float16)
    halves = np.asarray(got.view("float16")).reshape(expected.shape)
    assert float_bits(halves.ravel()) == float_bits(expected.ravel())
    back = np.asarray(cast_quietly(got, dl.complex64)).view(np.float32)
    assert float_bits(back) == float_bits(expected.astype(np.float32).ravel())


def test_vector_types_cast_only_to_themselves():
    t = dl.full((3,), 1.5, "float4_e2m1fn_x2")
    assert t.astype("float4_e2m1fn_x2").tolist() == t.tolist()
    for other in ("float4_e2m1fn", "float32", "uint8"):
        with pytest.raises(TypeError, match="vector type"):
            t.astype(other)
        with pytest.raises(TypeError, match="vector type"):
            dl.zeros(3, other).astype("float4_e2m1fn_x2")


def test_astype_copy_false_is_the_tensor_itself_when_the_type_matches():
    t = dl.arange(4)
    assert t.astype("int64", copy=False) is t
    same = t.astype(dl.int64)
    assert same is not t and same.data_ptr != t.data_ptr and same.tolist() == t.tolist()
    assert t.astype("int32", copy=False).dtype is dl.int32


@pytest.mark.parametrize(
    "view",
    [lambda t: t[::-1], lambda t: t.reshape(3, 4).T, lambda t: t.reshape(3, 4)[:, ::2]],
    ids=["reversed", "transposed", "stepped"],
)
@pytest.mark.parametrize("target", ["float64", "int4", "float8_e5m2", "bool"])
def test_astype_reads_any_strides_and_writes_c_order(view, target):
    t = view(dl.arange(12, dtype="int16"))
    got = t.astype(target)
    assert got.is_contiguous() and got.shape == t.shape
    assert np.array_equal(np.asarray(got), np.asarray(t).astype(dl.dtype(target).to_numpy()))


def test_astype_of_a_broadcast_and_a_zero_size_tensor():
    b = dl.asarray(np.broadcast_to(np.arange(3.0), (2, 3)))
    assert b.strides == (0, 1) and b.astype("int8").tolist() == [[0, 1, 2], [0, 1, 2]]
    assert dl.empty((0, 5)).astype("int4").shape == (0, 5)
    assert dl.tensor(2.5).astype("int32").tolist() == 2


def test_packed_output_leaves_no_stray_bits():
    got = dl.tensor([-1, -1, -1]).astype("int4")
    assert got.tolist() == [-1, -1, -1] and got.nbytes == 2
    assert ctypes.string_at(got.data_ptr, 2) == b"\xff\x0f"


def test_astype_of_a_read_only_tensor_is_writable():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dl.asarray(a)
    assert t.readonly and not t.astype("float32").readonly


def test_astype_refuses_memory_it_cannot_read():
    t = dl.from_dlpack(forge(shape=(2, 3), device=(21, 0)).capsule)
    with pytest.raises(BufferError, match="ascend"):
        t.astype("float64")
    assert t.astype("float32", copy=False) is t


def test_astype_takes_every_dtype_spelling():
    t = dl.arange(3)
    assert t.astype(np.float32).dtype is dl.float32
    assert t.astype(float).dtype is dl.float64
    assert t.astype("f2").dtype is dl.float16
    with pytest.raises(ValueError, match="ambiguous"):
        t.astype("float")


# -- dl.asarray(x, dtype) and dl.tensor(x, dtype): a cast where the types differ ----------


def test_asarray_with_the_sources_dtype_still_shares():
    a = np.arange(4.0)
    for dtype in ("float64", float, np.float64, dl.float64):
        assert dl.asarray(a, dtype).data_ptr == a.ctypes.data
        assert dl.asarray(a, dtype=dtype, copy=False).data_ptr == a.ctypes.data


@pytest.mark.parametrize("target", ["float32", "int16", "bfloat16", "int4", "complex64"])
def test_asarray_casts_to_another_dtype_as_astype(target):
    a = np.array([0.5, -1.5, 2.25, 7.0])
    t = dl.asarray(a, dtype=target)
    assert t.dtype == target and t.data_ptr != a.ctypes.data
    assert t.tolist() == dl.asarray(a).astype(target).tolist()
    assert_same(np.asarray(t), a.astype(dl.dtype(target).to_numpy()), dl.dtype(target))


@pytest.mark.parametrize("source", [np.arange(3.0), bytearray(b"\x01\x02"), dl.arange(3)], ids=type)
def test_asarray_refuses_a_cast_with_copy_false(source):
    with pytest.raises(dl.CopyError, match="copy=False"):
        dl.asarray(source, dtype="complex128", copy=False)


def test_asarray_of_python_data_makes_the_dtype_asked():
    assert dl.asarray([1, 2], "int8").dtype is dl.int8
    assert dl.asarray([[1.5]], dtype=float).tolist() == [[1.5]]
    with pytest.raises(OverflowError):  # a Python value, as NumPy 2 refuses it
        dl.asarray([300], "int8")


def test_asarray_of_a_dlpack_producer_casts_after_import():
    torch = pytest.importorskip("torch")

    x = torch.arange(4, dtype=torch.int32)
    t = dl.asarray(x, dtype="float64")
    assert t.dtype is dl.float64 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert dl.asarray(x, dtype="int32").data_ptr == x.data_ptr()


def test_tensor_with_a_dtype_casts_a_copy_once():
    a = np.arange(3, dtype=np.int64)
    t = dl.tensor(a, float)
    assert t.dtype is dl.float64 and t.owner is None and t.tolist() == [0.0, 1.0, 2.0]


def test_a_cast_of_memory_the_host_cannot_read_is_refused():
    t = dl.from_dlpack(forge(shape=(2, 3), device=(21, 0)).capsule)
    with pytest.raises(BufferError, match="ascend"):
        dl.asarray(t, dtype="float64")
    assert dl.asarray(t, dtype="float32") is t


def test_python_floats_round_to_bfloat16_as_pytorch_arrays_as_ml_dtypes():
    x = 1 + 2.0**-8 + 2.0**-30  # just past halfway between two bfloat16 values
    t = dl.zeros(2, "bfloat16")
    t[0] = x  # a Python value: through float32, as PyTorch rounds it
    t[1] = np.array([x])  # an array: cast once, as ml_dtypes
    expected = np.array([x]).astype(ml_dtypes.bfloat16).astype(np.float64)[0]
    assert t.tolist() == [1.0, 1 + 2.0**-7] == [dl.full((), x, "bfloat16").item(), expected]


def test_python_floats_round_to_bfloat16_as_pytorch_rounds_them():
    torch = pytest.importorskip("torch")
    x = 1 + 2.0**-8 + 2.0**-30
    t = dl.zeros(1, "bfloat16")
    t[0] = x
    assert t.tolist() == [torch.tensor(x, dtype=torch.bfloat16).item()]


@pytest.mark.parametrize(
    "target,inside,outside",
    [
        ("int64", [-(2.0**63), 2.0**63 - 1024, -0.9], [2.0**63, -(2.0**63) - 2048]),
        ("uint64", [-0.99, 2.0**64 - 2048, 0.0], [-1.0, 2.0**64]),
        ("int32", [-2147483648.9, 2147483647.9, -0.0], [-2147483649.0, 2147483648.0]),
        ("uint8", [-0.5, 255.99], [-1.0, 256.0]),
        ("int8", [-128.99, 127.5], [-129.0, 128.0]),
    ],
)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_the_edges_of_an_integer_range_are_numpys(target, inside, outside, layout):
    def source(values):  # a strided view (a row of its own loop), or a contiguous array
        doubled = np.repeat(np.array(values, dtype=np.float64), 2)
        return doubled[::2] if layout == "strided" else doubled[::2].copy()

    values = source(inside)
    assert dl.asarray(values).astype(target).tolist() == values.astype(target).tolist()
    for value in outside:
        with pytest.raises(OverflowError, match=f"to {target}"):
            dl.asarray(source([0.0, value])).astype(target)
