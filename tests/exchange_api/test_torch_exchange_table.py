"""dl.exchange_api_for(torch.Tensor): views and owned tensors read through PyTorch's C shim
(no __dlpack__ call, no call into PyTorch's own table), checked against PyTorch's own table;
its refusals, the way back, threads."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import threading
from ctypes import POINTER, byref

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dlinterop as dl  # noqa: E402
from dlinterop import _core, frameworks  # noqa: E402
from exchange_api.helpers import ExchangeTable, _capsule_pointer, dltensor_layout  # noqa: E402

from forge import DLManagedTensorVersioned, DLTensor  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

OWN = ExchangeTable(torch.Tensor.__dlpack_c_exchange_api__)
TORCH_LIB = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")


def table():
    return ExchangeTable(dl.exchange_api_for(torch.Tensor))


def layout_of(view):
    """(data, dtype, device, shape, strides where the axis has more than one element)."""
    shape, strides = dltensor_layout(view)
    return (
        (view.data or 0) + view.byte_offset,
        (view.dtype.code, view.dtype.bits, view.dtype.lanes),
        (view.device.device_type, view.device.device_id),
        shape,
        tuple(s for n, s in zip(shape, strides) if n > 1),
    )


def test_torch_tensors_get_one_table_for_every_tensor_type():
    capsule = dl.exchange_api_for(torch.zeros(2))
    assert capsule is dl.exchange_api_for(torch.Tensor)
    assert capsule is dl.exchange_api_for(torch.nn.Parameter)
    assert capsule is dl.exchange_api_for(type("Sub", (torch.Tensor,), {}))
    assert capsule is not torch.Tensor.__dlpack_c_exchange_api__


def test_the_native_route_is_used_where_libtorch_exports_the_shim():
    # A feature check, not a version check: where libtorch exports the AOTInductor shim
    # (and the core reads the bits natively), the table must read tensors natively.
    if not os.path.exists(TORCH_LIB):
        pytest.skip("no libtorch_cpu.so (another platform)")
    if not hasattr(ctypes.CDLL(TORCH_LIB), "aoti_torch_get_sizes"):
        pytest.skip("this libtorch exports no AOTInductor shim")
    dl.exchange_api_for(torch.Tensor)
    assert frameworks._torch_native_ready()


DTYPES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
]  # fmt: skip


@pytest.mark.parametrize("name", DTYPES)
def test_view_of_every_dtype_is_torch_own_tables(name):
    kind = getattr(torch, name, None)
    if kind is None:
        pytest.skip(f"this PyTorch has no torch.{name}")
    x = torch.zeros(3, 4, dtype=kind)
    assert layout_of(table().view(x)) == layout_of(OWN.view(x))


LAYOUTS = {
    "contiguous": lambda b: b,
    "transposed": lambda b: b.transpose(0, 2),
    "sliced with an offset": lambda b: b[1:, ::2, 1:],
    "negative step made by flip": lambda b: b.flip(0),
    "expanded (stride 0)": lambda b: b[:, :1, :].expand(2, 5, 4),
    "0-d": lambda b: b[1, 2, 3],
    "empty": lambda b: b[:, :0],
    "channels last": lambda b: b.reshape(1, 2, 3, 4).contiguous(memory_format=torch.channels_last),
}  # fmt: skip


@pytest.mark.parametrize("make", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_view_is_the_tensor_in_place(make):
    x = make(torch.arange(24, dtype=torch.float32).reshape(2, 3, 4))
    view = table().view(x)
    assert layout_of(view) == layout_of(OWN.view(x))
    assert (view.data or 0) == x.data_ptr() and view.byte_offset == 0
    shape, strides = dltensor_layout(view)
    assert shape == tuple(x.shape) and strides == tuple(x.stride())
    assert bool(view.shape) and bool(view.strides)
    if x.numel():
        # Every element read where the view says it is.
        for index in np.ndindex(*shape):
            offset = sum(i * s for i, s in zip(index, strides)) * 4
            got = np.frombuffer(ctypes.string_at(view.data + offset, 4), np.float32)[0]
            assert got == x[index].item()


def test_view_follows_the_tensor_when_it_changes_in_place():
    x = torch.zeros(4, 6)
    first = table().view(x)
    x.t_()  # the same object, its TensorImpl's sizes and strides changed
    second = table().view(x)
    assert dltensor_layout(first) == ((6, 4), (1, 6)) == dltensor_layout(second)


def test_owned_tensor_outlives_the_tensor_and_releases_it_once():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, 1:]
    before = sys.getrefcount(x)
    managed = table().managed(x)
    m = managed.contents
    assert sys.getrefcount(x) == before + 1
    assert m.flags == 0 and (m.version.major, m.version.minor) == (1, 3)
    assert layout_of(m.dl_tensor) == layout_of(OWN.view(x))
    x.t_()  # the owned tensor's shape and strides are its own copy
    assert dltensor_layout(m.dl_tensor) == ((2, 2), (3, 1))
    x.t_()
    m.deleter(managed)
    assert sys.getrefcount(x) == before
    y = torch.arange(4, dtype=torch.int64)
    managed = table().managed(y)
    address = y.data_ptr()
    del y
    gc.collect()
    assert managed.contents.dl_tensor.data == address
    assert np.frombuffer(ctypes.string_at(address, 32), np.int64).tolist() == [0, 1, 2, 3]
    managed.contents.deleter(managed)


def test_owned_tensor_deleter_runs_without_the_gil():
    x = torch.ones(8)
    managed = table().managed(x)
    before = sys.getrefcount(x)
    deleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))(
        ctypes.cast(managed.contents.deleter, ctypes.c_void_p).value
    )
    worker = threading.Thread(target=deleter, args=(managed,))  # CFUNCTYPE drops the GIL
    worker.start()
    worker.join()
    assert sys.getrefcount(x) == before - 1


def test_parameters_are_read_natively_and_subclasses_through_torch():
    p = torch.nn.Parameter(torch.ones(2, 3), requires_grad=False)
    assert layout_of(table().view(p)) == layout_of(OWN.view(p))

    class Logged(torch.Tensor):
        pass

    s = torch.arange(4.0).as_subclass(Logged)
    assert layout_of(table().view(s)) == layout_of(OWN.view(s))
    managed = table().managed(s)
    assert managed.contents.dl_tensor.data == s.data_ptr()
    managed.contents.deleter(managed)


REFUSED = {
    "requires grad": (lambda: torch.zeros(3, requires_grad=True), "requires grad"),
    "a requires-grad result": (lambda: torch.zeros(3, requires_grad=True) * 2, "requires grad"),
    "a requires-grad Parameter": (lambda: torch.nn.Parameter(torch.ones(2)), "requires grad"),
    "conjugate bit": (lambda: torch.zeros(2, dtype=torch.complex64).conj(), "conjugate"),
    "negative bit": (lambda: torch.zeros(2, dtype=torch.complex64).conj().imag, "negative"),
}  # fmt: skip


@pytest.mark.parametrize("make, match", REFUSED.values(), ids=REFUSED.keys())
def test_tensors_pytorch_dlpack_refuses_are_refused(make, match):
    # As PyTorch's __dlpack__ refuses them (its own table and to_dlpack export lazily
    # conjugated views with their stored values).
    x = make()
    with pytest.raises(BufferError, match=match):
        table().view_of(id(x), byref(DLTensor()))
    managed = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(BufferError, match=match):
        table().from_py(id(x), byref(managed))
    assert not managed


ELSEWHERE = {
    "sparse": lambda: torch.zeros(3).to_sparse(),
    "meta": lambda: torch.zeros(3, device="meta"),
    "quantized": lambda: torch.quantize_per_tensor(torch.zeros(3), 0.1, 0, torch.qint8),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("make", ELSEWHERE.values(), ids=ELSEWHERE.keys())
def test_what_the_native_route_does_not_read_is_torch_own_tables_answer(make):
    x = make()
    outcomes = []
    for t in (table(), OWN):
        try:
            outcomes.append(("ok", layout_of(t.view(x))))
        except Exception as e:  # noqa: BLE001 - the two must fail alike
            outcomes.append((type(e), str(e)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] != "ok" or x.layout == torch.strided


@pytest.mark.parametrize("obj", [np.zeros(3), dl.zeros(3), [1.0], None])
def test_other_objects_are_refused(obj):
    with pytest.raises(TypeError, match="takes torch.Tensor objects"):
        table().view_of(id(obj), byref(DLTensor()))
    managed = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="takes torch.Tensor objects"):
        table().from_py(id(obj), byref(managed))
    assert not managed


def test_to_py_gives_a_torch_tensor_sharing_the_memory():
    x = torch.arange(6, dtype=torch.float32)
    result = table().to_object(table().managed(x))
    assert type(result) is torch.Tensor and result.data_ptr() == x.data_ptr()
    t = dl.arange(5, dtype="int16")
    result = table().to_object(dl.Tensor.__dlpack_c_exchange_api__ and _dl_managed(t))
    assert type(result) is torch.Tensor and result.tolist() == list(range(5))
    assert result.data_ptr() == t.data_ptr


def _dl_managed(t):
    return ExchangeTable(dl.Tensor.__dlpack_c_exchange_api__).managed(t)


def test_allocator_and_stream_are_torchs():
    ours = table().api
    assert ours.managed_tensor_allocator == OWN.api.managed_tensor_allocator
    assert ours.current_work_stream == OWN.api.current_work_stream
    assert not ours.header.prev_api


def test_threads_share_the_table_and_its_views():
    tensors = [torch.arange(i + 1, dtype=torch.float64) for i in range(8)]
    failures = []

    def work(x):
        try:
            for _ in range(200):
                view = table().view(x)
                assert view.data == x.data_ptr() and view.shape[0] == x.numel()
                managed = table().managed(x)
                managed.contents.deleter(managed)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in tensors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_threads_asking_first_get_one_table():
    # A fresh process: every thread asks for the table before any exists.
    code = textwrap.dedent(
        """
        import threading, torch, dlinterop as dl
        barrier = threading.Barrier(8)
        found = []
        def ask():
            barrier.wait()
            found.append(dl.exchange_api_for(torch.Tensor))
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert len(found) == 8 and all(f is found[0] for f in found), found
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_dl_from_dlpack_imports_through_the_torch_table_where_it_reads_natively():
    ours = _capsule_pointer(dl.exchange_api_for(torch.Tensor), b"dlpack_exchange_api")
    own = _capsule_pointer(torch.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")

    class Sub(torch.Tensor):
        pass

    native = frameworks._torch_native_ready()
    assert _core._producer_exchange_api(torch.Tensor) == (ours if native else own)
    assert _core._producer_exchange_api(Sub) == own
    x = torch.arange(6.0)
    t = dl.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()
    del x
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # the import keeps the tensor alive
    with pytest.raises(BufferError, match="requires grad"):
        dl.from_dlpack(torch.zeros(2, requires_grad=True))
    # Its layout alone is still read for a tensor that requires grad (empty_like).
    assert dl.empty_like(torch.zeros(3, requires_grad=True)).shape == (3,)


def test_a_pytorch_mode_that_imports_while_the_table_is_made_is_served():
    # Making the table runs PyTorch code (its probe tensors); a mode that imports every
    # tensor made asks for the table again from inside: it is served, nothing deadlocks.
    code = textwrap.dedent(
        """
        import torch, dlinterop as dl
        from torch.utils._python_dispatch import TorchDispatchMode

        class Importing(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if isinstance(out, torch.Tensor) and out.layout == torch.strided:
                    try:
                        dl.from_dlpack(out)
                    except (BufferError, TypeError):
                        pass
                return out

        with Importing():
            table = dl.exchange_api_for(torch.Tensor)
        assert table is dl.exchange_api_for(torch.Tensor)
        assert dl.from_dlpack(torch.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
