"""Interop with PyTorch (CPU), both directions: every dtype both sides know, every layout,
and torch's own constructors given a dl.Tensor.

Zero-copy is proven by pointer equality, values by comparing bytes. Where PyTorch cannot
represent a layout (negative strides), the test pins PyTorch's own failure and shows that
dlinterop was not the one to crash."""

import subprocess
import sys
import textwrap

import pytest

import dlinterop as dl

from buffer_cases import tensor_bytes
from torch_cases import (
    torch_bytes,
)

np = pytest.importorskip("numpy")


torch = pytest.importorskip("torch")


pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")


# dlinterop name -> torch dtype, for every DLPack type PyTorch has.
TORCH_DTYPES = {
    "bool": torch.bool,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "uint16": torch.uint16,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "complex32": torch.complex32,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
    "float8_e8m0fnu": torch.float8_e8m0fnu,
    "float4_e2m1fn_x2": torch.float4_e2m1fn_x2,
}


DTYPE_NAMES = list(TORCH_DTYPES)


def torch_source(name, shape=(2, 3)):
    """A contiguous torch tensor of that dtype holding varied bit patterns."""
    dtype = TORCH_DTYPES[name]
    if dtype is torch.bool:
        return torch.arange(6).reshape(shape) % 2 == 0
    count = 6 * dtype.itemsize
    raw = (torch.arange(count, dtype=torch.int64) * 37 % 251).to(torch.uint8)
    return raw.reshape(shape[0], -1).view(dtype)


# -- dtypes -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_torch_to_dl_every_dtype_zero_copy(name):
    x = torch_source(name)
    t = dl.from_dlpack(x)
    assert t.dtype == name
    assert t.shape == tuple(x.shape) and t.strides == x.stride()
    assert t.data_ptr == x.data_ptr()
    assert not t.readonly
    assert tensor_bytes(t) == torch_bytes(x)


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dl_to_torch_every_dtype_zero_copy(name):
    t = dl.full((2, 3), 1.0 if name != "bool" else True, dtype=name)
    y = torch.from_dlpack(t)
    assert y.dtype is TORCH_DTYPES[name]
    assert y.data_ptr() == t.data_ptr
    assert tuple(y.shape) == (2, 3) and y.stride() == (3, 1)
    if name == "float4_e2m1fn_x2":
        # PyTorch cannot fill this type; 1.0 is code 0b0010 in both nibbles of each byte.
        expected = bytes([0x22]) * 6
    else:
        expected = torch_bytes(torch.full((2, 3), 1.0, dtype=TORCH_DTYPES[name]))
    assert torch_bytes(y) == expected == tensor_bytes(t)


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_round_trip_torch_dl_torch_shares_memory(name):
    x = torch_source(name)
    y = torch.from_dlpack(dl.from_dlpack(x))
    assert y.dtype is x.dtype and y.data_ptr() == x.data_ptr()
    assert torch_bytes(y) == torch_bytes(x)


def test_torch_dtype_objects_are_accepted_by_dl_dtype():
    for name, dtype in TORCH_DTYPES.items():
        assert dl.dtype(dtype) == name


# -- layouts ----------------------------------------------------------------------------


def _torch_layouts():
    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    return {
        "0d": torch.tensor(3.5),
        "zero_size_(0,)": torch.empty(0),
        "zero_size_(3,0)": torch.empty(3, 0),
        "zero_size_(2,0,1)": torch.empty(2, 0, 1),
        "size1_odd_strides": torch.arange(6.0).as_strided((3, 1, 2), (2, 1000, 1)),
        "32_dims": torch.arange(4.0).reshape((2, 2) + (1,) * 30),
        "32_dims_strided": torch.arange(16.0).reshape((4, 4) + (1,) * 30)[::2, 1::2],
        "slice": base[:, ::2, 1:],
        "transpose": base.transpose(0, 2),
        "zero_strides": torch.arange(4.0).expand(3, 4),
        "storage_offset": base[1, 1:, 2:],
    }


TORCH_LAYOUTS = list(_torch_layouts())


@pytest.mark.parametrize("layout", TORCH_LAYOUTS)
def test_torch_to_dl_every_layout_zero_copy(layout):
    x = _torch_layouts()[layout]
    t = dl.from_dlpack(x)
    assert t.shape == tuple(x.shape)
    assert t.strides == x.stride()
    assert t.data_ptr == x.data_ptr()
    assert np.array_equal(np.from_dlpack(t), x.numpy())
    # ... and back: PyTorch sees the very same view.
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr() and y.stride() == x.stride()
    assert torch.equal(y, x)


def test_torch_storage_offset_is_applied():
    base = torch.arange(24, dtype=torch.float32)
    x = base[5:]
    assert x.storage_offset() == 5
    t = dl.from_dlpack(x)
    assert t.data_ptr == base.data_ptr() + 5 * 4
    assert np.from_dlpack(t)[0] == 5.0


# The layouts dlinterop can hand to PyTorch: built over dlinterop-owned memory through NumPy
# views (see conftest.dl_layout). Negative strides are in their own test below.
DL_LAYOUTS_TO_TORCH = [
    "0d",
    "zero_size_(0,)",
    "zero_size_(3,0)",
    "zero_size_(2,0,1)",
    "size1_odd_strides",
    "32_dims",
    "slice",
    "transpose",
    "zero_strides",
    "offset_view",
]


@pytest.mark.parametrize("layout", DL_LAYOUTS_TO_TORCH)
def test_dl_to_torch_every_layout_zero_copy(dl_layout, layout):
    t, view = dl_layout(layout)
    y = torch.from_dlpack(t)
    assert tuple(y.shape) == t.shape
    if t.size > 1:
        assert all(y.stride(i) == t.strides[i] for i in range(t.ndim) if t.shape[i] > 1)
    assert y.data_ptr() == t.data_ptr or t.size == 0
    assert np.array_equal(y.numpy(), view)
    # A write through PyTorch lands in dlinterop's memory.
    if t.size:
        first = (0,) * t.ndim
        y[first] = 100.0
        assert view[first] == 100.0 and np.from_dlpack(t)[first] == 100.0


def test_dl_byte_offset_is_honoured_by_torch():
    forge = pytest.importorskip("forge")
    f = forge.forge(shape=(2, 3), dtype=(2, 32, 1), byte_offset=8, versioned=True)
    np.frombuffer(f.data, dtype=np.float32)[2:8] = np.arange(6, dtype=np.float32)
    t = dl.from_dlpack(f.capsule)
    assert t.data_ptr == f.data_ptr + 8
    y = torch.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr
    assert torch.equal(y, torch.arange(6.0).reshape(2, 3))
    del y, t
    f.release()
    assert f.deleter_calls == 1


NEGATIVE_STRIDES_SCRIPT = textwrap.dedent("""
    import numpy as np, dlinterop as dl
    base = dl.empty(6, "float64")
    a = np.from_dlpack(base)
    a[:] = np.arange(6)
    t = dl.from_dlpack(a[::-1])
    print("dl", t.strides, np.from_dlpack(t).tolist(), dl.memory_stats()["live_exports"],
          flush=True)
    import torch
    y = torch.from_dlpack(t)
    print("torch imported", y.stride(), flush=True)
""")


def test_dl_negative_strides_abort_torch_not_dlinterop():
    """PyTorch 2.13 calls std::terminate on a DLPack tensor with negative strides
    ("Storage size calculation overflowed"): pinned in a subprocess. dlinterop itself
    imported and read the tensor before PyTorch was asked."""
    out = subprocess.run(
        [sys.executable, "-c", NEGATIVE_STRIDES_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert "dl (-1,) [5.0, 4.0, 3.0, 2.0, 1.0, 0.0] 1" in out.stdout, out.stderr
    if out.returncode == 0:
        pytest.fail(
            "PyTorch now imports negative strides: turn this into a zero-copy test "
            f"({out.stdout.strip()!r})"
        )
    assert out.returncode == -6, (out.returncode, out.stderr[-2000:])  # SIGABRT
    assert "Storage size calculation overflowed" in out.stderr
    assert "torch imported" not in out.stdout


def test_dl_negative_strides_stay_usable_in_process(dl_layout):
    t, view = dl_layout("negative_strides")
    assert min(t.strides) < 0
    assert np.array_equal(np.from_dlpack(t), view)
    # The way to PyTorch is an explicit copy, which is C-contiguous.
    y = torch.from_dlpack(t.copy())
    assert np.array_equal(y.numpy(), view)


# -- torch's own constructors given a dl.Tensor ------------------------------------------------


def test_torch_as_tensor_and_from_dlpack_take_a_tensor_whole():
    t = dl.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    for make in (torch.as_tensor, torch.from_dlpack):
        x = make(t)
        assert x.shape == (2, 3) and x.data_ptr() == t.data_ptr
        assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    b = dl.full((2,), 1.5, "bfloat16")
    assert torch.as_tensor(b).dtype == torch.bfloat16


@pytest.mark.xfail(
    strict=True,
    reason="torch.asarray reads the buffer protocol before "
    "__dlpack__ and reads the bytes as float32 in one dimension "
    "(pytorch/pytorch#188128, #188784, #197532; the workaround in "
    "docs/concepts.md: torch.from_dlpack, torch.as_tensor or dl.to_framework). "
    "Strict: a torch that fixes it makes this test fail, so that the page is "
    "updated.",
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_torch_asarray_reads_the_values(dtype):
    t = dl.tensor([[1, 2, 3], [4, 5, 6]], dtype=dtype)
    x = torch.asarray(t)
    got, expected = (
        (tuple(x.shape), x.dtype, x.tolist()),
        ((2, 3), getattr(torch, dtype), t.tolist()),
    )
    # An expected failure keeps its frame (pytest's sys.last_traceback) until the next
    # failure: no Tensor may stay in it, or a later test's leak check counts it.
    del t, x
    assert got == expected


def test_torch_asarray_reads_raw_bytes_as_float32_as_the_docs_say():
    # What docs/concepts.md describes, pinned: it is torch.frombuffer's reading.
    t = dl.tensor([1, 2], dtype="int64")
    x = torch.asarray(t)
    assert x.dtype == torch.float32 and x.shape == (4,)
    assert (
        x.tolist()
        == torch.frombuffer(bytearray(memoryview(t).cast("B")), dtype=torch.float32).tolist()
    )
    for good in (torch.from_dlpack(t), torch.as_tensor(t), dl.to_framework(t, like=torch)):
        assert good.dtype == torch.int64 and good.tolist() == [1, 2]


@pytest.mark.parametrize("like", ["torch", "module", "type", "tensor"])
def test_to_framework_copies_negative_strides_for_torch(like):
    # torch 2.13 aborts the interpreter on negative strides (pytorch/pytorch#188023).
    target = {"torch": "torch", "module": torch, "type": torch.Tensor, "tensor": torch.zeros(1)}[
        like
    ]
    t = dl.arange(12.0).reshape((3, 4))
    for view in (t[::-1], t[:, ::-2], t[::-1, ::-1].T):
        x = dl.to_framework(view, like=target)
        assert type(x) is torch.Tensor and x.tolist() == view.tolist()
        assert x.is_contiguous() and x.data_ptr() != view.data_ptr
        with pytest.raises(BufferError, match="negative strides"):
            dl.to_framework(view, like=target, copy=False)
    forward = t[::2]
    assert dl.to_framework(forward, like=target).data_ptr() == forward.data_ptr  # shared


def test_negative_strides_to_torch_never_abort():
    # A regression test in a child process: the abort (SIGABRT) would end this run.
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import numpy as np, torch, dlinterop as dl
        t = dl.from_dlpack(np.arange(6.0).reshape(2, 3)[:, ::-1])
        print(dl.to_framework(t, like=torch).tolist())
    """),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]"
