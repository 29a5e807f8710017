"""Views of a Tensor (metadata only, the same memory): basic indexing, transpose, reshape,
view(shape), view(dtype), squeeze/unsqueeze; and NumPy's __array__ protocol. NumPy is the
reference for every result."""

import gc
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl

A = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)

KEYS = [
    0,
    -1,
    1,
    (1, 2),
    (1, 2, 3),
    (-2, -3, -4),
    slice(None),
    slice(None, None, -1),
    slice(1, None),
    slice(5, 1),
    slice(None, None, 7),
    (Ellipsis, 1),
    (1, Ellipsis),
    (Ellipsis,),
    (),
    None,
    (None, 0),
    (0, None, slice(1, 3)),
    (slice(None), slice(None, None, -2)),
    (1, Ellipsis, None),
    (slice(0, 2), 2, slice(None, None, 3)),
    (Ellipsis, None, slice(3, 0, -1)),
    (None, Ellipsis, None),
    (slice(-100, 100),),
]


def _same_memory(view, expected):
    """view's elements are expected's, where expected (a NumPy view) has them."""
    got = np.from_dlpack(view)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)
    if expected.size:
        assert got.__array_interface__["data"][0] == expected.__array_interface__["data"][0]
        # (the stride of an axis of one element is never followed: NumPy's and ours differ)
        assert [s for s, n in zip(got.strides, got.shape) if n > 1] == [
            s for s, n in zip(expected.strides, expected.shape) if n > 1
        ]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_is_numpys_over_the_same_memory(key):
    a = A.copy()
    t = dl.from_dlpack(a)
    expected = a[key]
    if isinstance(expected, np.generic):
        # An index for every axis: NumPy gives a scalar (a copy), dlinterop a 0-d view, as
        # torch does; NumPy's 0-d view of the same element is a[key + (...,)].
        expected = a[key + (Ellipsis,)]
    _same_memory(t[key], expected)


def test_a_view_is_written_through():
    t = dl.zeros((3, 4), "int32")
    row = t[1, ::-1]
    np.from_dlpack(row)[:] = [1, 2, 3, 4]
    assert np.from_dlpack(t).tolist() == [[0, 0, 0, 0], [4, 3, 2, 1], [0, 0, 0, 0]]


@pytest.mark.parametrize(
    "key,error",
    [
        ([0], IndexError),
        (1.5, IndexError),
        (True, IndexError),
        ((0, 0, 0, 0), IndexError),
        (2, IndexError),
        (-3, IndexError),
        ((Ellipsis, Ellipsis), IndexError),
        ((0, 3), IndexError),
        ("a", IndexError),
        (2**100, IndexError),
        (slice(None, None, 0), ValueError),
    ],
    ids=repr,
)
def test_what_basic_indexing_refuses(key, error):
    with pytest.raises(error):
        dl.from_dlpack(A)[key]


def test_numpy_integers_index():
    t = dl.from_dlpack(A)
    _same_memory(t[np.int64(1), np.int8(-1)], A[1, -1])


def test_a_view_holds_the_root_not_its_source():
    t = dl.zeros((4, 4), "float64")
    view = t[1:][1:][::2]
    del t
    gc.collect()
    assert np.from_dlpack(view).tolist() == [[0.0] * 4]  # the memory is alive


def test_a_view_of_read_only_memory_is_read_only():
    a = np.arange(6.0).reshape(2, 3)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    for view in (
        t[0],
        t.T,
        t.reshape(3, 2),
        t.view(6),
        t.view("int64"),
        t.squeeze(),
        t.unsqueeze(0),
        t[None],
    ):
        assert view.readonly
        assert not np.from_dlpack(view).flags.writeable


def test_views_export_through_every_door():
    t = dl.from_dlpack(A.copy())
    view = t[1, ::2, 1:3]
    expected = A[1, ::2, 1:3]
    assert np.array_equal(np.from_dlpack(view), expected)
    assert np.array_equal(np.asarray(memoryview(view)), expected)
    assert np.array_equal(np.from_dlpack(dl.from_dlpack(view)), expected)
    torch = pytest.importorskip("torch")
    assert torch.equal(torch.from_dlpack(view), torch.from_numpy(expected.copy()))


def test_transpose_and_T():
    t = dl.from_dlpack(A)
    _same_memory(t.T, A.T)
    _same_memory(t.transpose(1, 0, 2), A.transpose(1, 0, 2))
    _same_memory(t.transpose((2, 0, 1)), A.transpose(2, 0, 1))
    _same_memory(t.transpose(-1, 0, 1), A.transpose(-1, 0, 1))
    _same_memory(t.transpose(), A.transpose())
    for bad in ((0, 1), (0, 0, 1), (0, 1, 3)):
        with pytest.raises((ValueError, IndexError)):
            t.transpose(*bad)


@pytest.mark.parametrize("source", ["contiguous", "transposed", "sliced", "broadcast"])
@pytest.mark.parametrize(
    "shape", [(24,), (4, 6), (6, -1), (2, 3, 4), (1, 24, 1), (4, 1, 3, 2), (-1,)], ids=repr
)
def test_reshape_is_numpys_and_views_when_numpy_would(source, shape):
    a = {
        "contiguous": A,
        "transposed": A.transpose(2, 1, 0),
        "sliced": A[:, :, ::-1],
        "broadcast": np.broadcast_to(A[0, 0], (2, 3, 4)),
    }[source]
    t = dl.from_dlpack(a)
    expected = a.reshape(shape)
    got = t.reshape(shape)
    assert got.shape == expected.shape and np.array_equal(np.from_dlpack(got), expected)
    shares = np.shares_memory(expected, a)
    assert np.shares_memory(np.from_dlpack(got), a) == shares
    if shares:
        _same_memory(t.view(shape), expected)
    else:
        with pytest.raises(ValueError, match="without a copy"):
            t.view(shape)


def test_reshape_refuses_a_wrong_size():
    t = dl.from_dlpack(A)
    for shape in ((5, 5), (-1, 5), (-1, -1), (2, -3), (0, -1)):
        with pytest.raises(ValueError):
            t.reshape(shape)
    with pytest.raises(TypeError):
        t.reshape(2.0, 12)


def test_reshape_of_an_empty_tensor():
    t = dl.zeros((0, 4), "float32")
    assert t.reshape(4, 0).shape == (4, 0)
    assert t.reshape(-1).shape == (0,)


@pytest.mark.parametrize("name", ["int32", "uint8", "float64", "int16", "complex64"])
def test_view_as_another_dtype_is_numpys(name):
    a = A.copy()
    t = dl.from_dlpack(a)
    _same_memory(t.view(name), a.view(name))
    _same_memory(t[1:, 1].view(name), a[1:, 1].view(name))


def test_view_as_another_dtype_refuses_what_numpy_refuses():
    t = dl.from_dlpack(A)
    with pytest.raises(ValueError):
        t[:, :, ::2].view("float64")  # last axis not contiguous
    with pytest.raises(ValueError):
        t[:, :, :3].view("float64")  # 12 bytes do not hold float64s
    with pytest.raises(ValueError):
        t[0, 0, 0].view("float64")  # 0-d, sizes differ
    assert t.view(dl.bfloat16).shape == (2, 3, 8)


def test_squeeze_and_unsqueeze():
    t = dl.zeros((1, 3, 1), "int8")
    assert t.squeeze().shape == (3,)
    assert t.squeeze(0).shape == (3, 1)
    assert t.squeeze((0, -1)).shape == (3,)
    with pytest.raises(ValueError):
        t.squeeze(1)
    assert t.unsqueeze(0).shape == (1, 1, 3, 1)
    assert t.unsqueeze(-1).shape == (1, 3, 1, 1)
    with pytest.raises(IndexError):
        t.unsqueeze(5)


def test_sub_byte_views_stay_on_byte_boundaries():
    t = dl.zeros((4, 8), "float4_e2m1fn")
    assert t[1].shape == (8,) and t[1:3].shape == (2, 8)
    assert t[:, 2:6].shape == (4, 4)
    with pytest.raises(ValueError, match="byte boundary"):
        t.T  # a column of packed elements: no byte each
    assert t.reshape(8, 4).shape == (8, 4)
    for key in ((slice(None), slice(1, None)), (slice(None), slice(None, None, 2)), (0, 1)):
        with pytest.raises(ValueError, match="byte|packed"):
            t[key]
    with pytest.raises(ValueError):
        t.view("uint8")


def test_views_of_a_cuda_tensor_are_metadata_only():
    if not dl.cuda.is_available():
        pytest.skip("no CUDA device here (runs on the GPU machine)")
    t = dl.zeros((4, 6), "float32", device="cuda")
    view = t[1:, ::2].T
    assert view.device == t.device and view.shape == (3, 3)


def test_indexing_large_steps_and_offsets_does_not_overflow():
    t = dl.zeros((5,), "float64")
    assert t[:: 2**62].shape == (1,)
    assert t[:: -(2**62)].shape == (1,)
    assert t[2**62 :].shape == (0,)


def test_a_chain_of_views_is_released_without_recursion():
    # Each view holds the root, so views of views are siblings, not a chain.
    code = (
        "import dlinterop as dl\n"
        "t = dl.zeros((4,), 'int8')\n"
        "for _ in range(300_000):\n"
        "    t = t[:]\n"
        "del t\n"
        "assert dl.memory_stats()['live_buffers'] == 0\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# -- __array__ (NumPy 2's protocol) ---------------------------------------------------------


def test_numpy_asarray_shares_for_buffer_types():
    t = dl.from_dlpack(A.copy())
    a = np.asarray(t)
    assert a.ctypes.data == t.data_ptr and np.array_equal(a, A)
    assert t.__array__().ctypes.data == t.data_ptr
    assert t.__array__(copy=True).ctypes.data != t.data_ptr


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_numpy_asarray_of_ml_dtypes_types_shares(name):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = dl.full((3, 4), 2, name)
    a = np.asarray(t)
    assert a.dtype == np.dtype(getattr(ml_dtypes, name))
    assert a.ctypes.data == t.data_ptr and a.shape == (3, 4)
    assert np.asarray(t[:, ::2]).astype(np.float32).tolist() == [[2.0, 2.0]] * 3
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError):
        np.asarray(t, dtype=np.float32, copy=False)


@pytest.mark.parametrize("name", ["complex32", "float4_e2m1fn_x2"])
def test_numpy_asarray_of_a_type_numpy_cannot_hold_is_type_error(name):
    pytest.importorskip("ml_dtypes")
    with pytest.raises(TypeError):
        np.asarray(dl.zeros((2,), name))


def test_numpy_asarray_keeps_read_only():
    a = np.arange(4.0)
    a.flags.writeable = False
    assert not np.asarray(dl.from_dlpack(a)).flags.writeable
    pytest.importorskip("ml_dtypes")
    assert np.asarray(dl.full((2,), 1, "bfloat16")).flags.writeable


# -- dask.array over a Tensor ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "float32",
        "int8",
        "bool",
        "complex128",
        "uint64",
        "float16",
        "bfloat16",
        "float8_e4m3fn",
        "float8_e8m0fnu",
    ],
)
def test_dask_array_from_a_tensor_equals_numpys(name):
    da = pytest.importorskip("dask.array")
    pytest.importorskip("ml_dtypes")
    if name.startswith(("bfloat16", "float8")):  # NumPy exports no ml_dtypes type via DLPack
        t = dl.full((4, 6), 1.5, name)
    else:
        t = dl.from_dlpack(np.arange(24).reshape(4, 6).astype(name))
    a = np.asarray(t)
    x = da.from_array(t, chunks=(2, 4))
    assert x.dtype == a.dtype and x.shape == a.shape
    chunk = x.blocks[1, 0].compute()
    assert np.array_equal(chunk, a[2:4, 0:4])
    assert np.array_equal(x.compute(), a)
    if name not in ("bool", "bfloat16") and not name.startswith("float8"):
        assert x.sum().compute() == a.sum()


@pytest.mark.parametrize("name", ["float6_e2m3fn", "float4_e2m1fn", "int4"])
def test_dask_array_from_a_packed_tensor_reads_unpacked_copies(name):
    # docs/processes.md: ml_dtypes gives each element a byte, dlinterop packs them, so NumPy
    # (and dask.array through it) gets unpacked copies of the chunks.
    da = pytest.importorskip("dask.array")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    out = da.from_array(dl.full((4, 4), 1, name), chunks=(2, 4)).compute()
    assert out.dtype == np.dtype(getattr(ml_dtypes, name))
    assert out.astype(np.float64).tolist() == [[1.0] * 4] * 4


def test_views_of_a_source_with_negative_strides():
    # Regression: element 0 of such a view lies below the source's data pointer; the view
    # points at it (DLPack's byte_offset is unsigned).
    a = np.arange(24.0).reshape(4, 6)[::-1, ::-2]
    t = dl.from_dlpack(a)
    for key in [
        slice(1, None),
        (slice(1, 3), 0),
        (Ellipsis, slice(None, None, -1)),
        (slice(None), 1),
        (3, slice(2, None)),
    ]:
        _same_memory(t[key], a[key])


def test_an_empty_view_of_a_reversed_empty_view():
    # Regression (found by the property tests): the offset of an empty view is irrelevant
    # and must not be checked as if it addressed an element.
    t = dl.from_dlpack(np.zeros((2, 0), np.int8))
    assert t[1::-1, :][None, 1].shape == (1, 0)
