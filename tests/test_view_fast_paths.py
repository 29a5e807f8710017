"""Where the views' C paths split off from the general ones: indexing, transpose, reshape,
view, squeeze and unsqueeze read exact ints (and slices, ..., None) in C, and hand any other
argument, and every refusal, to the general reader. Each test gives both paths the same
arguments (an `__index__` object stands for an int, forcing the general path) and expects
the same view, field for field, or the same error; NumPy is the reference for both."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlinterop as dl

settings.register_profile(
    "fast-paths",
    deadline=None,
    max_examples=300,
    derandomize=bool(os.environ.get("CI")),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class Index:
    """An int that is not an exact int: only `__index__` (as NumPy's integers are)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value

    def __repr__(self):
        return f"Index({self.value})"


def _general(arg):
    """arg with every exact int (inside tuples, lists and slices too) an Index."""
    if type(arg) is int:
        return Index(arg)
    if type(arg) is tuple:
        return tuple(_general(a) for a in arg)
    if type(arg) is list:
        return [_general(a) for a in arg]
    if type(arg) is slice:
        return slice(*(None if x is None else Index(x) for x in (arg.start, arg.stop, arg.step)))
    return arg


def _fields(t, copied=False):
    """Everything a view is; a copy by its layout and values alone: one that owns its buffer,
    or (`copied`) a view of a buffer made for it (a reshape that had to copy), whose address
    two calls share only when the allocator happens to hand the same block out again."""
    where = np.from_dlpack(t).tolist() if copied or t.owner is None else t.data_ptr
    return (t.shape, t.strides, where, t.dtype, t.readonly, t.readonly_reason)


def _outcome(action):
    """What action() gives: a view's fields, or the type and text of its error."""
    live = dl.memory_stats()["live_buffers"]
    try:
        view = action()
    except (IndexError, ValueError, TypeError, OverflowError) as error:
        return type(error), str(error)
    return _fields(view, copied=dl.memory_stats()["live_buffers"] > live)


def _agree(t, a, do):
    """do(t, arg-maker) gives the same on both paths; where it gives a Tensor, NumPy's
    do(a, ...) gives the same values (over the same memory, for a view)."""
    fast = _outcome(lambda: do(t, lambda x: x))
    assert fast == _outcome(lambda: do(t, _general))
    if isinstance(fast[0], type):
        return
    got = do(t, lambda x: x)
    try:
        expected = do(a, lambda x: x)
    except ValueError:
        # NumPy counts bytes even of an empty array: (0, 2**63 - 1) is "too big" there
        assert 0 in got.shape
        return
    assert got.shape == expected.shape
    assert np.array_equal(np.from_dlpack(got), expected)
    if expected.size and got.owner is not None and np.shares_memory(expected, a):
        assert np.from_dlpack(got).ctypes.data == expected.ctypes.data


def _pair(shape, dtype="int32", readonly=False):
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    a.flags.writeable = not readonly
    return dl.from_dlpack(a), a


KEYS = [
    0,
    -1,
    3,
    -4,
    4,
    -5,
    2**40,
    -(2**40),
    2**70,
    -(2**70),
    (1, 2),
    (-1, -2),
    (1, 2, 0),
    (0, 5),
    (0, -6),
    slice(None),
    slice(1, 3),
    slice(None, None, -1),
    slice(3, 0, -2),
    slice(-100, 100),
    slice(2**70, None),
    slice(None, -(2**70), -1),
    slice(None, None, 2**62),
    slice(None, None, 0),
    slice(5, 1),
    (slice(1, 3), 2),
    (Ellipsis, 1),
    (1, Ellipsis, None),
    (Ellipsis, Ellipsis),
    (None, Ellipsis, None),
    (),
    None,
    (None,) * 3,
    (0, 0, 0),
    (0, 0, 0, 0),
    (0, slice(None), 1),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("readonly", [False, True])
def test_indexing_both_paths_agree(key, readonly):
    t, a = _pair((4, 5, 3), readonly=readonly)
    _agree(t, a, lambda x, g: x[g(key)])


def test_indexing_refuses_what_the_general_path_refuses():
    t, _ = _pair((4, 5))
    for key in (True, False, (0, True), 1.0, "0", [0], (0, [1])):
        with pytest.raises(IndexError, match="valid indices"):
            t[key]
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 5"):
        t[0, 5]
    with pytest.raises(IndexError, match="out of bounds for axis 0"):
        t[2**70]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(IndexError, match="at most 64 dimensions"):
        t[(None,) * 63]
    assert t[(None,) * 62].ndim == 64


def test_indexing_numpy_integers_and_index_objects():
    t, a = _pair((4, 5))
    for i, j in ((np.int64(1), np.int8(-1)), (Index(2), 3), (np.uint8(3), Index(-5))):
        assert _fields(t[i, j]) == _fields(t[int(i.__index__()), int(j.__index__())])
        assert np.from_dlpack(t[i, j]).item() == a[int(i.__index__()), int(j.__index__())]


def test_indexing_negative_strides_and_offsets():
    t, a = _pair((6, 4))
    r = t[::-1, ::-2]
    ra = a[::-1, ::-2]
    for key in (0, -1, (2, 1), slice(1, None), (slice(None, None, -1), 0)):
        _agree(r, ra, lambda x, g, key=key: x[g(key)])


def test_packed_sub_byte_indexing_stays_on_the_general_path():
    t = dl.zeros((4, 8), "int4")
    assert t[1].shape == (8,) and t[1, 2:6].shape == (4,)
    assert _fields(t[1]) == _fields(t[Index(1)])
    with pytest.raises(ValueError, match="byte"):
        t[0, 1]


AXES = [
    (),
    (1, 0, 2),
    (2, 0, 1),
    (-1, 0, 1),
    (0, 0, 1),
    (0, 1),
    (0, 1, 3),
    (0, 1, -4),
    (True, 0, 2),
    (0, 1, 2, 3),
]


@pytest.mark.parametrize("axes", AXES, ids=repr)
def test_transpose_both_paths_agree(axes):
    t, a = _pair((2, 3, 4))
    _agree(t, a, lambda x, g: x.transpose(*g(axes)))
    _agree(t, a, lambda x, g: x.transpose(g(axes)))


SHAPES = [
    (24,),
    (-1,),
    (4, 6),
    (6, -1),
    (-1, 6),
    (2, 3, 4),
    (1, 24, 1),
    (4, 1, 3, 2),
    (5, 5),
    (-1, 5),
    (-1, -1),
    (2, -3),
    (0, -1),
    (24, 0),
    (2**62, 2**62),
    (-1, 2**63 - 1),
    (),
    (1,) * 64,
    (1,) * 65,
    (2.0, 12),
    (True, 24),
]


@pytest.mark.parametrize("source", ["contiguous", "transposed", "reversed", "broadcast", "empty"])
@pytest.mark.parametrize("shape", SHAPES, ids=repr)
def test_reshape_and_view_both_paths_agree(source, shape):
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = {
        "contiguous": base,
        "transposed": base.transpose(2, 1, 0),
        "reversed": base[:, :, ::-1],
        "broadcast": np.broadcast_to(base[0, 0], (2, 3, 4)),
        "empty": base[:, :0],
    }[source]
    t = dl.from_dlpack(a)
    # view(shape) has no NumPy twin that refuses copies: its two paths are compared
    _agree(t, a, lambda x, g: x.reshape(g(shape)))
    _agree(t, a, lambda x, g: x.reshape(g(list(shape))))
    assert _outcome(lambda: t.reshape(*shape)) == _outcome(lambda: t.reshape(*_general(shape)))
    assert _outcome(lambda: t.view(shape)) == _outcome(lambda: t.view(_general(shape)))


def test_view_of_a_shape_and_of_a_dtype_split_on_the_argument():
    t, _ = _pair((2, 3, 4), "float32")
    assert t.view(24).shape == (24,)
    assert t.view(np.int64(24)).shape == (24,)
    assert t.view([4, 6]).shape == t.view((4, 6)).shape == t.view(4, 6).shape == (4, 6)
    assert t.view("int32").dtype == dl.int32 and t.view(dl.int16).shape == (2, 3, 8)
    with pytest.raises(ValueError, match="without a copy"):
        t.T.view(24)


SQUEEZE = [None, 0, -1, 2, 1, -3, 3, (0, 2), (0,), True, Index(0), np.int32(-1)]


@pytest.mark.parametrize("axis", SQUEEZE, ids=repr)
def test_squeeze_both_paths_agree(axis):
    t, a = _pair((1, 3, 1))
    _agree(t, a, lambda x, g: x.squeeze(g(axis)))


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4, 4, -5, True, Index(2), np.int64(-2)], ids=repr)
def test_unsqueeze_both_paths_agree(axis):
    t, a = _pair((1, 3, 1))
    _agree(
        t,
        a,
        lambda x, g: (
            np.expand_dims(x, g(axis)) if isinstance(x, np.ndarray) else x.unsqueeze(g(axis))
        ),
    )


_keys_item = st.one_of(
    st.integers(-7, 7),
    st.builds(
        slice,
        st.none() | st.integers(-8, 8),
        st.none() | st.integers(-8, 8),
        st.none() | st.integers(-3, 3).filter(bool),
    ),
    st.just(None),
    st.just(Ellipsis),
)


@settings.get_profile("fast-paths")
@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple),
    key=st.lists(_keys_item, max_size=5).map(tuple) | _keys_item,
    reverse=st.booleans(),
)
def test_indexing_property_both_paths_agree(shape, key, reverse):
    a = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    if reverse and a.ndim:
        a = a[..., ::-1]
    _agree(dl.from_dlpack(a), a, lambda x, g: x[g(key)])


@settings.get_profile("fast-paths")
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
    new=st.lists(st.integers(-1, 6), min_size=0, max_size=4).map(tuple),
    transpose=st.booleans(),
)
def test_reshape_property_both_paths_agree(shape, new, transpose):
    a = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    if transpose:
        a = a.T
    t = dl.from_dlpack(a)
    _agree(t, a, lambda x, g: x.reshape(g(new)))
    assert _outcome(lambda: t.view(new)) == _outcome(lambda: t.view(_general(new)))
