"""dl.publish_exchange_api / dl.unpublish_exchange_api: dlinterop's NumPy table put on
numpy.ndarray (an immutable type) for consumers that look tables up on a type, taken back
after, and its JAX and pyarrow tables on their types; refusals. Every test leaves the types
as it found them."""

import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl

NAME = "__dlpack_c_exchange_api__"


@pytest.fixture
def published():
    """numpy.ndarray with dlinterop's table on it for the test, taken back after."""
    assert not hasattr(np.ndarray, NAME), "an earlier test left numpy.ndarray published"
    dl.publish_exchange_api(np.ndarray)
    try:
        yield dl.exchange_api_for(np.ndarray)
    finally:
        if NAME in np.ndarray.__dict__:
            dl.unpublish_exchange_api(np.ndarray)


def test_publish_puts_the_numpy_table_on_the_type_and_unpublish_takes_it_back():
    assert not hasattr(np.ndarray, NAME)
    dl.publish_exchange_api(np.ndarray)
    try:
        assert np.ndarray.__dict__[NAME] is dl.exchange_api_for(np.ndarray)
        assert np.zeros(3).__dlpack_c_exchange_api__ is dl.exchange_api_for(np.ndarray)
        dl.publish_exchange_api(np.ndarray)  # twice: harmless
        subclass = type("Sub", (np.ndarray,), {})
        assert getattr(subclass, NAME) is dl.exchange_api_for(np.ndarray)  # inherited
        with pytest.raises(ValueError, match="holds no exchange table"):
            dl.unpublish_exchange_api(subclass)
    finally:
        dl.unpublish_exchange_api(np.ndarray)
    assert not hasattr(np.ndarray, NAME) and NAME not in np.ndarray.__dict__
    with pytest.raises(ValueError, match="holds no exchange table"):
        dl.unpublish_exchange_api(np.ndarray)


def test_dlinterops_import_of_numpy_arrays_is_unchanged(published):
    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = dl.from_dlpack(a)
    assert t.data_ptr == a.ctypes.data and t.tolist() == a.tolist()
    assert np.from_dlpack(t).tolist() == a.tolist()


def test_tvm_ffi_takes_numpy_arrays_through_the_published_table(published):
    # tvm-ffi's from_dlpack without a table calls the legacy __dlpack__(), which NumPy
    # refuses for a read-only array; through the table, the owned tensor says READ_ONLY.
    tvm_ffi = pytest.importorskip("tvm_ffi")
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    y = tvm_ffi.from_dlpack(a)
    assert y.data_ptr() == a.ctypes.data and tuple(y.shape) == (6,)
    del y
    dl.unpublish_exchange_api(np.ndarray)
    with pytest.raises(BufferError):
        tvm_ffi.from_dlpack(a)


@pytest.mark.parametrize(
    "cls, error, match",
    [
        (3, TypeError, "takes a type, got int"),
        (np.zeros(2), TypeError, "takes a type, got ndarray"),
        (dl.Tensor, ValueError, "publishes its own exchange table"),
        (type("Producer", (), {"__dlpack__": lambda self: None}), ValueError, "no native"),
        (list, TypeError, "no __dlpack__"),
    ],
    ids=["int", "an array", "dl.Tensor", "a generic producer", "list"],
)
def test_publish_refuses_what_it_cannot_publish(cls, error, match):
    with pytest.raises(error, match=match):
        dl.publish_exchange_api(cls)


def test_publish_refuses_a_type_with_a_table_of_its_own():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.Tensor, NAME):
        pytest.skip("this PyTorch publishes no exchange table")
    own = getattr(torch.Tensor, NAME)
    with pytest.raises(ValueError):
        dl.publish_exchange_api(torch.Tensor)
    assert getattr(torch.Tensor, NAME) is own
    with pytest.raises(ValueError, match="holds no exchange table"):
        dl.unpublish_exchange_api(torch.Tensor)


PUBLISHED_IMPORT = """
import os, sys
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import numpy as np
import dlinterop as dl
if sys.argv[1] == "jax":
    import jax, jax.numpy as jnp
    cls, x = jax.Array, jnp.arange(4.0)
elif sys.argv[1] == "pyarrow":
    import pyarrow as pa
    cls, x = pa.Array, pa.array(np.arange(4.0))
else:
    import warp as wp
    wp.config.quiet = True
    cls, x = wp.array, wp.array(np.arange(4.0), device="cpu")
dl.publish_exchange_api(cls)
# The concrete type inherits the table, and dlinterop's own import takes it: the table's
# owned tensor must come from __dlpack__, not from an import through the table again.
assert getattr(type(x), "__dlpack_c_exchange_api__") is dl.exchange_api_for(cls)
assert dl.from_dlpack(x).tolist() == [0.0, 1.0, 2.0, 3.0]
dl.unpublish_exchange_api(cls)
assert "__dlpack_c_exchange_api__" not in cls.__dict__
"""


@pytest.mark.parametrize("framework", ["jax", "pyarrow", "warp"])
def test_publish_puts_the_other_native_tables_on_their_types(framework):
    # In a child process: importing through a published table once recursed without end
    # (the table's owned tensor was an import of the object, through the same table).
    pytest.importorskip(framework)
    out = subprocess.run(
        [sys.executable, "-c", PUBLISHED_IMPORT, framework],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
