"""The way out (dlinterop.frameworks): outputs allocated by the caller's framework and
handed back as its own type, borrowed views of inputs, argument checks; at Python level and
at C level (the example downstream kernels, compiled here against the installed dlinterop)."""

import gc
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl
import dlinterop.frameworks as fw

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(
    REPO, "examples", "downstream", "src", "dlinterop_downstream", "_kernels.pyx"
)

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def live_buffers():
    gc.collect()
    return dl.memory_stats()["live_buffers"]


# ---- empty_like / zeros_like -------------------------------------------------------------


def test_empty_like_numpy_uses_dlinterops_allocator():
    a = np.arange(6.0).reshape(2, 3)
    before = live_buffers()
    t = dl.empty_like(a)
    assert live_buffers() == before + 1
    assert (t.shape, t.dtype, t.device) == ((2, 3), dl.float64, dl.Device("cpu"))
    assert t.strides == (3, 1) and not t.readonly
    assert t.data_ptr % 256 == 0
    del t
    assert live_buffers() == before


@needs_torch
def test_empty_like_torch_uses_torchs_allocator():
    x = torch.arange(6.0).reshape(3, 2).t()  # transposed input: the output is C-order
    before = live_buffers()
    t = dl.empty_like(x)
    assert live_buffers() == before  # not dlinterop's memory: torch's
    assert t.shape == (2, 3) and t.strides == (3, 1) and t.dtype == dl.float32
    y = dl.to_framework(t, like=x)
    assert type(y) is torch.Tensor and y.data_ptr() == t.data_ptr
    assert y.shape == (2, 3) and y.stride() == (3, 1)
    del t
    gc.collect()
    y.fill_(2.5)  # the memory outlives the dl.Tensor: the torch tensor holds it
    assert float(y.sum()) == 15.0


@pytest.mark.parametrize("make", ["numpy", "torch", "dlinterop"])
def test_zeros_like_overrides_shape_and_dtype(make):
    if make == "torch" and torch is None:
        pytest.skip("PyTorch not installed")
    x = {
        "numpy": lambda: np.ones((4, 4), np.float32),
        "torch": lambda: torch.ones(4, 4),
        "dlinterop": lambda: dl.full((4, 4), 1.0, "float32"),
    }[make]()
    z = dl.zeros_like(x, shape=(2, 5), dtype="int16")
    assert z.shape == (2, 5) and z.dtype == dl.int16
    back = dl.to_framework(z, like=x)
    assert type(back) is type(x)
    np.testing.assert_array_equal(np.from_dlpack(z), np.zeros((2, 5), np.int16))
    for shape in [(), (0,), (3, 0, 2)]:
        e = dl.zeros_like(x, shape=shape)
        assert e.shape == shape and e.dtype == dl.float32


@pytest.mark.parametrize("make", ["numpy", "torch"])
def test_like_rejects_bad_arguments(make):
    if make == "torch" and torch is None:
        pytest.skip("PyTorch not installed")
    x = np.ones(3) if make == "numpy" else torch.ones(3)
    with pytest.raises(ValueError, match="negative dimension"):
        dl.empty_like(x, shape=(2, -1))
    with pytest.raises(ValueError, match="overflows"):
        dl.empty_like(x, shape=(2**40, 2**40))
    with pytest.raises(ValueError, match="at most 64"):
        dl.empty_like(x, shape=(1,) * 65)
    with pytest.raises(TypeError, match="shape must be"):
        dl.empty_like(x, shape="abc")
    with pytest.raises((TypeError, ValueError)):
        dl.empty_like(x, dtype="no such type")
    with pytest.raises(TypeError):
        dl.empty_like(object())
    with pytest.raises(ValueError):
        dl.empty_like(x, device="cpu:1")


@needs_torch
def test_torch_allocator_refusal_is_a_clear_exception():
    # A device torch cannot allocate on here: its allocator's error, not a crash.
    with pytest.raises(Exception) as info:
        dl.empty_like(torch.ones(2), device="cuda:0")
    assert not isinstance(info.value, SystemError)


# ---- to_framework ---------------------------------------------------------------------


def test_to_framework_numpy_by_instance_type_module_and_name():
    t = dl.full((2, 3), 4.0, "float32")
    for like in (np.zeros(1), np.ndarray, np, "numpy"):
        a = dl.to_framework(t, like=like)
        assert type(a) is np.ndarray and a.ctypes.data == t.data_ptr
        assert a.flags.writeable
        np.testing.assert_array_equal(a, np.full((2, 3), 4.0, np.float32))


@needs_torch
def test_to_framework_torch_by_instance_type_module_and_name():
    t = dl.full((2, 3), 4.0, "float32")
    for like in (torch.zeros(1), torch.Tensor, torch, "torch", torch.nn.Parameter(torch.ones(1))):
        y = dl.to_framework(t, like=like)
        assert type(y) is torch.Tensor and y.data_ptr() == t.data_ptr
        assert y.shape == (2, 3)


def test_to_framework_jax():
    jnp = pytest.importorskip("jax.numpy")
    t = dl.full((8,), 3.0, "float32")
    for like in (jnp.zeros(1), "jax"):
        y = dl.to_framework(t, like=like)
        assert type(y) is type(jnp.zeros(1))
        assert y.unsafe_buffer_pointer() == t.data_ptr
        assert float(y.sum()) == 24.0


def test_to_framework_dlinterop_is_the_tensor_itself():
    t = dl.zeros(3)
    assert dl.to_framework(t, like=dl.zeros(1)) is t
    assert dl.to_framework(t, like=dl.Tensor) is t
    assert dl.to_framework(t, like="dlinterop") is t


def test_to_framework_takes_anything_from_dlpack_takes():
    a = np.arange(5.0)
    b = dl.to_framework(a, like=np)
    assert b.ctypes.data == a.ctypes.data


def test_to_framework_keeps_read_only():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    b = dl.to_framework(t, like=np)
    assert b.ctypes.data == a.ctypes.data and not b.flags.writeable


def _read_only_tensor():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly_reason == "flag"
    return a, t


@needs_torch
@pytest.mark.parametrize("like", ["instance", "type", "module", "name"])
def test_to_framework_torch_refuses_read_only_memory(like):
    # Regression: torch has no read-only tensors, and the hand-back gave a writable one over
    # a read-only NumPy array (or an immutable bytes object).
    like = {"instance": torch.zeros(1), "type": torch.Tensor, "module": torch, "name": "torch"}[
        like
    ]
    a, t = _read_only_tensor()
    for copy in (None, False):
        with pytest.raises(BufferError, match="read-only.*copy=True"):
            dl.to_framework(t, like=like, copy=copy)
    y = dl.to_framework(t, like=like, copy=True)
    assert type(y) is torch.Tensor and y.data_ptr() != a.ctypes.data
    y += 1  # a writable copy; the source is untouched
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0] and y.tolist() == [1.0, 2.0, 3.0, 4.0]


@needs_torch
def test_to_framework_torch_refuses_an_immutable_buffer():
    t = dl.asarray(b"\0" * 16)
    assert t.readonly_reason == "flag"
    with pytest.raises(BufferError, match="read-only"):
        dl.to_framework(t, like=torch)


@needs_torch
def test_to_framework_torch_shares_memory_read_only_only_by_assumption():
    # A legacy capsule's memory is read-only by assumption only (it could not say): handed
    # on as PyTorch's own from_dlpack of that capsule would.
    t = dl.from_dlpack(np.arange(3.0).__dlpack__())
    assert t.readonly_reason == "legacy"
    assert dl.to_framework(t, like=torch).data_ptr() == t.data_ptr


def test_to_framework_numpy_shares_read_only_memory_read_only():
    a, t = _read_only_tensor()
    b = dl.to_framework(t, like=np)
    assert b.ctypes.data == a.ctypes.data and not b.flags.writeable
    c = dl.to_framework(t, like=np, copy=True)
    assert c.ctypes.data != a.ctypes.data and c.flags.writeable
    assert c.tolist() == a.tolist()


def test_to_framework_copy_true_always_copies():
    t = dl.full((3,), 2.0)
    assert dl.to_framework(t, like=np, copy=True).ctypes.data != t.data_ptr
    assert dl.to_framework(t, like=np, copy=False).ctypes.data == t.data_ptr
    with pytest.raises(TypeError, match="copy must be"):
        dl.to_framework(t, like=np, copy="yes")


def test_to_framework_keeps_memory_alive():
    t = dl.full((1000,), 7.0, "float64")
    b = dl.to_framework(t, like="numpy")
    del t
    gc.collect()
    assert b.sum() == 7000.0


# dl.to_framework(t, like=numpy) makes the ndarray through NumPy's C API where the core's
# NumPy route is built and its probes pass; otherwise np.from_dlpack does. Both must give
# what np.from_dlpack(t) gives.


@pytest.fixture(params=["native", "np.from_dlpack"])
def numpy_handback(request):
    native = request.param == "native"
    if native and not dl.build_info()["numpy_route_built"]:
        pytest.skip("built without NumPy's headers: there is no native hand-back")
    previous = dl._core._set_numpy_route(native)
    dl.to_framework(dl.zeros(1), like=np)  # decides the hand-back again
    assert dl._core._numpy_handback() is native
    yield native
    dl._core._set_numpy_route(previous)


def _handback_cases():
    base = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    frozen = np.arange(6, dtype=np.int32)
    frozen.flags.writeable = False
    cases = [
        base,
        base[:, ::2, 1:],
        base.transpose(2, 0, 1),
        base[::-1, :, ::-2],
        base[:0],
        base[1, 2, 3, ...],
        frozen,
        np.zeros((3, 0, 2), np.uint8),
    ]
    cases += [
        np.arange(6).astype(t).reshape(2, 3)[:, ::-1]
        for t in (
            np.bool_,
            np.int8,
            np.int16,
            np.int32,
            np.int64,
            np.uint8,
            np.uint16,
            np.uint32,
            np.uint64,
            np.float16,
            np.float32,
            np.complex64,
            np.complex128,
        )
    ]
    return cases


@pytest.mark.parametrize("case", range(len(_handback_cases())))
def test_to_framework_numpy_is_what_np_from_dlpack_makes(numpy_handback, case):
    t = dl.from_dlpack(_handback_cases()[case])
    ours, theirs = dl.to_framework(t, like=np), np.from_dlpack(t)
    assert type(ours) is np.ndarray
    assert (ours.dtype, ours.shape, ours.strides) == (theirs.dtype, theirs.shape, theirs.strides)
    assert ours.flags.writeable == theirs.flags.writeable
    assert ours.__array_interface__["data"] == theirs.__array_interface__["data"]
    assert ours.__dlpack_device__() == theirs.__dlpack_device__()
    np.testing.assert_array_equal(ours, theirs)
    if numpy_handback:
        assert ours.base is t  # the Tensor keeps the memory alive, no capsule
    else:
        assert type(ours.base).__name__ == "PyCapsule"


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "complex32"])
def test_to_framework_numpy_leaves_other_dtypes_to_np_from_dlpack(numpy_handback, name):
    # Types outside NumPy's builtin table go to np.from_dlpack, whatever it makes of them:
    # some NumPy versions take ml_dtypes' types through a registry, others refuse them.
    pytest.importorskip("ml_dtypes")
    t = dl.zeros((4,), name)
    try:
        theirs = np.from_dlpack(t)
    except Exception as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            dl.to_framework(t, like=np)
    else:
        ours = dl.to_framework(t, like=np)
        assert ours.dtype == theirs.dtype
        assert ours.ctypes.data == theirs.ctypes.data == t.data_ptr


def test_to_framework_numpy_native_keeps_the_tensor_alive(numpy_handback):
    t = dl.full((1000,), 7.0, "float64")
    before = sys.getrefcount(t)
    b = dl.to_framework(t, like=np)
    assert sys.getrefcount(t) == before + 1  # the array's base, or its capsule's export
    del b
    assert sys.getrefcount(t) == before
    b = dl.to_framework(t, like=np)
    del t
    gc.collect()
    assert b.sum() == 7000.0


@pytest.mark.parametrize(
    "like, error, match",
    [
        ("no_such_framework_here", TypeError, "no such framework"),
        (3, TypeError, "has no from_dlpack"),
        (str, TypeError, "like= must be"),
        (type, TypeError, "like= must be"),
        (sys, TypeError, "has no from_dlpack"),
    ],
)
def test_to_framework_rejects_what_it_cannot_make(like, error, match):
    with pytest.raises(error, match=match):
        dl.to_framework(dl.zeros(2), like=like)


@needs_torch
def test_to_framework_torch_round_trips_many_times_without_leaks():
    x = torch.ones(3)
    before = live_buffers()
    exports = dl.memory_stats()["live_exports"]
    for _ in range(2000):
        y = dl.to_framework(dl.zeros_like(x), like=x)
        assert type(y) is torch.Tensor
    del y
    gc.collect()
    assert live_buffers() == before
    assert dl.memory_stats()["live_exports"] == exports


# ---- borrowed views and argument checks -----------------------------------------------


def test_borrow_routes():
    assert fw._borrow_routes(dl.zeros((2, 2))) == ("tensor", (2, 2), False)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    assert fw._borrow_routes(ro) == ("import", (3,), True)
    if torch is not None:
        assert fw._borrow_routes(torch.zeros(4, 5)) == ("table", (4, 5), False)
        with pytest.raises(BufferError, match="conjugate"):
            fw._borrow_routes(torch.zeros(2, dtype=torch.complex64).conj())
        # The borrowed view refuses what the import refuses: a tensor that requires grad
        # (torch's table would serve it, its __dlpack__ would not).
        grad = torch.zeros(2, requires_grad=True)
        with pytest.raises(BufferError, match="requires grad"):
            fw._borrow_routes(grad)
        with pytest.raises(BufferError, match="requires grad"):
            dl.from_dlpack(grad)
        # Its layout alone may still be read: empty_like makes new memory.
        out = dl.empty_like(grad)
        assert (out.shape, out.dtype) == ((2,), dl.float32) and out.data_ptr != grad.data_ptr()


def test_check_tensor_names_the_argument():
    a = np.zeros((3, 4), np.float32)
    t = dl.check_tensor(
        a, "weights", dtype="float32", ndim=2, device="cpu", c_contiguous=True, writable=True
    )
    assert isinstance(t, dl.Tensor) and t.data_ptr == a.ctypes.data
    with pytest.raises(TypeError, match="weights: expected dtype float64, got float32"):
        dl.check_tensor(a, "weights", dtype="float64")
    with pytest.raises(
        ValueError, match=r"weights: expected 3 dimensions, got 2 \(shape \(3, 4\)\)"
    ):
        dl.check_tensor(a, "weights", ndim=3)
    with pytest.raises(ValueError, match="weights: expected a tensor on cuda"):
        dl.check_tensor(a, "weights", device="cuda")
    with pytest.raises(ValueError, match="weights: expected a C-contiguous tensor"):
        dl.check_tensor(a.T, "weights", c_contiguous=True)
    ro = a.copy()
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="weights: expected writable memory"):
        dl.check_tensor(ro, "weights", writable=True)
    dl.check_tensor(ro, "weights")  # read-only is fine when writing is not asked for
    # Size-0 and size-1 dimensions do not break C-contiguity, as in NumPy.
    dl.check_tensor(np.zeros((0, 3))[:, ::2], "e", c_contiguous=True)
    dl.check_tensor(np.zeros((3, 1))[::1, :], "o", c_contiguous=True)
    with pytest.raises(TypeError, match="name must be a str"):
        dl.check_tensor(a, 5)


# ---- C level: the example downstream kernels ---------------------------------------------


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    from cython_build import build_extension, import_strictly

    with open(KERNELS) as f:
        source = f.read()
    directory = str(tmp_path_factory.mktemp("kernels"))
    try:
        path = build_extension(source, "fw_kernels", directory)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"building the example kernels failed:\n{e.stdout}\n{e.stderr}")
    return import_strictly("fw_kernels", path)


def test_kernel_returns_numpy_for_numpy(kernels):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = kernels.scaled(a, 2.0)
    assert type(out) is np.ndarray and out.shape == (2, 3)
    np.testing.assert_array_equal(out, a * 2)
    assert out.ctypes.data != a.ctypes.data


@needs_torch
def test_kernel_returns_torch_for_torch(kernels):
    x = torch.arange(6.0).reshape(2, 3)
    before = live_buffers()
    out = kernels.scaled(x, 3.0)
    assert type(out) is torch.Tensor
    assert torch.equal(out, x * 3)
    assert live_buffers() == before  # the output was allocated by torch
    z = kernels.zeros_as(x, (4, 2))
    assert type(z) is torch.Tensor and z.shape == (4, 2) and not z.any()
    assert kernels.fill_(x, 1.5) is x and bool((x == 1.5).all())


def test_kernel_argument_errors_name_the_argument(kernels):
    with pytest.raises(TypeError, match="x: expected dtype float32, got float64"):
        kernels.scaled(np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="x: expected a C-contiguous tensor"):
        kernels.scaled(np.zeros((3, 3), np.float32)[:, ::2], 1.0)
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="x: expected writable memory"):
        kernels.fill_(ro, 9.0)
    np.testing.assert_array_equal(ro, np.ones(4, np.float32))  # never written
    out = kernels.scaled(ro, 2.0)  # reading a read-only input is fine
    np.testing.assert_array_equal(out, np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(ro, np.ones(4, np.float32))


def test_kernel_outputs_of_every_framework_type(kernels):
    for x in [np.ones(2, np.float32), dl.full((2,), 1.0, "float32")]:
        assert type(kernels.identity(x)) is type(x)
    jnp = pytest.importorskip("jax.numpy")
    j = jnp.ones(2, dtype=jnp.float32)
    assert type(kernels.scaled(j, 2.0)) is type(j)
    np.testing.assert_array_equal(np.asarray(kernels.scaled(j, 2.0)), [2.0, 2.0])


def test_the_guides_kernel_compiles_and_returns_the_callers_type(tmp_path):
    """The `scaled` kernel of docs/cython.md, built here (tests/docs/cython_guide.py follows
    the whole page in a fresh virtualenv, NumPy only; this adds torch in, torch out)."""
    from cython_build import build_extension, import_strictly

    with open(os.path.join(REPO, "docs", "cython.md")) as f:
        page = f.read()
    blocks = page.split("```cython\n")[1:]
    source = next(b.split("```")[0] for b in blocks if "def scaled" in b)
    try:
        path = build_extension(source, "guide_kernel", str(tmp_path))
    except subprocess.CalledProcessError as e:
        pytest.fail(f"docs/cython.md's kernel does not build:\n{e.stdout}\n{e.stderr}")
    module = import_strictly("guide_kernel", path)
    out = module.scaled(np.ones(3, np.float32), 2.0)
    assert type(out) is np.ndarray and out.tolist() == [2.0, 2.0, 2.0]
    if torch is not None:
        y = module.scaled(torch.ones(2, 2), 3.0)
        assert type(y) is torch.Tensor and y.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    with pytest.raises(TypeError, match="x: expected dtype float32, got float64"):
        module.scaled(np.ones(3), 1.0)
