"""What a NumPy user types first, and gets NumPy's answer for: Python's number types as
dtypes, the ordering comparisons, arithmetic refused with a pointer to the frameworks,
flatten/ravel/copy(order=). NumPy's own result for the same operation is the reference.
Casts are tested in test_casts.py, assignment in test_setitem.py, NumPy scalars and 0-d
arrays as numbers in test_python_data.py."""

import operator

import numpy as np
import pytest

import dlinterop as dl

# -- Python's number types as dtypes ------------------------------------------------------


@pytest.mark.parametrize("python_type", [bool, int, float, complex])
def test_python_number_type_is_numpys_dtype(python_type):
    assert dl.dtype(python_type) is dl.dtype(np.dtype(python_type))


def test_int_is_int64_as_numpy_2_and_pytorch_read_it():
    assert dl.dtype(int) is dl.int64 and dl.dtype(float) is dl.float64


@pytest.mark.parametrize("python_type", [bool, int, float, complex])
def test_python_number_type_is_taken_wherever_a_dtype_is(python_type):
    expected = dl.dtype(np.dtype(python_type))
    assert dl.zeros(2, python_type).dtype is expected
    assert dl.empty(2, dtype=python_type).dtype is expected
    assert dl.ones(2, python_type).dtype is expected
    assert dl.full(2, 1, dtype=python_type).dtype is expected
    assert dl.tensor([1, 0], dtype=python_type).dtype is expected
    if python_type is not bool:
        assert dl.arange(3, dtype=python_type).dtype is expected
    assert expected == python_type


@pytest.mark.parametrize("name", [n for n in dl.__all__ if isinstance(getattr(dl, n), dl.DType)])
def test_numpys_own_dtypes_are_those_the_buffer_protocol_describes(name):
    # DType.to_numpy's rule: a type with a buffer format is NumPy's own, of the same name;
    # the others are ml_dtypes' (or none), never one NumPy has under another name.
    dt = getattr(dl, name)
    try:
        memoryview(dl.zeros(1, dt))
        described = True
    except BufferError:
        described = False
    try:
        own = dt.to_numpy().type.__module__ == "numpy"
    except TypeError:  # NumPy has none, or ml_dtypes is missing
        own = False
    assert own == described
    if described:
        assert dt.to_numpy() == np.dtype(dt.name)


@pytest.mark.parametrize("name", ["float", "int", "complex"])
def test_ambiguous_names_stay_refused(name):
    with pytest.raises(ValueError, match="ambiguous"):
        dl.dtype(name)


@pytest.mark.parametrize("other", [str, list, object, type(None)])
def test_other_python_types_are_no_dtype(other):
    with pytest.raises(TypeError, match="cannot interpret"):
        dl.dtype(other)


# -- the ordering comparisons, element-wise as == is --------------------------------------

COMPARED = ["bool", "int8", "uint8", "int64", "uint64", "float16", "float32", "float64"]
try:
    import ml_dtypes  # noqa: F401
except ImportError:  # no wheel for free-threaded CPython 3.13: NumPy cannot hold these
    ML_TYPES = []
else:
    ML_TYPES = ["bfloat16", "float8_e4m3fn", "int4"]
COMPARED += ["complex64", "complex128", *ML_TYPES]
OPERATORS = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


def varied(name, shape):
    """Values of `name` with repeats (so that ties occur), NaN where the type has one."""
    base = (np.arange(int(np.prod(shape))) * 7 % 5 - 2).reshape(shape)
    np_dtype = dl.dtype(name).to_numpy()
    if name.startswith("complex"):
        values = base + 1j * (base[::-1] if base.ndim else base)
        values.flat[0] = complex(np.nan, 1)
        return values.astype(np_dtype)
    if name == "bool" or name.startswith("uint"):
        return (base % 2 if name == "bool" else base + 2).astype(np_dtype)
    values = base.astype(np.float64)
    if "float" in name:
        values.flat[-1] = np.nan
    return values.astype(np_dtype)


@pytest.mark.parametrize("name", COMPARED)
@pytest.mark.parametrize("op", OPERATORS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shapes", [((6,), (6,)), ((3, 1), (4,)), ((2, 3), ())], ids=str)
def test_comparison_is_numpys_element_wise(name, op, shapes):
    a, b = varied(name, shapes[0]), varied(name, shapes[1])[..., ::-1] if shapes[1] else None
    b = varied(name, shapes[1]) if b is None else b
    got = op(dl.asarray(a), dl.asarray(b))
    assert got.dtype is dl.bool_ and got.shape == np.broadcast_shapes(a.shape, b.shape)
    with np.errstate(invalid="ignore"):
        assert got.tolist() == op(a, b).tolist()


@pytest.mark.parametrize("op", OPERATORS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("scalar", [1, 1.5, True, np.float32(0.5), np.int64(-1), 2**70])
def test_comparison_with_a_scalar_either_side_is_numpys(op, scalar):
    a = np.array([-1.0, 0.5, 1.0, 2.0, np.nan])
    t = dl.asarray(a)
    assert op(t, scalar).tolist() == op(a, scalar).tolist()
    assert op(scalar, t).tolist() == op(scalar, a).tolist()


def test_values_compare_exactly_as_python_numbers():
    # NumPy converts int64 to float64 against a float array: 2**53 + 1 == 2.0**53 there.
    assert (dl.tensor([2**53 + 1]) == dl.tensor([2.0**53], dtype=float)).tolist() == [False]
    assert (dl.tensor([2**53 + 1]) > 2.0**53).tolist() == [True]


def test_comparison_of_complex_values_follows_numpys_order():
    parts = [0.0, 1.0, np.nan]
    values = np.array([complex(r, i) for r in parts for i in parts])
    a, b = np.repeat(values, len(values)), np.tile(values, len(values))
    for op in OPERATORS[:4]:
        with np.errstate(invalid="ignore"):
            assert op(dl.asarray(a), dl.asarray(b)).tolist() == op(a, b).tolist()


def test_comparison_with_what_is_no_array_is_refused_as_python_refuses():
    t = dl.arange(3)
    with pytest.raises(TypeError, match="'<' not supported"):
        t < "a"
    with pytest.raises(TypeError, match="'>=' not supported"):
        t >= object()
    with pytest.raises(ValueError, match="cannot be broadcast"):
        t < dl.arange(4)


def test_vector_types_have_no_order():
    t = dl.full((2,), 1.0, "float4_e2m1fn_x2")
    assert (t == t).tolist() == [True, True]
    with pytest.raises(TypeError, match="no order"):
        t < t


# -- arithmetic: refused, pointing to the frameworks ---------------------------------------

BINARY = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.matmul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    divmod,
    operator.pow,
    operator.lshift,
    operator.rshift,
    operator.and_,
    operator.or_,
    operator.xor,
]


@pytest.mark.parametrize("op", BINARY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("other", [1, 2.5, [1, 2, 3], "tensor"])
def test_arithmetic_is_refused_with_a_pointer_to_numpy(op, other):
    t = dl.arange(3)
    other = dl.arange(3) if other == "tensor" else other
    for left, right in ((t, other), (other, t)):
        with pytest.raises(TypeError, match=r"np\.from_dlpack\(t\).*docs/quickstart\.md"):
            op(left, right)


@pytest.mark.parametrize("op", [operator.neg, operator.pos, operator.invert, abs])
def test_unary_arithmetic_is_refused_with_a_pointer_to_numpy(op):
    with pytest.raises(TypeError, match="bad operand type.*np.from_dlpack"):
        op(dl.arange(3))


def test_in_place_arithmetic_is_refused_and_changes_nothing():
    t = dl.arange(3)
    before = t
    with pytest.raises(TypeError, match="does no math"):
        t += 1
    assert t is before and t.tolist() == [0, 1, 2]


def test_math_is_done_by_numpy_over_the_same_memory():
    t = dl.arange(3, dtype=float)
    a = np.from_dlpack(t)
    assert (a + 1).tolist() == [1.0, 2.0, 3.0]
    a *= 2  # in place: the Tensor's memory
    assert t.tolist() == [0.0, 2.0, 4.0]
    assert (np.ones(3) + t).tolist() == [1.0, 3.0, 5.0]  # NumPy's operator reads the Tensor


# -- copy(order=), flatten and ravel --------------------------------------------------------

LAYOUTS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(2, 0, 1),
    "stepped": lambda x: x[:, ::-1, ::2],
    "reversed": lambda x: x.T,
    "broadcast": lambda x: x[:, :1, :],
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("name", ["int16", "float64", "bool", *ML_TYPES[:1]])
def test_flatten_ravel_and_copy_are_numpys(layout, order, name):
    a = LAYOUTS[layout](np.arange(24).reshape(2, 3, 4).astype(dl.dtype(name).to_numpy()))
    t = LAYOUTS[layout](dl.tensor(np.arange(24).reshape(2, 3, 4), dtype=name))
    assert t.flatten(order).tolist() == a.flatten(order).tolist()
    assert t.ravel(order).tolist() == a.ravel(order).tolist()
    copy = t.copy(order)
    assert copy.tolist() == a.tolist() and copy.owner is None
    # The layout NumPy gives, along the axes that have one (an axis of one element has none).
    expected = a.copy(order).strides
    strides = [s * a.dtype.itemsize for s in copy.strides]
    assert [s for s, n in zip(strides, a.shape) if n > 1] == [
        s for s, n in zip(expected, a.shape) if n > 1
    ]


def test_flatten_is_always_a_copy_that_owns_its_memory():
    t = dl.arange(6)
    flat = t.flatten()
    assert flat.data_ptr != t.data_ptr and flat.owner is None and flat.shape == (6,)
    assert dl.tensor(3.5).flatten().tolist() == [3.5]


def test_ravel_is_a_view_where_the_strides_allow_as_numpy():
    m = dl.arange(12).reshape(3, 4)
    assert m.ravel().data_ptr == m.data_ptr and m.ravel().owner is m.owner
    assert m.T.ravel("F").data_ptr == m.data_ptr
    reversed_rows = np.arange(12).reshape(3, 4)[:, ::-1]
    assert m[:, ::-1].ravel("K").tolist() == reversed_rows.ravel("K").tolist()
    assert m[:, ::2].ravel().data_ptr == m.data_ptr  # evenly spaced: NumPy's view too
    cut = m[:, :3].ravel()
    assert cut.owner is not m.owner and cut.tolist() == [0, 1, 2, 4, 5, 6, 8, 9, 10]


def test_copy_is_c_contiguous_and_writable_by_default():
    a = np.arange(6.0).reshape(2, 3).T
    a.flags.writeable = False
    t = dl.asarray(a)
    copy = t.copy()
    assert copy.is_contiguous() and not copy.readonly and copy.tolist() == a.tolist()


def test_packed_sub_byte_types_are_read_in_c_order():
    t = dl.tensor([[1, -2, 3], [4, 5, -6]], dtype="int4")
    assert t.flatten().tolist() == [1, -2, 3, 4, 5, -6] == t.ravel().tolist()
    assert t.copy("K").tolist() == t.tolist() and t.copy("A").is_contiguous()
    for method in (t.flatten, t.ravel, t.copy):
        with pytest.raises(ValueError, match="packed"):
            method("F")


@pytest.mark.parametrize("order", ["c", "X", 1])
def test_other_orders_are_refused(order):
    with pytest.raises(ValueError, match="order must be one of"):
        dl.zeros((2, 2)).flatten(order)


def test_order_none_is_c_as_numpy_reads_it():
    t = dl.arange(6).reshape(2, 3).T
    assert t.flatten(None).tolist() == [0, 3, 1, 4, 2, 5] == t.ravel(None).tolist()
    assert t.copy(None).is_contiguous()
