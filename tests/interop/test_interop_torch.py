"""Interop with PyTorch (CPU), both directions: every dtype both sides know, every layout,
the capsule functions of torch.utils.dlpack, lifetimes and read-only memory.

Zero-copy is proven by pointer equality, values by comparing bytes. Where PyTorch cannot
represent a layout (negative strides), the test pins PyTorch's own failure and shows that
dlinterop was not the one to crash.
"""

import pickle
import subprocess
import sys
import textwrap
import warnings

import pytest

import dlinterop as dl
import dlinterop.frameworks as fw

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.dlpack")

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


def tensor_bytes(t):
    """The bytes of a dl.Tensor in C order, through its pickle buffer: works for every
    dtype, including those NumPy and the buffer protocol cannot express."""
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    with buffers[0].raw() as raw:
        return raw.tobytes()


def torch_bytes(x):
    """The bytes of a C-contiguous torch tensor, whatever its dtype."""
    assert x.is_contiguous()
    return x.view(torch.uint8).numpy().tobytes() if x.numel() else b""


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


# -- capsules ---------------------------------------------------------------------------


def _capsule_name(capsule):
    import ctypes

    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi)
    )
    return get_name(capsule).decode()


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
def test_torch_legacy_capsule_into_dl_is_read_only_and_consumed_once():
    x = torch.arange(6.0)
    capsule = tud.to_dlpack(x)
    assert _capsule_name(capsule) == "dltensor"
    t = dl.from_dlpack(capsule)
    assert _capsule_name(capsule) == "used_dltensor"
    assert t.data_ptr == x.data_ptr()
    assert t.readonly  # a legacy capsule cannot say the memory is writable
    assert np.array_equal(np.from_dlpack(t), x.numpy())
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(capsule)


def test_torch_versioned_capsule_into_dl_is_writable():
    x = torch.arange(6.0)
    capsule = x.__dlpack__(max_version=(1, 3))
    assert _capsule_name(capsule) == "dltensor_versioned"
    t = dl.from_dlpack(capsule)
    assert _capsule_name(capsule) == "used_dltensor_versioned"
    assert t.data_ptr == x.data_ptr() and not t.readonly
    np.from_dlpack(t)[0] = 42.0
    assert x[0] == 42.0


@pytest.mark.parametrize("versioned", [False, True], ids=["dltensor", "dltensor_versioned"])
@pytest.mark.parametrize("consumer", ["torch.utils.dlpack.from_dlpack", "torch.from_dlpack"])
def test_dl_capsule_into_torch(live_counters, versioned, consumer):
    before = live_counters()
    t = dl.full((2, 3), 7.0, dtype="float32")
    capsule = dl.to_dlpack(t, versioned=versioned)
    y = (tud.from_dlpack if consumer.startswith("torch.utils") else torch.from_dlpack)(capsule)
    assert _capsule_name(capsule) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert y.data_ptr() == t.data_ptr
    assert torch.equal(y, torch.full((2, 3), 7.0))
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del y  # torch calls the deleter
    assert live_counters()["live_exports"] == before["live_exports"]


def test_torch_refuses_a_consumed_dl_capsule():
    t = dl.zeros(3)
    capsule = dl.to_dlpack(t)
    y = tud.from_dlpack(capsule)
    with pytest.raises(RuntimeError):
        tud.from_dlpack(capsule)
    del y


@pytest.mark.parametrize("versioned", [False, True], ids=["dltensor", "dltensor_versioned"])
def test_unconsumed_capsules_release_everything(live_counters, versioned):
    before = live_counters()
    t = dl.zeros((4, 4))
    capsule = dl.to_dlpack(t, versioned=versioned)
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del capsule
    assert live_counters()["live_exports"] == before["live_exports"]
    # torch's own capsules, never consumed, die with torch's deleter (no crash, nothing of
    # dlinterop's involved).
    x = torch.arange(4.0)
    torch_capsule = x.__dlpack__(max_version=(1, 3) if versioned else None)
    del torch_capsule, x


# -- lifetimes --------------------------------------------------------------------------


def test_torch_producer_deleted_before_dl_consumer():
    x = torch.arange(1000, dtype=torch.float64)
    t = dl.from_dlpack(x)
    del x
    torch.zeros(1000, dtype=torch.float64)  # would reuse freed memory
    assert np.array_equal(np.from_dlpack(t), np.arange(1000.0))


def test_dl_consumer_deleted_before_torch_producer():
    x = torch.arange(10.0)
    t = dl.from_dlpack(x)
    del t
    assert torch.equal(x, torch.arange(10.0))
    x.mul_(2)


def test_dl_producer_deleted_before_torch_consumer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = torch.from_dlpack(t)
    del t
    # PyTorch's reference keeps dlinterop's buffer alive.
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    assert torch.equal(y, torch.full((100,), 3.0, dtype=torch.float64))
    del y
    assert live_counters() == before


def test_torch_consumer_deleted_before_dl_producer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = torch.from_dlpack(t)
    del y
    assert live_counters()["live_exports"] == before["live_exports"]
    assert np.array_equal(np.from_dlpack(t), np.full(100, 3.0))


# -- read-only --------------------------------------------------------------------------


def _read_only_dl_tensor():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    return t, a


def test_torch_ignores_read_only_flag():
    """PyTorch has no read-only tensors: it accepts a versioned capsule with READ_ONLY and
    shares the memory writable, silently. Pinned (a PyTorch limitation); dlinterop did its
    part by setting the flag."""
    t, a = _read_only_dl_tensor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = torch.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr
    y[0] = 42.0
    assert a[0] == 42.0


def test_read_only_tensor_cannot_travel_as_a_legacy_capsule_to_torch():
    t, _ = _read_only_dl_tensor()
    with pytest.raises(BufferError, match="read-only"):
        dl.to_dlpack(t)
    y = tud.from_dlpack(dl.to_dlpack(t, versioned=True))
    assert y.data_ptr() == t.data_ptr


# -- regressions and known gaps ---------------------------------------------------------


# PyTorch hands out lazily conjugated and negated views with their stored values (through
# its exchange table, and for negated views its __dlpack__ too). Each maker returns such a
# view, or a look-alike without the bits that must be shared as usual.
def _complex(torch, dtype=None):
    return torch.tensor(
        [[1 + 2j, 3 - 4j, -5 + 6j], [7 + 0j, 0 - 8j, 9 + 9j]], dtype=dtype or torch.complex64
    )


def _under_inference_mode(torch):
    with torch.inference_mode():
        return torch._neg_view(torch.arange(6.0))


BIT_VIEWS = {
    "conj": lambda torch: _complex(torch).conj(),
    "conj complex128": lambda torch: _complex(torch, torch.complex128).conj(),
    "conj transposed": lambda torch: _complex(torch).conj().T,
    "conj sliced": lambda torch: _complex(torch).conj()[:, 1:],
    "conj 0-d": lambda torch: _complex(torch)[0, 0].conj(),
    "conj zero-size": lambda torch: _complex(torch)[:0].conj(),
    "imag of conj": lambda torch: _complex(torch).conj().imag,
    "neg view float32": lambda torch: torch._neg_view(torch.arange(6.0)),
    "neg view int64": lambda torch: torch._neg_view(torch.arange(6)),
    "neg view detached": lambda torch: torch._neg_view(torch.arange(6.0)).detach(),
    "neg view requiring grad": lambda torch: torch._neg_view(torch.arange(6.0, requires_grad=True)),
    "neg view in inference mode": _under_inference_mode,
}
PLAIN_VIEWS = {
    "resolved conj": lambda torch: _complex(torch).conj().resolve_conj(),
    "conj of conj": lambda torch: _complex(torch).conj().conj(),
    "real of conj": lambda torch: _complex(torch).conj().real,
    "conj of a real tensor": lambda torch: torch.arange(6.0).conj(),
    "resolved neg": lambda torch: torch._neg_view(torch.arange(6.0)).resolve_neg(),
    "plain": lambda torch: torch.arange(6.0).reshape(2, 3).T,
}
# Every import that shares memory: through torch's exchange table (default) or its
# __dlpack__ (the keyword paths).
IMPORT_PATHS = {
    "default": dl.from_dlpack,
    "copy=False": lambda x: dl.from_dlpack(x, copy=False),
    "device=cpu": lambda x: dl.from_dlpack(x, device="cpu"),
    "stream=-1": lambda x: dl.from_dlpack(x, stream=-1),
    "asarray": dl.asarray,
}


class TorchSubclass(torch.Tensor):
    """A subclass: dlinterop asks its is_neg/is_conj methods instead of reading the bits."""


# torch.Tensor and torch.nn.Parameter have their bits read natively, other subclasses not.
@pytest.fixture(params=["torch.Tensor", "Parameter", "subclass"])
def as_type(request):
    if request.param == "torch.Tensor":
        return lambda x: x
    if request.param == "Parameter":
        return lambda x: x.as_subclass(torch.nn.Parameter)
    return lambda x: x.as_subclass(TorchSubclass)


@pytest.mark.parametrize("path", IMPORT_PATHS)
@pytest.mark.parametrize("make", BIT_VIEWS.values(), ids=BIT_VIEWS.keys())
def test_torch_conjugated_and_negated_views_are_refused(make, path, as_type):
    # Regression: through torch's exchange table these came back with the stored values,
    # and negated views did through copy=False and device="cpu" too.
    x = as_type(make(torch))
    assert x.is_neg() or x.is_conj()
    bit = "conjugate" if x.is_conj() else "negative"
    # A view that also requires grad is refused for that first, as PyTorch's export does.
    problem = "requires grad" if x.requires_grad else f"the {bit} bit set cannot be shared"
    with pytest.raises(BufferError, match=problem):
        IMPORT_PATHS[path](x)
    # Resolving the view is the way out, and it is then shared.
    resolved = x.detach().resolve_conj().resolve_neg()
    t = IMPORT_PATHS[path](resolved)
    assert t.data_ptr == resolved.data_ptr()
    assert tensor_bytes(t) == torch_bytes(resolved.contiguous().reshape(-1))


class LegacyDlpack(torch.Tensor):
    """A producer whose __dlpack__ predates DLPack 1.0's keywords: it cannot be asked for a
    copy, so dlinterop copies what it shares."""

    __dlpack_c_exchange_api__ = None

    def __dlpack__(self, stream=None):
        return torch.Tensor.__dlpack__(self.as_subclass(torch.Tensor))


@pytest.mark.parametrize("make", BIT_VIEWS.values(), ids=BIT_VIEWS.keys())
@pytest.mark.parametrize(
    "as_type",
    [lambda x: x, lambda x: x.as_subclass(LegacyDlpack)],
    ids=["torch.Tensor", "legacy __dlpack__"],
)
def test_torch_copy_of_a_view_with_a_bit_holds_the_values_it_means(make, as_type):
    x = as_type(make(torch))
    expected = x.detach().resolve_conj().resolve_neg().contiguous()
    if x.requires_grad:
        with pytest.raises(BufferError, match="requires grad"):  # as PyTorch's export
            dl.from_dlpack(x, copy=True)
        return
    t = dl.from_dlpack(x, copy=True)
    assert t.data_ptr != x.data_ptr() or x.numel() == 0
    assert tensor_bytes(t) == torch_bytes(expected.reshape(-1))


@pytest.mark.parametrize("path", IMPORT_PATHS)
@pytest.mark.parametrize("make", PLAIN_VIEWS.values(), ids=PLAIN_VIEWS.keys())
def test_torch_views_without_the_bits_are_shared(make, path, as_type):
    x = as_type(make(torch))
    assert not (x.is_neg() or x.is_conj())
    t = IMPORT_PATHS[path](x)
    assert t.data_ptr == x.data_ptr()
    assert t.shape == tuple(x.shape)
    assert tensor_bytes(t) == torch_bytes(x.contiguous().reshape(-1))


def _word_at(obj, offset):
    import ctypes

    return ctypes.c_size_t.from_address(id(obj) + offset).value


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="checked on Linux only (elsewhere the fallback may be in use)",
)
def test_torch_bits_are_read_natively_for_plain_tensors():
    """On this PyTorch the bits of torch.Tensor objects are read through libtorch's
    at::native::is_neg/is_conj, not by calling the Python methods on every import."""
    from dlinterop import _core

    dl.from_dlpack(torch.ones(2))
    offset = _core._torch_native_bits()
    assert offset >= 16  # past the object header, where the object holds its at::Tensor
    x = torch.ones(2)
    assert _word_at(x, offset) == x._cdata
    assert _core._torch_native_bits(torch.Tensor)
    assert _core._torch_native_bits(torch.nn.Parameter)
    assert not _core._torch_native_bits(TorchSubclass)  # it may have __torch_function__


# Prepended to the subprocess tests below.
REFUSED = """
import torch, dlinterop as dl
from dlinterop import _core

def refused(view):
    try:
        dl.from_dlpack(view)
    except BufferError as e:
        return "bit set cannot be shared" in str(e)
    return False
"""


def run_ok(code):
    """Runs REFUSED + code in a fresh interpreter, which must print ok."""
    out = subprocess.run(
        [sys.executable, "-c", REFUSED + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_torch_bits_fall_back_to_python_methods_when_the_layout_is_unknown():
    """If the at::Tensor cannot be found in the object, the Python methods are asked, and
    refusals and imports still work."""
    run_ok("""
        torch.Tensor._cdata = property(lambda self: 1)   # matches no word of the object
        x = torch.arange(6.0)
        assert dl.from_dlpack(x).data_ptr == x.data_ptr()
        assert _core._torch_native_bits() == -1, _core._torch_native_bits()
        assert not _core._torch_native_bits(torch.Tensor)
        assert refused(torch._neg_view(x))
        assert refused(x.to(torch.complex64).conj())
        print("ok")
    """)


def test_torch_bit_reader_set_up_under_a_mode_is_tried_again():
    """The first PyTorch import of the process runs under a mode that turns the set-up's
    probe tensors into another type; the set-up is tried again after it, not given up."""
    run_ok("""
        from torch._subclasses.fake_tensor import FakeTensorMode
        x = torch._neg_view(torch.arange(6.0))
        with FakeTensorMode():
            assert refused(x)
        assert _core._torch_native_bits() == -2, _core._torch_native_bits()
        assert refused(x)
        assert _core._torch_native_bits() >= 16, _core._torch_native_bits()
        assert _core._torch_native_bits(torch.Tensor)
        print("ok")
    """)


# -- tensors DLPack cannot describe ------------------------------------------------------


def _undescribable():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized and sparse CSR creation warn
        return {
            "quantized": (torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8), "QInt"),
            "sparse COO": (torch.ones(3, 3).to_sparse(), "layout"),
            "sparse CSR": (torch.ones(2, 2).to_sparse_csr(), "layout"),
        }


IMPORTS = {
    "from_dlpack": lambda x: dl.from_dlpack(x),
    "from_dlpack copy=False": lambda x: dl.from_dlpack(x, copy=False),
    "from_dlpack copy=True": lambda x: dl.from_dlpack(x, copy=True),
    "from_dlpack device": lambda x: dl.from_dlpack(x, device="cpu"),
    "asarray": lambda x: dl.asarray(x),
    "asarray copy=True": lambda x: dl.asarray(x, copy=True),
}


@pytest.mark.parametrize("route", sorted(IMPORTS))
@pytest.mark.parametrize("kind", ["quantized", "sparse COO", "sparse CSR"])
def test_undescribable_torch_tensor_is_a_short_buffer_error_on_every_route(kind, route):
    # PyTorch's exchange table raises RuntimeError with a C++ stack trace for these; every
    # route must give what __dlpack__ gives: a one-line BufferError naming the problem.
    x, word = _undescribable()[kind]
    with pytest.raises(BufferError) as info:
        IMPORTS[route](x)
    message = str(info.value)
    assert word in message
    assert "\n" not in message and "frame #" not in message and "Exception raised" not in message


# ---- one rule per torch tensor, whatever the route -------------------------------------

# Every way a torch tensor reaches dlinterop memory-sharing or copying.
EVERY_ROUTE = {
    "from_dlpack": dl.from_dlpack,
    "copy=False": lambda x: dl.from_dlpack(x, copy=False),
    "copy=True": lambda x: dl.from_dlpack(x, copy=True),
    "device=cpu": lambda x: dl.from_dlpack(x, device="cpu"),
    "stream=-1": lambda x: dl.from_dlpack(x, stream=-1),
    "stream=None, copy=None": lambda x: dl.from_dlpack(x, stream=None, copy=None),
    "asarray": dl.asarray,
    "asarray copy=True": lambda x: dl.asarray(x, copy=True),
    "check_tensor": dl.check_tensor,
    "to_framework": lambda x: dl.to_framework(x, like=np),
    "borrow": lambda x: fw._borrow_routes(x),
}
GRAD_TENSORS = {
    "leaf": lambda: torch.ones(3, requires_grad=True),
    "Parameter": lambda: torch.nn.Parameter(torch.ones(3)),
    "non-leaf": lambda: torch.ones(3, requires_grad=True) * 2,
    "subclass": lambda: torch.ones(3, requires_grad=True).as_subclass(TorchSubclass),
}


@pytest.mark.parametrize("route", EVERY_ROUTE)
@pytest.mark.parametrize("make", GRAD_TENSORS.values(), ids=GRAD_TENSORS.keys())
def test_torch_tensor_requiring_grad_is_refused_on_every_route(make, route):
    # Regression: the exchange-table route (plain dl.from_dlpack) shared it, every other
    # route refused it; writes through shared memory would bypass autograd.
    x = make()
    with pytest.raises(BufferError, match=r"requires grad.*tensor\.detach\(\)"):
        EVERY_ROUTE[route](x)
    detached = x.detach()
    EVERY_ROUTE[route](detached)  # the way out works on the same route


def test_torch_own_consumers_refuse_it_too():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(BufferError, match="detach"):
        torch.from_dlpack(x)
    with pytest.raises(BufferError, match="detach"):
        np.from_dlpack(x)


def test_torch_empty_like_of_a_tensor_requiring_grad_reads_its_layout():
    x = torch.ones(2, 3, requires_grad=True)
    t = dl.zeros_like(x)
    assert (t.shape, t.dtype) == ((2, 3), dl.float32) and t.data_ptr != x.data_ptr()


STREAM_SOURCES = {
    "torch": lambda: torch.arange(3.0),
    "numpy": lambda: np.arange(3.0),
    "dl.Tensor": lambda: dl.zeros(3),
    "capsule": lambda: dl.to_dlpack(dl.zeros(3), versioned=True),
    "producer": lambda: type(
        "P",
        (),
        {
            "__dlpack__": lambda self, **kw: np.arange(3.0).__dlpack__(**kw),
            "__dlpack_device__": lambda self: (1, 0),
        },
    )(),
}


@pytest.mark.parametrize("stream", [object(), "1", 1.0, True])
@pytest.mark.parametrize("make", STREAM_SOURCES.values(), ids=STREAM_SOURCES.keys())
def test_stream_of_the_wrong_type_is_type_error_on_every_route(make, stream):
    with pytest.raises(TypeError, match="stream must be None or an int"):
        dl.from_dlpack(make(), stream=stream)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        dl.from_dlpack(make(), stream=stream, copy=True)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        dl.zeros(3).__dlpack__(stream=stream)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        dl.zeros(3).to("cpu", stream=stream)


def test_tensor_to_takes_a_host_stream_of_none_or_minus_one_only():
    t = dl.zeros(3)
    assert t.to("cpu", copy=True, stream=-1).data_ptr != t.data_ptr
    with pytest.raises(ValueError, match="stream must be None or -1"):
        t.to("cpu", copy=True, stream=5)


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
