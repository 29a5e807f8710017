"""Tests of the example downstream package: it must be built and installed first
(pip install --no-build-isolation ./examples/downstream)."""

import gc
import sys
import warnings

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _capi

with warnings.catch_warnings():
    # Built against a dlinterop whose Tensor layout differs, Cython only warns: fail instead.
    warnings.simplefilter("error", RuntimeWarning)
    import dlinterop_downstream as ds


def test_arange_values_and_layout():
    t = ds.arange(5)
    assert isinstance(t, dl.Tensor)
    assert t.shape == (5,) and t.strides == (1,) and t.dtype == dl.float32
    assert not t.readonly
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(5, dtype=np.float32))


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_arange_block_freed_exactly_once(n):
    before = ds.live_blocks()
    t = ds.arange(n)
    assert ds.live_blocks() == before + 1
    view = np.from_dlpack(t)  # NumPy's view keeps the Tensor, and so the block, alive
    del t
    gc.collect()
    assert ds.live_blocks() == before + 1
    del view
    gc.collect()
    assert ds.live_blocks() == before


def test_arange_rejects_negative_length():
    with pytest.raises(ValueError, match="non-negative"):
        ds.arange(-1)


@pytest.mark.parametrize("versioned,name", [(True, "dltensor_versioned"), (False, "dltensor")])
def test_arange_capsule(versioned, name):
    before = ds.live_blocks()
    capsule = ds.arange_capsule(4, versioned)
    assert f'"{name}"' in repr(capsule)
    t = dl.from_dlpack(capsule)
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(4, dtype=np.float32))
    del capsule, t
    gc.collect()
    assert ds.live_blocks() == before


def test_unconsumed_capsule_frees_its_block():
    before = ds.live_blocks()
    capsule = ds.arange_capsule(3)
    assert sys.getrefcount(capsule) == 2
    del capsule
    gc.collect()
    assert ds.live_blocks() == before


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 1, 4, 3, 2)])
def test_ones(shape):
    t = ds.ones(shape)
    assert t.shape == shape and t.dtype == dl.float32
    assert t.data_ptr % 256 == 0
    np.testing.assert_array_equal(np.from_dlpack(t), np.ones(shape, np.float32))


def test_describe_reads_the_dltensor():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[1:, ::2]
    info = ds.describe(a)
    assert info["ndim"] == 2
    assert info["shape"] == a.shape
    assert info["strides"] == tuple(s // a.itemsize for s in a.strides)
    assert info["data_ptr"] == a.ctypes.data
    assert info["dtype"] == (2, 32, 1)
    assert info["device"] == (1, 0)


def _layouts():
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) - 50
    return {
        "0-d": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((3, 0), np.float32),
        "contiguous": base,
        "sliced": base[:, 1:, ::2, 1:4],
        "transposed": base.transpose(3, 1, 0, 2),
        "negative": base[::-1, :, ::-2],
        "broadcast": np.broadcast_to(np.float32(0.25), (7, 9)),
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_sum_float32_any_strides(name):
    a = _layouts()[name]
    assert ds.sum_float32(a) == pytest.approx(float(a.sum(dtype=np.float64)))


def test_sum_float32_of_dlinterop_tensor_and_capsule():
    assert ds.sum_float32(ds.ones((3, 4))) == 12.0
    assert ds.sum_float32(ds.arange_capsule(5)) == 10.0


def test_sum_float32_rejects_other_dtypes():
    with pytest.raises(TypeError, match="float32"):
        ds.sum_float32(np.arange(3.0))


# -- the way out: kernels that return the caller's type ----------------------------------


def test_kernel_returns_a_numpy_array_for_a_numpy_array():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = ds.scaled(a, 2.0)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, a * 2)
    z = ds.zeros_as(a, (3,))
    assert type(z) is np.ndarray and z.shape == (3,) and not z.any()


def test_kernel_returns_a_torch_tensor_for_a_torch_tensor():
    torch = pytest.importorskip("torch")
    x = torch.arange(6.0).reshape(2, 3)
    out = ds.scaled(x, 2.0)
    assert type(out) is torch.Tensor and torch.equal(out, x * 2)
    # to_framework shares memory: the output dl.Tensor's pointer is the torch tensor's.
    t = dl.empty_like(x)
    y = dl.to_framework(t, like=x)
    assert y.data_ptr() == t.data_ptr
    assert ds.fill_(x, 3.0) is x and bool((x == 3.0).all())


def test_kernel_returns_each_frameworks_own_type():
    # What each framework's user gets back from a kernel that returns "the caller's type":
    # an Arrow array, an MLX array, a Warp array, a cuda.core StridedMemoryView.
    values = [0.0, 1.0, 2.0, 3.0]
    doubled = [2 * v for v in values]
    makers = []
    pa = _optional("pyarrow")
    if pa is not None:
        makers.append((lambda: pa.array(values, pa.float32()), lambda o: o.to_pylist()))
    mx = _optional("mlx.core")
    if mx is not None:
        makers.append((lambda: mx.array(values, dtype=mx.float32), lambda o: o.tolist()))
    wp = _optional("warp")
    if wp is not None:
        wp.config.log_level = wp.LOG_WARNING
        wp.init()
        makers.append(
            (lambda: wp.array(values, dtype=wp.float32, device="cpu"), lambda o: o.numpy().tolist())
        )
    utils = _optional("cuda.core.utils")
    if utils is not None:
        makers.append(
            (
                lambda: utils.StridedMemoryView.from_dlpack(
                    np.array(values, np.float32), stream_ptr=-1
                ),
                lambda o: dl.from_dlpack(o).tolist(),
            )
        )
    if not makers:
        pytest.skip("none of pyarrow, MLX, Warp, cuda.core is installed")
    for make, values_of in makers:
        x = make()
        out = ds.scaled(x, 2.0)
        assert type(out) is type(x) and values_of(out) == doubled


def _optional(name):
    try:
        return __import__("importlib").import_module(name)
    except ImportError:
        return None


def test_identity_kernel_shares_nothing_with_its_input():
    a = np.ones(4, np.float32)
    out = ds.identity(a)
    assert type(out) is np.ndarray and out.shape == a.shape
    assert out.ctypes.data != a.ctypes.data


def test_read_only_input_is_never_written():
    ro = np.ones(5, np.float32)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="x: expected writable memory"):
        ds.fill_(ro, 7.0)
    np.testing.assert_array_equal(ro, np.ones(5, np.float32))
    out = ds.scaled(ro, 4.0)
    assert out.flags.writeable
    np.testing.assert_array_equal(out, np.full(5, 4.0, np.float32))
    np.testing.assert_array_equal(ro, np.ones(5, np.float32))


def test_kernel_argument_errors_name_the_argument():
    with pytest.raises(TypeError, match="x: expected dtype float32, got int64"):
        ds.scaled(np.arange(3), 1.0)
    with pytest.raises(ValueError, match="x: expected a C-contiguous tensor"):
        ds.scaled(np.ones((4, 4), np.float32).T[1:], 1.0)


# -- dot: any producer through its exchange table, on table 1.1 only ------------------------

TABLE_1_1 = _capi.abi_version()[1] >= 1  # dlinterop 0.2.0 on


@pytest.mark.skipif(not TABLE_1_1, reason="the installed dlinterop has C ABI table 1.0")
def test_dot_reads_numpy_and_dlinterop_through_their_tables():
    x = np.arange(5, dtype=np.float32)
    y = np.arange(10, dtype=np.float32)[::-2]  # strided, negative
    expected = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
    assert ds.dot(x, y) == expected
    assert ds.dot(dl.from_dlpack(x), y) == expected


@pytest.mark.skipif(not TABLE_1_1, reason="the installed dlinterop has C ABI table 1.0")
def test_dot_reads_torch_through_the_generic_table():
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32)
    assert ds.dot(x, np.ones(4, np.float32)) == 6.0


@pytest.mark.skipif(not TABLE_1_1, reason="the installed dlinterop has C ABI table 1.0")
def test_dot_refuses_what_it_cannot_take():
    with pytest.raises(TypeError, match="int objects have no __dlpack__"):
        ds.dot(3, np.ones(2, np.float32))
    with pytest.raises(TypeError, match="dot: y must be float32"):
        ds.dot(np.ones(2, np.float32), np.ones(2))
    with pytest.raises(ValueError, match="dot: x has 2 elements, y 3"):
        ds.dot(np.ones(2, np.float32), np.ones(3, np.float32))


@pytest.mark.skipif(TABLE_1_1, reason="the installed dlinterop has C ABI table 1.1")
def test_dot_needs_table_1_1():
    with pytest.raises(NotImplementedError, match="dlinterop 0.2.0 or newer"):
        ds.dot(np.ones(2, np.float32), np.ones(2, np.float32))
