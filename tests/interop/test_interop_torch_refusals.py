"""Interop with PyTorch (CPU): one rule per torch tensor whatever the route it takes: tensors
DLPack cannot describe, tensors that require grad, streams of the wrong type."""

import warnings

import pytest

import dlinterop as dl
import dlinterop.frameworks as fw

from torch_cases import (
    TorchSubclass,
)

np = pytest.importorskip("numpy")


torch = pytest.importorskip("torch")


pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")


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
