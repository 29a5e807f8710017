"""The way out (dlinterop.frameworks): outputs allocated by the caller's framework
(empty_like, zeros_like), borrowed views of inputs, argument checks; at Python level and at C
level (the example downstream kernels, compiled here against the installed dlinterop)."""

import gc
import os
import subprocess

import numpy as np
import pytest

import dlinterop as dl
import dlinterop.frameworks as fw

from way_out_cases import (
    live_buffers,
    needs_torch,
    torch,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


KERNELS = os.path.join(
    REPO, "examples", "downstream", "src", "dlinterop_downstream", "_kernels.pyx"
)


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
        # as the example's setup.py builds it: dot() calls a table 1.1 entry where there is one
        path = build_extension(
            source, "fw_kernels", directory, defines=["DLINTEROP_ALLOW_NEWER_ENTRIES=1"]
        )
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
