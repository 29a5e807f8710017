"""Creation's arguments on its common paths against its general one: shapes, dtypes and
alignment given to dl.empty, dl.zeros and dl.ones (and dl.full) give the same Tensor, or the
same error, whichever path they take (support/creation_cases.py)."""

import numpy as np
import pytest

import dlinterop as dl

from creation_cases import ALL_NAMES, Index, Int, _outcome
from tensor_cases import _raw

ml_dtypes = pytest.importorskip("ml_dtypes")


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
