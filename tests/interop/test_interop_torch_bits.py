"""Interop with PyTorch (CPU): the lazily conjugated and negated views PyTorch hands out, refused
(or copied with the values they mean), and the bits read natively or through Python."""

import subprocess
import sys
import textwrap

import pytest

import dlinterop as dl

from buffer_cases import tensor_bytes
from torch_cases import (
    TorchSubclass,
    torch_bytes,
)

torch = pytest.importorskip("torch")


pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")


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
