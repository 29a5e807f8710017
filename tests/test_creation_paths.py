"""Creation's common cases, read and written in C, against its general path: dl.empty,
dl.zeros, dl.ones, dl.full and dl.arange give the same Tensor, or the same error, whichever
path an argument takes, and the buffer export describes every Tensor as before.

The common paths take exact ints (small ones), tuples of them, dtypes given as a dl.DType, a
registered name or None, exact bools, ints and floats as values; anything else (a list, a
NumPy integer, an int or float subclass, a large int) goes the general way. Each test below
pairs the two."""

import ctypes
import math
import struct
import sys

import numpy as np
import pytest

import dlinterop as dl

ml_dtypes = pytest.importorskip("ml_dtypes")

NUMPY_NAMES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]
ALL_NAMES = sorted({v.name for v in vars(dl).values() if isinstance(v, dl.DType)})


class Int(int):
    """An int the common paths do not take: it goes the general way, with the same value."""


class Float(float):
    """A float the common paths do not take."""


class Index:
    """Not an int, but converts to one (as NumPy integers do)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def _raw(t):
    return ctypes.string_at(t.data_ptr, t.nbytes)


def _outcome(make, *args, **kwargs):
    """What make(*args, **kwargs) gives: (shape, dtype name, bytes), or the error's type
    and message."""
    try:
        t = make(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - compared below
        return type(error), str(error)
    return t.shape, t.dtype.name, _raw(t)


def _same(first, second, value, general):
    """Two outcomes alike, an error message that shows the value as given aside ("True
    does not fit" against "1 does not fit")."""
    if isinstance(first[0], type) and isinstance(second[0], type):
        return first[0] is second[0] and first[1].replace(repr(value), "<value>", 1) == second[
            1
        ].replace(repr(general), "<value>", 1)
    return first == second


def _general(value):
    """The same number as an object the common paths leave to the general one."""
    if type(value) is bool:
        return Int(value)
    if type(value) is int:
        return Int(value)
    if type(value) is float:
        return Float(value)
    return value


# -- shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "common, general",
    [
        (3, [3]),
        (3, np.int64(3)),
        (3, Index(3)),
        ((2, 3), [2, 3]),
        ((2, 3), (np.int32(2), Index(3))),
        ((), []),
        ((0, 5), [0, 5]),
        ((1,) * 64, [1] * 64),
        ((2**29,) * 0 + (7, 1, 1, 2), [7, 1, 1, 2]),
    ],
    ids=repr,
)
@pytest.mark.parametrize("make", [dl.empty, dl.zeros, dl.ones])
def test_shape_forms_give_the_same_tensor(make, common, general):
    a, b = make(common), make(general)
    assert a.shape == b.shape and a.strides == b.strides and a.dtype is b.dtype
    assert _raw(a) == _raw(b) or make is dl.empty


@pytest.mark.parametrize(
    "common, general",
    [
        (-1, [-1]),
        ((2, -1), [2, -1]),
        ((-3, 0), [-3, 0]),
        ((1,) * 65, [1] * 65),
        ((2**62, 4), [2**62, 4]),
        ((2**40,), [2**40]),
        ((2**63,), [2**63]),
        (2**64, [2**64]),
        ((2.0,), [2.0]),
        ((2, None), [2, None]),
    ],
    ids=repr,
)
@pytest.mark.parametrize("make", [dl.empty, dl.zeros, dl.ones])
def test_bad_shapes_are_refused_alike(make, common, general):
    first = _outcome(make, common)
    assert isinstance(first[0], type) and issubclass(first[0], Exception)
    error, message = _outcome(make, general)
    if error is TypeError:  # the message shows the shape as given: "got [2.0]"
        message = message.replace(repr(general), repr(common))
    assert first == (error, message)


def test_negative_and_too_many_dimensions_keep_their_messages():
    with pytest.raises(ValueError, match=r"negative dimension in shape \[2, -1\]"):
        dl.empty((2, -1))
    with pytest.raises(ValueError, match="at most 64 dimensions, got 65"):
        dl.zeros((1,) * 65)
    with pytest.raises(TypeError, match="shape must be an int or a sequence of ints"):
        dl.empty((2, 1.5))


def test_bools_in_a_shape_read_as_ints_on_both_paths():
    # bool is an int: read as 0 or 1, as before the common path existed (NumPy does too).
    assert dl.empty(True).shape == (1,)
    assert dl.empty((True, 2)).shape == dl.empty([True, 2]).shape == (1, 2)
    assert dl.zeros((2, False)).shape == (2, 0)


# -- dtypes ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
def test_dtype_forms_give_the_same_type(name):
    dt = dl.dtype(name)
    assert dl.empty(2, dt).dtype is dt
    assert dl.empty(2, name).dtype is dt
    assert dl.empty(2, dtype=(dt.code, dt.bits, dt.lanes)).dtype is dt


@pytest.mark.parametrize("form", [None, "float32", dl.float32, "f4", np.float32, np.dtype("f4")])
def test_float32_forms(form):
    assert dl.zeros(3, form).dtype is dl.float32
    assert dl.empty((3,), dtype=form).dtype is dl.float32


@pytest.mark.parametrize("form", ["float", "xx", 3, object()])
@pytest.mark.parametrize("make", [dl.empty, dl.zeros, dl.ones])
def test_bad_dtypes_are_refused_as_dl_dtype_refuses_them(make, form):
    expected = _outcome(dl.dtype, form)
    assert _outcome(make, 3, form)[:2] == expected[:2]


def test_ones_takes_no_none_dtype_and_full_infers_one():
    with pytest.raises(TypeError, match="cannot interpret None as a data type"):
        dl.ones(3, None)
    assert dl.full(3, 1, None).dtype is dl.int64


def test_errors_come_in_the_same_order():
    # The dtype first, then the device, the alignment and the shape.
    with pytest.raises(ValueError, match="unknown data type name"):
        dl.empty(-1, "xx", alignment=3)
    with pytest.raises(ValueError, match="power of two"):
        dl.empty(-1, alignment=3)
    with pytest.raises(ValueError, match="no device cpu:1"):
        dl.empty(3, device="cpu:1")


# -- alignment ---------------------------------------------------------------------------


@pytest.mark.parametrize("nbytes", [0, 1, 16, 255, 257, 4096, 128 << 10, (128 << 10) + 1, 4 << 20])
@pytest.mark.parametrize("make", [dl.empty, dl.zeros, dl.ones])
def test_default_alignment_at_every_size(make, nbytes):
    for _ in range(3):
        t = make(nbytes, "uint8")
        assert t.data_ptr % 256 == 0


@pytest.mark.parametrize("alignment", [1, 2, 8, 64, 512, 4096, 1 << 16])
@pytest.mark.parametrize("nbytes", [3, 100, 200 << 10])
def test_other_alignments_zero_exactly_their_bytes(alignment, nbytes):
    for _ in range(3):
        t = dl.zeros(nbytes, "uint8", alignment=alignment)
        assert t.data_ptr % alignment == 0
        assert _raw(t) == bytes(nbytes)


@pytest.mark.parametrize(
    "common, general",
    [(256, np.int64(256)), (64, Index(64)), (True, Int(1)), (3, Int(3)), (-2, Int(-2))],
    ids=repr,
)
def test_alignment_forms(common, general):
    assert (
        _outcome(dl.empty, 5, "int8", alignment=common)[:2]
        == _outcome(dl.empty, 5, "int8", alignment=general)[:2]
    )


@pytest.mark.parametrize("alignment", [2**70, 2.0, "256", None])
def test_alignment_that_is_no_index_is_refused(alignment):
    with pytest.raises((TypeError, OverflowError)):
        dl.empty(3, alignment=alignment)


# -- values: zeros, ones, full -----------------------------------------------------------


@pytest.mark.parametrize("nbytes", [64, 100 << 10, 256 << 10, 4 << 20])
def test_zeros_over_memory_just_freed_with_other_bytes(nbytes):
    # A block freed a moment ago comes back from the heap, not zeroed by the kernel.
    for _ in range(3):
        dirty = dl.full(nbytes, 0xA5, "uint8")
        del dirty
        assert _raw(dl.zeros(nbytes, "uint8")) == bytes(nbytes)


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("size", [0, 1, 7, 33, 1000])
def test_zeros_and_ones_of_every_dtype(name, size):
    dt = dl.dtype(name)
    assert _raw(dl.zeros(size, name)) == bytes(dl.zeros(size, name).nbytes)
    one = True if dt is dl.bool_ else 1
    assert _same(_outcome(dl.ones, size, name), _outcome(dl.full, size, Int(one), name), 1, 1)


@pytest.mark.parametrize("name", NUMPY_NAMES)
@pytest.mark.parametrize("size", [1, 5, 16, 67, 1000, 100_000])
def test_ones_and_full_match_numpy(name, size):
    assert np.array_equal(np.from_dlpack(dl.ones(size, name)), np.ones(size, name))
    value = {"bool": True, "uint8": 200, "int8": -7}.get(name, 3)
    assert np.array_equal(np.from_dlpack(dl.full(size, value, name)), np.full(size, value, name))


VALUES = [
    0,
    1,
    -1,
    True,
    False,
    2.5,
    -2.5,
    0.0,
    -0.0,
    0.1,
    1e-46,
    65504.0,
    65520.0,
    3.4028234663852886e38,
    3.4028235677973366e38,
    3.5e38,
    -3.5e38,
    1e300,
    float("inf"),
    float("-inf"),
    float("nan"),
    -float("nan"),
    127,
    128,
    -128,
    -129,
    255,
    256,
    2**15,
    2**31 - 1,
    2**31,
    2**32,
    -(2**31) - 1,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    2**100,
]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_full_encodes_every_value_as_the_general_path(name):
    for value in VALUES:
        general = _general(value)
        common = _outcome(dl.full, (3,), value, name)
        assert _same(common, _outcome(dl.full, (3,), general, name), value, general), value


@pytest.mark.parametrize("name", ["float32", "float64", "complex64", "complex128"])
def test_full_floats_are_struct_s_rounding(name):
    part = {"float32": "f", "float64": "d", "complex64": "f", "complex128": "d"}[name]
    for value in [0.1, 1 / 3, 3.4028235e38, 1e-45, -(2**60) + 1, 2**24 + 1, 7]:
        element = struct.pack("<" + part, value)
        if name.startswith("complex"):
            element += struct.pack("<" + part, 0.0)
        assert _raw(dl.full(2, value, name)) == element * 2


def test_full_infers_its_dtype_from_the_value_on_both_paths():
    assert dl.full(2, 3).dtype is dl.full(2, Int(3)).dtype is dl.int64
    assert dl.full(2, 3.0).dtype is dl.full(2, Float(3.0)).dtype is dl.float32
    assert dl.full(2, True).dtype is dl.bool_
    assert dl.full(2, np.float64(3.0)).dtype is dl.float32  # a float subclass
    assert dl.full(2, np.int64(3)).dtype is dl.int64  # a number, as PyTorch reads it
    with pytest.raises(TypeError, match="cannot infer a dtype from"):
        dl.full(2, "3")


def test_full_out_of_range_keeps_its_message():
    with pytest.raises(OverflowError, match="300 does not fit in int8"):
        dl.full(1, 300, "int8")
    with pytest.raises(OverflowError, match="-1 does not fit in uint64"):
        dl.full(1, -1, "uint64")
    with pytest.raises(ValueError):
        dl.full(1, float("nan"), "int32")


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e3m2fn", "int4", "uint2", "int1"])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 9, 1001])
def test_ones_of_packed_types_pack_every_code(name, size):
    assert _outcome(dl.ones, size, name) == _outcome(dl.full, size, 1, name)
    if name != "int1":  # 1 does not fit in int1 (-1 to 0)
        assert dl.ones(size, name).tolist() == [1] * size


@pytest.mark.parametrize("itemsize", [2, 4, 8, 16])
@pytest.mark.parametrize("count", [1, 3, 31, 32, 33, 127, 128, 129, 4097])
def test_fill_writes_exactly_its_items(itemsize, count):
    # Around the fill's block and word boundaries: every item, and nothing past the last.
    name = {2: "int16", 4: "int32", 8: "int64", 16: "complex128"}[itemsize]
    value = -2.5 + 1j if itemsize == 16 else -2
    base = dl.full(count + 8, 0x11, "uint8")
    target = dl.full(count, value, name)
    element = _raw(dl.full(1, value, name))
    assert _raw(target) == element * count
    assert _raw(base) == b"\x11" * (count + 8)


# -- arange ------------------------------------------------------------------------------


def _python_values(start, stop, step):
    """arange's values as Python computes them, one by one."""
    return [start + i * step for i in range(max(0, math.ceil((stop - start) / step)))]


ARANGE_INT_CASES = [
    (0, 100, 1),
    (0, 0, 1),
    (5, 0, 1),
    (5, 0, -1),
    (-7, 30, 4),
    (30, -7, -4),
    (0, 10, 3),
    (2**52 - 10, 2**52, 3),
    (-(2**52), -(2**52) + 5, 1),
    (2**53, 2**53 + 6, 2),
    (0, 2**31 + 2, 2**30),
]


@pytest.mark.parametrize("start, stop, step", ARANGE_INT_CASES, ids=repr)
@pytest.mark.parametrize(
    "dtype",
    [
        None,
        "int8",
        "uint8",
        "int16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float32",
        "float64",
        "float16",
        "bool",
    ],
)
def test_arange_of_ints_as_the_general_path(start, stop, step, dtype):
    common = _outcome(dl.arange, start, stop, step, dtype=dtype)
    general = _outcome(dl.arange, Int(start), Int(stop), Int(step), dtype=dtype)
    if dtype is None and isinstance(general[0], tuple):
        assert common[1] == "int64"
    assert common == general


ARANGE_FLOAT_CASES = [
    (0.0, 1.0, 0.1),
    (0, 1, 0.1),
    (1.0, 0.0, -0.1),
    (-5, 12.5, 0.25),
    (0.0, 0.0, 0.5),
    (1.0, 0.0, 0.5),
    (0.0, 1e-3, 1e-5),
    (0.3, 7, 0.7),
    (-3.4e38, 3.4e38, 1e37),
    (0.0, 1e300, 1e298),
    (2**52, 2**52 + 4.0, 0.5),
]


@pytest.mark.parametrize("start, stop, step", ARANGE_FLOAT_CASES, ids=repr)
@pytest.mark.parametrize("dtype", [None, "float32", "float64", "float16", "int32"])
def test_arange_of_floats_as_the_general_path(start, stop, step, dtype):
    common = _outcome(dl.arange, start, stop, step, dtype=dtype)
    general = _outcome(dl.arange, _general(start), _general(stop), Float(step), dtype=dtype)
    assert common == general


@pytest.mark.parametrize("start, stop, step", ARANGE_FLOAT_CASES[:8], ids=repr)
def test_arange_float64_values_are_pythons(start, stop, step):
    t = dl.arange(start, stop, step, dtype="float64")
    assert t.tolist() == _python_values(start, stop, step)


@pytest.mark.parametrize("start, stop, step", ARANGE_INT_CASES[:8], ids=repr)
def test_arange_int64_values_are_numpys(start, stop, step):
    assert dl.arange(start, stop, step).tolist() == np.arange(start, stop, step).tolist()


@pytest.mark.parametrize(
    "args",
    [
        (1j,),
        (0, 5, 0),
        (0.0, 5.0, 0.0),
        (0, float("nan"), 1),
        (0, float("inf"), 1.0),
        (0, 2**80),
        (0, 2**62, 0.5),
        ("3",),
        (None,),
    ],
    ids=repr,
)
def test_arange_refusals_are_the_general_paths(args):
    common = _outcome(dl.arange, *args)
    general = _outcome(dl.arange, *[_general(a) for a in args])
    assert isinstance(common[0], type) and common == general


@pytest.mark.parametrize("args", [(True,), (0, True), (0, 5, True), (False, 5)], ids=repr)
def test_arange_refuses_bools(args):
    with pytest.raises(TypeError, match="is a real number, not bool"):
        dl.arange(*args)


def test_arange_out_of_range_keeps_its_overflow_error():
    with pytest.raises(OverflowError):
        dl.arange(200, dtype="int8")
    with pytest.raises(OverflowError):
        dl.arange(-1, 3, dtype="uint16")
    assert dl.arange(-128, 128, dtype="int8").tolist() == list(range(-128, 128))


def test_arange_result_on_another_device_form():
    assert dl.arange(4, device=None).device == "cpu"
    assert dl.arange(4, device="cpu:0").tolist() == [0, 1, 2, 3]


# -- memory_stats ------------------------------------------------------------------------


def test_memory_stats_count_every_path_exactly():
    made = [
        lambda: dl.empty((16,)),
        lambda: dl.zeros(16, "float64"),
        lambda: dl.zeros(200 << 10, "uint8"),
        lambda: dl.ones((4, 4), dl.int32),
        lambda: dl.full(3, 2.0),
        lambda: dl.full(5, 1, "int4"),
        lambda: dl.arange(100),
        lambda: dl.arange(0.0, 1.0, 0.25),
        lambda: dl.empty((1024, 1024), dtype=dl.float32),
    ]
    for make in made:
        before = dl.memory_stats()
        tensors = [make() for _ in range(5)]
        during = dl.memory_stats()
        assert during["live_buffers"] == before["live_buffers"] + 5
        assert during["live_bytes"] == before["live_bytes"] + sum(t.nbytes for t in tensors)
        assert during["total_allocations"] == before["total_allocations"] + 5
        assert during["peak_bytes"] >= during["live_bytes"]
        del tensors
        after = dl.memory_stats()
        assert after["live_buffers"] == before["live_buffers"]
        assert after["live_bytes"] == before["live_bytes"]


# -- the buffer export -------------------------------------------------------------------


FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "complex64": "Zf",
    "complex128": "Zd",
}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_buffer_format_of_every_dtype(name):
    t = dl.zeros((2, 3), name)
    if name not in FORMATS:
        with pytest.raises(BufferError, match=f"no format for {name}; use DLPack"):
            memoryview(t)
        return
    m = memoryview(t)
    assert (m.format, m.itemsize, m.shape, m.strides) == (
        FORMATS[name],
        t.itemsize,
        (2, 3),
        (3 * t.itemsize, t.itemsize),
    )
    assert m.nbytes == t.nbytes and not m.readonly
    assert np.asarray(t).dtype == np.dtype(name)


PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_ND, PyBUF_STRIDES = 0, 0x1, 0x8, 0x18
PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS = 0x38, 0x58, 0x98


def _get_buffer(obj, flags):
    """PyObject_GetBuffer(obj, flags), released at once: None, or the error it raised."""
    view = ctypes.create_string_buffer(256)  # room for a Py_buffer
    try:
        ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(obj), view, flags)
    except Exception as error:  # noqa: BLE001 - returned
        return type(error), str(error)
    ctypes.pythonapi.PyBuffer_Release(view)
    return None


def test_buffer_requests_and_their_refusals():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = dl.asarray(a[::2, ::-3])
    m = memoryview(t)
    assert m.strides == (48, -12) and m.tolist() == a[::2, ::-3].tolist()
    not_c = (BufferError, "tensor is not C-contiguous")
    assert _get_buffer(t, PyBUF_STRIDES) is None
    assert _get_buffer(t, PyBUF_SIMPLE) == not_c
    assert _get_buffer(t, PyBUF_ND) == not_c
    assert _get_buffer(t, PyBUF_C_CONTIGUOUS) == not_c
    assert _get_buffer(t, PyBUF_ANY_CONTIGUOUS) == (BufferError, "tensor is not contiguous")
    c = dl.zeros((2, 3), "int16")
    assert _get_buffer(c, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) is None
    assert _get_buffer(c, PyBUF_F_CONTIGUOUS) == (BufferError, "tensor is not Fortran-contiguous")
    assert _get_buffer(dl.zeros(3), PyBUF_F_CONTIGUOUS) is None
    ro = a.copy()
    ro.flags.writeable = False
    r = dl.asarray(ro)
    assert r.readonly and memoryview(r).readonly
    assert _get_buffer(r, PyBUF_WRITABLE) == (BufferError, "tensor is read-only")
    assert not np.asarray(r).flags.writeable
    assert np.asarray(dl.full((), 5, "int16")).tolist() == 5
    assert _get_buffer(dl.zeros(2, "bfloat16"), PyBUF_SIMPLE) == (
        BufferError,
        "the buffer protocol has no format for bfloat16; use DLPack (from_dlpack) to exchange it",
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_one_axis_buffers_and_their_strides(name):
    # A contiguous axis has no strides allocated for it (they point at the item size);
    # a strided or reversed one has them computed, as every other layout.
    t = dl.arange(6, dtype=name) if name != "bool" else dl.ones(6, "bool")
    for view, step in ((t, 1), (t[::2], 2), (t[::-1], -1), (t[1:1], 1)):
        m = memoryview(view)
        assert (m.shape, m.strides) == ((len(view),), (step * t.itemsize,))
        assert m.nbytes == view.nbytes and np.asarray(view).tolist() == view.tolist()
        for flags in (PyBUF_SIMPLE, PyBUF_ND, PyBUF_STRIDES, PyBUF_C_CONTIGUOUS):
            refused = (
                None
                if step == 1 or flags == PyBUF_STRIDES
                else (BufferError, "tensor is not C-contiguous")
            )
            assert _get_buffer(view, flags) == refused
        m.release()


def test_buffer_exports_are_released():
    t = dl.arange(12, dtype="float64")
    before = sys.getrefcount(t)
    views = [memoryview(t) for _ in range(10)]
    arrays = [np.asarray(t) for _ in range(10)]
    assert sys.getrefcount(t) > before
    for v in views:
        v.release()
    del views, arrays
    assert sys.getrefcount(t) == before
