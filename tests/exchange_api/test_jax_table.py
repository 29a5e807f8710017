"""dl.exchange_api_for(jax.Array): the view read from the array itself (no __dlpack__ call),
the owned tensor through JAX's __dlpack__, jax.Arrays on the way back; refusals."""

import ctypes
import gc
import os
from ctypes import POINTER, byref

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import dlinterop as dl  # noqa: E402
from exchange_api.helpers import ExchangeTable, dltensor_layout  # noqa: E402

from forge import READ_ONLY, DLManagedTensorVersioned, DLTensor  # noqa: E402


def table():
    return ExchangeTable(dl.exchange_api_for(jax.Array))


def test_jax_arrays_get_their_own_table_once_per_type():
    x = jnp.zeros(3)
    capsule = dl.exchange_api_for(x)
    assert capsule is dl.exchange_api_for(type(x)) is dl.exchange_api_for(jax.Array)
    assert capsule is not dl.exchange_api_for(type("P", (), {"__dlpack__": lambda self: 0}))


@pytest.mark.parametrize(
    "make",
    [
        lambda: jnp.arange(12, dtype=jnp.float32).reshape(3, 4),
        lambda: jnp.arange(24, dtype=jnp.int64).reshape(2, 3, 4),
        lambda: jnp.ones((5, 1, 2), jnp.bfloat16),
        lambda: jnp.array(2.5, jnp.float32),
        lambda: jnp.zeros((0, 3), jnp.float32),
    ],
    ids=["float32 2-d", "int64 3-d", "bfloat16 with a length-1 axis", "0-d", "empty"],
)
def test_jax_view_is_the_array_in_place(make):
    x = make()
    view = table().view(x)
    expected = dl.from_dlpack(x)  # JAX's own __dlpack__, for comparison
    assert view.data == x.unsafe_buffer_pointer()
    assert (view.dtype.code, view.dtype.bits, view.dtype.lanes) == (
        expected.dtype.code,
        expected.dtype.bits,
        1,
    )
    shape, strides = dltensor_layout(view)
    assert shape == x.shape
    assert bool(view.strides) and bool(view.shape)
    if x.size > 1:
        assert strides == expected.strides
    if x.size:
        got = ctypes.string_at(view.data, x.nbytes)
        assert got == np.asarray(x).tobytes()


def test_jax_owned_tensor_is_read_only_and_outlives_the_array():
    x = jnp.arange(6, dtype=jnp.float32)
    address = x.unsafe_buffer_pointer()
    managed = table().managed(x)
    m = managed.contents
    assert m.flags & READ_ONLY and m.dl_tensor.data == address
    del x
    gc.collect()
    assert ctypes.string_at(m.dl_tensor.data, 24) == np.arange(6, dtype=np.float32).tobytes()
    m.deleter(managed)


def test_jax_to_py_gives_a_dl_tensor_that_owns_the_tensor():
    # JAX's from_dlpack copies what it cannot take in place: the way back is a dl.Tensor,
    # which owns the tensor it is given and which JAX (or any consumer) then takes.
    x = jnp.arange(6, dtype=jnp.float32)
    result = table().to_object(table().managed(x))
    assert type(result) is dl.Tensor and result.data_ptr == x.unsafe_buffer_pointer()
    assert result.tolist() == list(range(6))


def test_jax_table_refuses_what_jax_cannot_export():
    x = jnp.zeros(4, jnp.int4)
    with pytest.raises(BufferError, match="no DLPack type"):
        table().view_of(id(x), byref(DLTensor()))


@pytest.mark.parametrize("make", [lambda: np.zeros(3), lambda: dl.zeros(3), lambda: [1.0]])
def test_jax_table_refuses_other_objects(make):
    obj = make()
    with pytest.raises(TypeError, match="takes jax.Array objects"):
        table().view_of(id(obj), byref(DLTensor()))
    managed = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="takes jax.Array objects"):
        table().from_py(id(obj), byref(managed))
    assert not managed
