"""Interop with NVIDIA's cuda.core (`cuda.core.utils.StridedMemoryView`), which needs no GPU
or driver for CPU memory: every dtype it takes, layouts, 0-d and zero-size views, read-only
memory, lifetimes, the DLPack C exchange table its type publishes, the way out, and its own
refusals.

What cuda.core does (asked of it, docs/frameworks.md): `StridedMemoryView.from_dlpack(obj,
stream_ptr)` views any producer's memory (stream_ptr=-1: no stream ordering; None is refused
as ambiguous) and keeps DLPack's READ_ONLY flag as `readonly`; its strides count elements.
The view is a producer too, and its type publishes the C exchange table
(`__dlpack_c_exchange_api__`), through which dlinterop hands tensors back without a Python
call. It refuses copy= and dl_device= on export with BufferError ("Sorry, not supported"),
float8 and packed sub-byte types with TypeError when the view's dtype is asked for.
"""

import gc

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
from peer_values import STANDARD, values_of  # noqa: E402

utils = pytest.importorskip("cuda.core.utils")
StridedMemoryView = utils.StridedMemoryView

SMV_DTYPES = STANDARD  # every standard DLPack type


def view_of(obj):
    return StridedMemoryView.from_dlpack(obj, stream_ptr=-1)


@pytest.mark.parametrize("name", SMV_DTYPES)
def test_a_tensor_viewed_by_cuda_core_and_back(name):
    values = values_of(name)
    t = dl.asarray(values)
    view = view_of(t)
    assert view.ptr == t.data_ptr and view.shape == (6,) and view.strides == (1,)
    assert view.dtype == values.dtype and not view.readonly
    assert not view.is_device_accessible and view.device_id == -1
    back = dl.from_dlpack(view)
    assert back.data_ptr == t.data_ptr and back.tolist() == values.tolist()


def test_layouts_zero_d_and_zero_size():
    grid = dl.arange(12, dtype="float32").reshape((3, 4))
    for v in (grid.T, grid[::-1], grid[:, ::2], grid[1:]):
        view = view_of(v)
        assert view.strides == v.strides and view.shape == v.shape
        assert dl.from_dlpack(view).tolist() == v.tolist()
    scalar = view_of(dl.full((), 2.0, "float64"))
    assert scalar.shape == () and scalar.strides is None
    assert dl.from_dlpack(scalar).tolist() == 2.0
    assert dl.from_dlpack(view_of(dl.zeros((0, 3), "int32"))).shape == (0, 3)


def test_read_only_is_kept_both_ways():
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    t = dl.from_dlpack(frozen)
    view = view_of(t)
    assert view.readonly
    assert dl.from_dlpack(view).readonly_reason == "flag"
    # and the way out through its exchange table keeps it too (not refused, as for torch)
    assert dl.to_framework(t, like=StridedMemoryView).readonly


def test_its_type_publishes_the_exchange_table_and_the_way_out_uses_it():
    capsule = StridedMemoryView.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    t = dl.arange(4, dtype="float32")
    through_table = dl.to_framework(t, like=StridedMemoryView)
    # made by the table's managed_tensor_to_py_object_no_sync from a managed tensor (its
    # exporting object is that tensor's capsule), not by from_dlpack(t)
    assert type(through_table.exporting_obj).__name__ == "PyCapsule"
    assert through_table.ptr == t.data_ptr
    for like in ("cuda.core", view_of(t)):
        out = dl.to_framework(t, like=like)
        assert isinstance(out, StridedMemoryView) and out.ptr == t.data_ptr
    assert view_of(t).exporting_obj is t


def test_outputs_like_a_view_come_from_dlinterops_allocator():
    # The view's table has an allocator that only raises NotImplementedError (a view owns
    # no memory): empty_like and zeros_like fall back to dlinterop's.
    view = view_of(np.ones((2, 3), np.float32))
    out = dl.zeros_like(view)
    assert isinstance(out, dl.Tensor) and out.shape == (2, 3) and out.dtype == dl.float32
    assert out.tolist() == [[0.0] * 3] * 2
    handed_back = dl.to_framework(out, like=view)
    assert isinstance(handed_back, StridedMemoryView) and handed_back.ptr == out.data_ptr


@pytest.mark.parametrize("name, error", [("float8_e4m3fn", "dtype"), ("int4", "int4")])
def test_types_cuda_core_refuses_are_its_own_type_errors(name, error):
    view = view_of(dl.zeros((4,), name))  # made; its dtype is worked out when asked
    with pytest.raises(TypeError, match=error):
        view.dtype


def test_what_its_export_refuses():
    view = view_of(dl.arange(3, dtype="float32"))
    with pytest.raises(BufferError, match="copy=True"):
        dl.from_dlpack(view, copy=True)
    with pytest.raises(BufferError, match="stream=None is ambiguous"):
        StridedMemoryView.from_dlpack(dl.arange(3, dtype="float32"), stream_ptr=None)


def test_lifetimes_either_side_dropped_first():
    t = dl.arange(1000, dtype="int64")
    view = view_of(t)
    del t
    gc.collect()
    back = dl.from_dlpack(view)
    del view
    gc.collect()
    assert back.tolist() == list(range(1000))
