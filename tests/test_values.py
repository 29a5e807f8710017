"""A Tensor's values as Python objects: tolist, item, float/int/complex/bool/index of one
element, len and iteration, contiguous(). NumPy (and ml_dtypes for its types) is the
reference for every value."""

import operator
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl

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


@pytest.mark.parametrize("name", NUMPY_NAMES)
@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (2, 0, 3), (1, 2, 1, 2)], ids=repr)
def test_tolist_is_numpys(name, shape):
    rng = np.random.default_rng(5)
    a = np.array(rng.standard_normal(shape) * 100).astype(name)  # 0-d stays 0-d
    if name.startswith("complex"):
        a = a + 1j * np.array(rng.standard_normal(shape) * 10).astype(name)
    t = dl.from_dlpack(np.array(a, order="C"))
    assert t.tolist() == a.tolist()
    if a.size == 1:
        assert t.item() == a.item() and type(t.item()) is type(a.item())


def test_tolist_of_a_strided_view_is_numpys():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = dl.from_dlpack(a)
    assert t[::-1, 1::2].tolist() == a[::-1, 1::2].tolist()
    assert t.T.tolist() == a.T.tolist()


@pytest.mark.parametrize(
    "name",
    [
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e3m4",
        "float8_e8m0fnu",
        "float6_e2m3fn",
        "float6_e3m2fn",
        "float4_e2m1fn",
    ],
)
def test_values_of_small_floats_are_ml_dtypes(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    kind = getattr(ml_dtypes, name)
    values = [0.5, 1.0, 2.0, 4.0] if name == "float8_e8m0fnu" else [0.5, 1.0, -2.0, 3.0, 0.0]
    for value in values:
        expected = np.array([value], dtype=kind).astype(np.float64).item()
        assert dl.full((), value, name).tolist() == expected
        assert dl.full((2, 3), value, name).tolist() == [[expected] * 3] * 2  # packed too


def test_vector_types_give_a_tuple_per_element():
    t = dl.full((3,), 0.5, "float4_e2m1fn_x2")
    assert t.tolist() == [(0.5, 0.5)] * 3


def test_complex32_values():
    assert dl.full((2,), 1.5 - 2j, "complex32").tolist() == [1.5 - 2j] * 2


@pytest.mark.parametrize(
    "convert,value,expected",
    [
        (float, dl.full((1, 1), 2.5, "float32"), 2.5),
        (int, dl.full((), 7, "int64"), 7),
        (int, dl.full((1,), 7.9, "float64"), 7),
        (complex, dl.full((), 1 + 1j, "complex64"), 1 + 1j),
        (bool, dl.full((1,), 0, "int8"), False),
        (bool, dl.full((), 3, "int8"), True),
        (operator.index, dl.full((), 4, "uint16"), 4),
    ],
    ids=repr,
)
def test_one_element_conversions(convert, value, expected):
    assert convert(value) == expected


def test_conversions_of_several_elements_refuse():
    t = dl.zeros((2,), "float32")
    for convert in (float, int, complex, operator.index):
        with pytest.raises(TypeError):
            convert(t if convert is not operator.index else dl.zeros((2,), "int32"))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t)
    with pytest.raises(TypeError):
        dl.zeros((0,)).item()
    with pytest.raises(TypeError):
        operator.index(dl.full((), 1.0, "float32"))  # only integer tensors are indices
    assert [10, 20, 30][dl.full((), 1, "int64")] == 20


def test_len_and_iteration():
    a = np.arange(6).reshape(3, 2)
    t = dl.from_dlpack(a)
    assert len(t) == 3
    rows = list(t)
    assert [r.tolist() for r in rows] == a.tolist()
    assert all(np.shares_memory(np.from_dlpack(r), a) for r in rows)
    with pytest.raises(TypeError):
        len(dl.zeros(()))
    with pytest.raises(TypeError):
        iter(dl.zeros(()))


def test_contiguous():
    t = dl.from_dlpack(np.arange(6.0).reshape(2, 3))
    assert t.contiguous() is t
    c = t.T.contiguous()
    assert c.strides == (2, 1) and c.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_a_python_list_built_from_a_tensor_is_its_values():
    # list(t) and NumPy's coercion of a sequence both iterate: the buffer protocol still
    # comes first for NumPy, so np.asarray(t) shares rather than iterating.
    t = dl.from_dlpack(np.arange(4, dtype=np.int16))
    assert [int(x) for x in t] == [0, 1, 2, 3]
    assert np.asarray(t).ctypes.data == t.data_ptr


def test_values_need_no_numpy():
    code = (
        "import sys\n"
        "sys.modules['numpy'] = None\n"
        "import dlinterop as dl\n"
        "t = dl.full((2, 2), 1.5, 'bfloat16')\n"
        "assert t.tolist() == [[1.5, 1.5], [1.5, 1.5]]\n"
        "assert float(dl.full((), 0.5, 'float8_e4m3fn')) == 0.5\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# -- presentation and introspection ------------------------------------------------------


def test_repr_shows_values_and_summarises_large_tensors():
    small = dl.from_dlpack(np.arange(6).reshape(2, 3))
    assert repr(small) == (
        "Tensor([[0, 1, 2],\n        [3, 4, 5]], shape=(2, 3), dtype=int64, device=cpu:0)"
    )
    big = dl.from_dlpack(np.arange(5000.0))
    assert repr(big) == (
        "Tensor([0.0, 1.0, 2.0, ..., 4997.0, 4998.0, 4999.0], shape=(5000,), "
        "dtype=float64, device=cpu:0)"
    )
    rows = repr(dl.from_dlpack(np.arange(3000).reshape(100, 30))).splitlines()
    assert len(rows) == 7 and rows[3].strip() == "...,"
    assert rows[0] == "Tensor([[0, 1, 2, ..., 27, 28, 29],"


def test_repr_of_read_only_and_of_unreadable_values():
    a = np.arange(2.0)
    a.flags.writeable = False
    assert repr(dl.from_dlpack(a)).endswith("device=cpu:0, readonly='flag')")
    packed = dl.zeros((4, 8), "float4_e2m1fn")[:, 2:6]  # a strided view, packed values
    assert repr(packed).endswith("shape=(4, 4), dtype=float4_e2m1fn, device=cpu:0)")


def test_weakref():
    import gc
    import weakref

    t = dl.zeros((3,), "float32")
    ref = weakref.ref(t)
    assert ref() is t
    del t
    gc.collect()
    assert ref() is None


def test_sizeof_counts_the_buffer_the_tensor_owns():
    owner = dl.zeros((1000,), "float64")
    view = owner[10:]
    assert sys.getsizeof(owner) >= 8000 > sys.getsizeof(view)
    assert sys.getsizeof(owner) - sys.getsizeof(view) == 8000
    wide = dl.zeros((1,) * 12, "int8")  # shape and strides held apart
    assert sys.getsizeof(wide) > sys.getsizeof(dl.zeros((1,), "int8"))


# -- construction from Python data ---------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        3,
        2.5,
        True,
        1 + 2j,
        [],
        [1, 2, 3],
        [[1, 2], [3, 4]],
        [[1.5], [2.5]],
        ([1, 2], (3, 4)),
        [[[True]], [[False]]],
        [1, 2.5],
        [1, 2j],
        [True, 2],
        [[], []],
    ],
    ids=repr,
)
def test_tensor_from_python_data_is_numpys_with_dl_fulls_dtypes(data):
    t = dl.tensor(data)
    a = np.array(data)
    assert t.shape == a.shape
    kind = {"b": "bool", "i": "int64", "f": "float32", "c": "complex64"}[a.dtype.kind]
    assert t.dtype == dl.dtype(kind if a.size else "float32")
    assert t.tolist() == a.astype(kind if a.size else "float32").tolist()
    assert dl.asarray(data).tolist() == t.tolist()


@pytest.mark.parametrize(
    "name",
    [
        "int8",
        "uint16",
        "float16",
        "float64",
        "complex128",
        "bfloat16",
        "float8_e4m3fn",
        "float4_e2m1fn",
        "bool",
    ],
)
def test_tensor_with_a_dtype_encodes_each_value(name):
    values = (
        [[0.5, 1.0], [2.0, 3.0]] if name not in ("int8", "uint16", "bool") else [[0, 1], [2, 3]]
    )
    t = dl.tensor(values, name)
    assert t.dtype == dl.dtype(name) and t.shape == (2, 2)
    expected = [[dl.full((), v, name).item() for v in row] for row in values]
    assert t.tolist() == expected


def test_tensor_refuses_ragged_or_non_numeric_data():
    for data, error in (
        ([[1, 2], [3]], ValueError),
        ([[1], 2], ValueError),
        (["a"], TypeError),
        ([None], TypeError),
        ([b"x"], TypeError),
        ("abc", TypeError),
    ):
        with pytest.raises(error):
            dl.tensor(data)
    with pytest.raises(TypeError, match="vector type"):
        dl.tensor([0.5], "float4_e2m1fn_x2")
    with pytest.raises(ValueError, match="copy=False"):
        dl.asarray([1, 2], copy=False)


def test_tensor_of_deep_nesting_is_limited():
    deep = 0
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match="at most"):
        dl.tensor(deep)


def test_tensor_of_an_array_copies_and_casts_to_another_dtype():
    a = np.arange(3.0)
    t = dl.tensor(a)
    assert t.tolist() == [0.0, 1.0, 2.0] and t.data_ptr != a.ctypes.data
    same = dl.tensor(a, "float64")
    assert same.dtype == dl.float64 and same.data_ptr != a.ctypes.data
    cast = dl.tensor(a + 0.5, "int32")
    assert cast.dtype == dl.int32 and cast.tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    "args,kwargs",
    [
        ((5,), {}),
        ((1, 4), {}),
        ((0, 1, 0.25), {}),
        ((5, 0, -2), {}),
        ((3,), {"dtype": "float64"}),
        ((0,), {}),
        ((2.5,), {}),
        ((-3, 3, 2), {}),
    ],
    ids=repr,
)
def test_arange_is_numpys(args, kwargs):
    t = dl.arange(*args, **kwargs)
    a = np.arange(*args, **kwargs)
    assert t.tolist() == pytest.approx(a.tolist())
    assert t.shape == a.shape
    assert t.dtype == dl.dtype(kwargs.get("dtype", "int64" if a.dtype.kind == "i" else "float32"))


def test_arange_refuses():
    with pytest.raises(ValueError):
        dl.arange(0, 5, 0)
    for bad in ("5", 1j, None):
        with pytest.raises(TypeError):
            dl.arange(bad)


def test_ones():
    assert dl.ones((2, 2)).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert dl.ones(3, "bool").tolist() == [True] * 3
    assert dl.ones(2, "complex64").tolist() == [1 + 0j] * 2
    assert dl.ones((2,), "int8", shared=True).is_shared
