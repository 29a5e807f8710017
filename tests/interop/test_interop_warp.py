"""Interop with NVIDIA Warp on its CPU device, both directions: every dtype Warp exchanges,
vector types, slices and layouts, zero-size arrays, read-only memory, lifetimes, the way
out, and Warp's own refusals and deviations.

What Warp does (asked of Warp itself, docs/frameworks.md): `wp.array.__dlpack__` takes only
`stream` (max_version, dl_device and copy raise TypeError, so consumers fall back to the
legacy call) and exports legacy capsules, which import read-only by assumption; vector and
matrix dtypes export as extra trailing dimensions. `wp.from_dlpack` shares memory and
takes any strides, but reads DLPack's `data` and ignores `byte_offset`: a view whose data
pointer is its base plus an offset is read from the base (wrong values; with negative
strides, memory before the buffer). dlinterop's way out hands Warp a view with the offset
moved into its data pointer. Warp has no read-only arrays (the way out refuses read-only
tensors, as for PyTorch), refuses complex types with RuntimeError and 0-d tensors with an
IndexError from its own code.
"""

import gc
import subprocess
import sys

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
from peer_values import STANDARD, values_of  # noqa: E402

wp = pytest.importorskip("warp")

wp.config.log_level = wp.LOG_WARNING
wp.init()

WARP_DTYPES = [name for name in STANDARD if not name.startswith("complex")]


def warp_type(name):
    return wp.bool if name == "bool" else getattr(wp, name)


@pytest.mark.parametrize("name", WARP_DTYPES)
def test_a_warp_array_imports_without_copying(name):
    values = values_of(name)
    source = wp.array(values, dtype=warp_type(name), device="cpu")
    t = dl.from_dlpack(source)
    assert t.dtype == dl.dtype(name) and t.shape == (6,)
    assert t.data_ptr == source.ptr
    assert t.tolist() == values.tolist()
    assert t.readonly_reason == "legacy"  # Warp speaks legacy capsules only


@pytest.mark.parametrize("name", WARP_DTYPES)
def test_a_tensor_reaches_warp_sharing_memory(name):
    values = values_of(name)
    t = dl.asarray(values)
    out = dl.to_framework(t, like=wp)
    assert out.dtype == warp_type(name) and out.ptr == t.data_ptr
    assert out.numpy().tolist() == values.tolist()
    assert wp.from_dlpack(t).ptr == t.data_ptr


def test_warp_bfloat16_and_vector_types_export():
    if getattr(wp, "bfloat16", None) is None:
        pytest.skip("this Warp has no bfloat16")
    halves = wp.array(np.arange(4, dtype=np.float32), dtype=wp.float32, device="cpu")
    t = dl.from_dlpack(wp.array(halves.numpy(), dtype=wp.bfloat16, device="cpu"))
    assert t.dtype == dl.bfloat16 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    points = wp.array(np.arange(12, dtype=np.float32).reshape(4, 3), dtype=wp.vec3, device="cpu")
    v = dl.from_dlpack(points)
    assert v.shape == (4, 3) and v.dtype == dl.float32 and v.data_ptr == points.ptr


def test_warp_ignores_byte_offset_and_the_way_out_moves_it_into_the_pointer():
    t = dl.arange(6, dtype="float32")
    window = t[2:]
    # Warp's own import of a view with a byte_offset reads from the base pointer: the
    # wrong elements (pinned: a fixed Warp would read [2, 3, 4, 5] here).
    assert wp.from_dlpack(window).numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    out = dl.to_framework(window, like=wp)
    assert out.numpy().tolist() == [2.0, 3.0, 4.0, 5.0] and out.ptr == t.data_ptr + 8
    for view in (t[::-1], t[1::2], t.reshape((2, 3)).T[1:]):
        assert dl.from_dlpack(dl.to_framework(view, like="warp")).tolist() == view.tolist()


def test_warp_slices_and_zero_size_arrays_import():
    base = wp.array(np.arange(10, dtype=np.int32), device="cpu")
    assert dl.from_dlpack(base[2:7]).tolist() == [2, 3, 4, 5, 6]
    assert dl.from_dlpack(base[::3]).tolist() == [0, 3, 6, 9]
    grid = wp.array(np.arange(12, dtype=np.float64).reshape(3, 4), device="cpu")
    assert dl.from_dlpack(grid.transpose()).tolist() == np.arange(12.0).reshape(3, 4).T.tolist()
    assert dl.from_dlpack(wp.zeros((0, 3), dtype=wp.float32, device="cpu")).shape == (0, 3)
    assert dl.to_framework(dl.zeros((0, 2), "float32"), like=wp).shape == (0, 2)


def test_what_warp_refuses_is_its_own_error():
    with pytest.raises(RuntimeError, match="complex"):
        dl.to_framework(dl.zeros((2,), "complex64"), like=wp)
    with pytest.raises(IndexError):  # Warp 1.19 cannot import 0-d tensors
        wp.from_dlpack(dl.full((), 1.0, "float32"))
    with pytest.raises(TypeError, match="max_version"):
        wp.zeros(2, device="cpu").__dlpack__(max_version=(1, 3))


def test_read_only_tensors_are_refused_or_copied_for_warp():
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    t = dl.from_dlpack(frozen)
    with pytest.raises(BufferError, match="read-only"):
        dl.to_framework(t, like=wp)
    out = dl.to_framework(t, like=wp, copy=True)
    assert out.numpy().tolist() == [0.0, 1.0, 2.0] and out.ptr != t.data_ptr


def test_writes_are_shared_both_ways():
    t = dl.zeros((4,), "float32")
    out = dl.to_framework(t, like=wp)
    out.fill_(3.0)
    assert t.tolist() == [3.0] * 4


def test_lifetimes_either_side_dropped_first():
    source = wp.array(np.arange(1000, dtype=np.float32), device="cpu")
    t = dl.from_dlpack(source)
    del source
    gc.collect()
    assert t.tolist() == list(map(float, range(1000)))
    tensor = dl.arange(1000, dtype="int64")
    out = dl.to_framework(tensor, like=wp)
    del tensor
    gc.collect()
    assert out.numpy().tolist() == list(range(1000))


def test_warp_publishes_no_exchange_table():
    assert not hasattr(wp.array, "__dlpack_c_exchange_api__")
    assert not hasattr(wp.array, "__c_dlpack_exchange_api__")


def test_the_way_out_starts_warps_runtime_in_a_fresh_process():
    """wp.from_dlpack needs Warp's runtime, which nothing has started in a fresh process:
    the way out starts it, as Warp's own wp.array and wp.from_numpy do."""
    code = (
        "import dlinterop as dl\n"
        "a = dl.to_framework(dl.arange(3, dtype='float32'), like='warp')\n"
        "print(type(a).__module__.partition('.')[0], a.numpy().tolist())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "warp [0.0, 1.0, 2.0]"
