"""dl.from_dlpack through PyTorch's exchange table: every dtype and layout, lifetimes, the
refusals PyTorch's own export makes, and subclasses."""

import ctypes
import gc
import sys
from ctypes import POINTER, byref

import numpy as np
import pytest

import dlinterop as dl
from exchange_api.helpers import _KEEP, FROM_PY, table_address, table_of

from forge import DLManagedTensorVersioned

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")


def _torch():
    return pytest.importorskip("torch")


TORCH_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex32",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
]


def torch_sample(torch, name):
    """A (2, 3) torch tensor of that dtype holding varied bit patterns (as the interop
    suite's torch_source)."""
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no {name}")
    if dtype is torch.bool:
        return torch.arange(6).reshape(2, 3) % 2 == 0
    raw = (torch.arange(6 * dtype.itemsize, dtype=torch.int64) * 37 % 251).to(torch.uint8)
    return raw.reshape(2, -1).view(dtype)


@pytest.fixture
def no_torch_dlpack(monkeypatch):
    """torch.Tensor.__dlpack__ raises, so an import can only go through the table."""
    torch = _torch()

    def refuse(self, *args, **kwargs):
        raise AssertionError("torch.Tensor.__dlpack__ was called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", refuse)
    return torch


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_tensor_of_every_dtype_through_the_table(no_torch_dlpack, name):
    torch = no_torch_dlpack
    x = torch_sample(torch, name)
    t = dl.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    assert t.dtype == name
    assert (t.shape, t.strides) == (tuple(x.shape), x.stride())
    assert not t.readonly
    nbytes = x.numel() * x.element_size()
    assert ctypes.string_at(t.data_ptr, nbytes) == x.view(torch.uint8).numpy().tobytes()


# The interop suite's torch layouts (interop/test_interop_torch.py), plus a broadcast scalar.
TORCH_LAYOUTS = {
    "0d": lambda torch: torch.tensor(3.5),
    "zero_size_(0,)": lambda torch: torch.empty(0),
    "zero_size_(3,0)": lambda torch: torch.empty(3, 0),
    "zero_size_(2,0,1)": lambda torch: torch.empty(2, 0, 1),
    "size1_odd_strides": lambda torch: torch.arange(6.0).as_strided((3, 1, 2), (2, 1000, 1)),
    "32_dims": lambda torch: torch.arange(4.0).reshape((2, 2) + (1,) * 30),
    "32_dims_strided": lambda torch: torch.arange(16.0).reshape((4, 4) + (1,) * 30)[::2, 1::2],
    "slice": lambda torch: torch.arange(24.0).reshape(2, 3, 4)[:, ::2, 1:],
    "transpose": lambda torch: torch.arange(24.0).reshape(2, 3, 4).transpose(0, 2),
    "zero_strides": lambda torch: torch.arange(4.0).expand(3, 4),
    "storage_offset": lambda torch: torch.arange(24.0).reshape(2, 3, 4)[1, 1:, 2:],
    "broadcast_scalar": lambda torch: torch.tensor(1.0).expand(2, 3),
}


@pytest.mark.parametrize("make", TORCH_LAYOUTS.values(), ids=TORCH_LAYOUTS.keys())
def test_torch_tensor_of_every_layout_through_the_table(no_torch_dlpack, make):
    torch = no_torch_dlpack
    x = make(torch)
    t = dl.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    assert (t.shape, t.strides) == (tuple(x.shape), x.stride())
    if x.numel():
        np.testing.assert_array_equal(np.asarray(t), x.numpy())
    if x.storage_offset():
        assert t.data_ptr == x.untyped_storage().data_ptr() + 4 * x.storage_offset()


def test_torch_import_shares_memory_and_keeps_the_tensor_alive(no_torch_dlpack):
    torch = no_torch_dlpack
    x = torch.zeros(4)
    refs = sys.getrefcount(x)
    t = dl.from_dlpack(x)
    np.asarray(t)[1] = 5
    assert x[1].item() == 5
    assert sys.getrefcount(x) > refs
    address = x.data_ptr()
    u = dl.from_dlpack(x)
    del u
    gc.collect()
    assert sys.getrefcount(x) > refs
    del x
    gc.collect()
    assert t.data_ptr == address and np.asarray(t)[1] == 5


def test_torch_import_releases_the_tensor(no_torch_dlpack):
    x = no_torch_dlpack.zeros(4)
    refs = sys.getrefcount(x)
    t = dl.from_dlpack(x)
    del t
    gc.collect()
    assert sys.getrefcount(x) == refs


def test_torch_subclass_publishing_only_the_1_2_int_spelling_uses_dlpack():
    torch = _torch()
    calls = []

    def __dlpack__(self, **kwargs):
        calls.append(kwargs)
        return torch.Tensor.__dlpack__(self, **kwargs)

    cls = type(
        "IntSpelling",
        (torch.Tensor,),
        {
            "__dlpack_c_exchange_api__": None,
            "__dlpack__": __dlpack__,
            "__c_dlpack_exchange_api__": table_address(torch.Tensor),
        },
    )
    _KEEP.append(cls)
    x = torch.arange(4.0).as_subclass(cls)
    assert dl.from_dlpack(x).data_ptr == x.data_ptr()
    assert len(calls) == 1


def test_torch_subclass_without_table_uses_dlpack():
    torch = _torch()
    calls = []

    class NoTable(torch.Tensor):
        __dlpack_c_exchange_api__ = None

        def __dlpack__(self, **kwargs):
            calls.append(kwargs)
            return super().__dlpack__(**kwargs)

    _KEEP.append(NoTable)
    x = torch.arange(4.0).as_subclass(NoTable)
    assert dl.from_dlpack(x).data_ptr == x.data_ptr()
    assert calls == [{"max_version": (1, 3)}]


def torch_table_error(x):
    """What torch's own table sets for `x`, called directly."""
    out = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(Exception) as info:
        FROM_PY(table_of(type(x)).managed_tensor_from_py_object_no_sync)(id(x), byref(out))
    return info.value


@pytest.mark.parametrize(
    "make",
    [
        lambda torch: torch.eye(3).to_sparse(),
        lambda torch: torch.ones(3, device="meta"),
    ],
    ids=["sparse", "meta"],
)
def test_torch_table_error_gives_the_dlpack_error(make):
    # torch's table raises RuntimeError with a C++ stack trace for these; the import asks
    # __dlpack__ then, and raises what it raises (a one-line BufferError).
    torch = _torch()
    x = make(torch)
    assert isinstance(torch_table_error(x), RuntimeError)
    with pytest.raises(Exception) as expected:
        x.__dlpack__(max_version=(1, 3))
    with pytest.raises(type(expected.value)) as info:
        dl.from_dlpack(x)
    assert type(info.value) is type(expected.value) is BufferError
    assert str(info.value) == str(expected.value)


def test_torch_table_route_refuses_tensors_that_require_grad(no_torch_dlpack):
    # torch's table does not apply __dlpack__'s requires_grad refusal; dlinterop does, so
    # that every route has one rule (writes through the shared memory bypass autograd).
    x = no_torch_dlpack.ones(3, requires_grad=True)
    with pytest.raises(BufferError, match=r"requires grad.*tensor\.detach\(\)"):
        dl.from_dlpack(x)
    assert dl.from_dlpack(x.detach()).data_ptr == x.data_ptr()


def test_c_consumer_round_trips_a_torch_tensor(c_consumer):
    torch = _torch()
    x = torch.arange(6.0).reshape(2, 3).T
    y = c_consumer.round_trip(x)
    assert type(y) is torch.Tensor and y is not x
    assert (y.data_ptr(), y.stride()) == (x.data_ptr(), x.stride())
