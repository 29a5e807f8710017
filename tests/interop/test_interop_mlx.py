"""Interop with MLX (its CPU backend, `mlx` with `mlx-cpu` on Linux), both directions: every
dtype MLX has, slices and layouts, lazy arrays, zero-size and 0-d arrays, lifetimes, the way
out, and MLX's own refusals.

What MLX does (asked of MLX itself, docs/frameworks.md): its arrays export legacy
"dltensor" capsules only, whatever max_version asks (so they import read-only by
assumption, readonly_reason "legacy"), with slices as a byte_offset from the base pointer;
an unevaluated array is evaluated on export. `mx.from_dlpack` copies every CPU import
(copy=False raises), never passes max_version, leaves the capsule unrenamed, refuses
negative strides with ValueError, and narrows float64 to float32 and complex128 to
complex64 without a word; dlinterop's way out hands tensors to MLX with their own dtype
(mx.array(t, dtype=...)) and refuses the dtypes MLX lacks.
"""

import gc

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
from peer_values import STANDARD, values_of  # noqa: E402

mx = pytest.importorskip("mlx.core")

# Every DLPack type MLX arrays hold (mx.bool_ is DLPack's bool).
MLX_DTYPES = [name for name in STANDARD if name != "complex128"] + ["bfloat16"]


def mlx_dtype(name):
    return getattr(mx, "bool_" if name == "bool" else name)


@pytest.mark.parametrize("name", MLX_DTYPES)
def test_an_mlx_array_imports_with_its_values(name):
    values = values_of(name)
    source = mx.array(values).astype(mlx_dtype(name))
    t = dl.from_dlpack(source)
    assert t.dtype == dl.dtype(name) and t.shape == (6,)
    assert t.tolist() == values.tolist()
    # legacy capsules only: read-only by assumption, as DLPack asks of a consumer
    assert t.readonly_reason == "legacy"


@pytest.mark.parametrize("name", MLX_DTYPES)
def test_a_tensor_reaches_mlx_with_its_dtype_and_values(name):
    values = values_of(name)
    t = dl.tensor(values.tolist(), name)
    out = dl.to_framework(t, like=mx)
    assert out.dtype == mlx_dtype(name)
    assert dl.from_dlpack(out).tolist() == t.tolist()


def test_mlx_from_dlpack_narrows_what_the_way_out_keeps():
    t = dl.asarray(np.array([0.1, 1e300, 1 / 3]))
    assert mx.from_dlpack(t).dtype == mx.float32  # MLX's own import: narrowed, 1e300 lost
    kept = dl.to_framework(t, like="mlx")
    assert kept.dtype == mx.float64 and dl.from_dlpack(kept).tolist() == t.tolist()
    wide = dl.asarray(np.array([1 / 3 + 1j]))
    assert mx.from_dlpack(wide).dtype == mx.complex64
    with pytest.raises(BufferError, match="MLX has no complex128"):
        dl.to_framework(wide, like=mx)
    with pytest.raises(BufferError, match="MLX has no float8_e4m3fn"):
        dl.to_framework(dl.zeros((2,), "float8_e4m3fn"), like=mx)


def test_mlx_slices_import_through_their_byte_offset():
    base = mx.arange(10)
    assert dl.from_dlpack(base[2:]).tolist() == list(range(2, 10))
    assert dl.from_dlpack(base[1::3]).tolist() == [1, 4, 7]
    assert dl.from_dlpack(base[::-1]).tolist() == list(range(9, -1, -1))
    grid = mx.arange(12).reshape(3, 4)
    assert dl.from_dlpack(grid.T).tolist() == np.arange(12).reshape(3, 4).T.tolist()
    assert dl.from_dlpack(mx.broadcast_to(mx.array([5]), (3,))).tolist() == [5, 5, 5]


def test_lazy_zero_size_and_zero_d_arrays():
    assert dl.from_dlpack(mx.arange(4) + 1).tolist() == [1, 2, 3, 4]  # evaluated on export
    assert dl.from_dlpack(mx.zeros((0, 3))).shape == (0, 3)
    assert dl.from_dlpack(mx.array(3.5)).tolist() == 3.5
    assert dl.to_framework(dl.zeros((0, 2), "float32"), like=mx).shape == (0, 2)
    assert dl.to_framework(dl.full((), 2.5, "float32"), like=mx).item() == 2.5


def test_mlx_copies_every_import_and_refuses_copy_false():
    t = dl.arange(4, dtype="float32")
    out = mx.from_dlpack(t)
    np.from_dlpack(t)[0] = 42  # not seen by MLX's copy
    assert out.tolist()[0] == 0
    with pytest.raises(ValueError, match="without a copy"):
        mx.from_dlpack(t, copy=False)
    with pytest.raises(dl.CopyError, match="copies whatever it imports"):
        dl.to_framework(t, like=mx, copy=False)


def test_negative_strides_mlx_refuses_and_the_way_out_copies():
    reversed_view = dl.arange(5, dtype="int32")[::-1]
    with pytest.raises(ValueError, match="negative strides"):
        mx.from_dlpack(reversed_view)
    assert dl.to_framework(reversed_view, like=mx).tolist() == [4, 3, 2, 1, 0]


def test_read_only_tensors_reach_mlx_as_its_copy():
    frozen = np.arange(3.0, dtype=np.float32)
    frozen.flags.writeable = False
    out = dl.to_framework(dl.from_dlpack(frozen), like=mx)
    assert out.tolist() == [0.0, 1.0, 2.0]


def test_lifetimes_either_side_dropped_first():
    source = mx.array(np.arange(1000, dtype=np.float32))
    t = dl.from_dlpack(source)
    del source
    gc.collect()
    assert t.tolist() == list(map(float, range(1000)))
    tensor = dl.arange(1000, dtype="int64")
    out = dl.to_framework(tensor, like=mx)
    del tensor
    gc.collect()
    assert out.tolist() == list(range(1000))


def test_mlx_publishes_no_exchange_table():
    assert not hasattr(mx.array, "__dlpack_c_exchange_api__")
    assert not hasattr(mx.array, "__c_dlpack_exchange_api__")
