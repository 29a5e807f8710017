"""Interop with JAX (CPU, x64 enabled): lifetimes whichever side dies first, read-only memory,
and round trips through dlinterop to JAX, NumPy and PyTorch.

JAX arrays are immutable, so they always import read-only. Older JAX speaks only legacy
"dltensor" capsules (it calls __dlpack__(stream=None)): its arrays import read-only by
assumption (readonly_reason "legacy") and go back to JAX the same way. Newer JAX speaks
versioned capsules with READ_ONLY set, and takes read-only memory back. Which one this JAX
is, is asked of JAX itself (JAX_VERSIONED), never read from its version number."""

import pickle

import pytest

import dlinterop as dl

from jax_cases import (
    JAX_DTYPES,
    JAX_VERSIONED,
    jax_dlpack,
    jax_source,
    pointer,
)

np = pytest.importorskip("numpy")
jnp = pytest.importorskip("jax.numpy")


# -- lifetimes --------------------------------------------------------------------------


def test_jax_producer_deleted_before_dl_consumer():
    x = jnp.arange(1000, dtype=jnp.float64)
    t = dl.from_dlpack(x)
    del x
    jnp.zeros(1000, dtype=jnp.float64).block_until_ready()  # would reuse freed memory
    assert np.array_equal(np.from_dlpack(t), np.arange(1000.0))


def test_dl_consumer_deleted_before_jax_producer():
    x = jnp.arange(10.0)
    t = dl.from_dlpack(x)
    del t
    assert np.array_equal(np.asarray(x + 1), np.arange(1.0, 11.0))


def test_dl_producer_deleted_before_jax_consumer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = jax_dlpack.from_dlpack(t)
    del t
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    assert float(y.sum()) == 300.0
    del y
    assert live_counters() == before


def test_jax_consumer_deleted_before_dl_producer(live_counters):
    before = live_counters()
    t = dl.full((100,), 3.0, dtype="float64")
    y = jax_dlpack.from_dlpack(t)
    del y
    assert live_counters()["live_exports"] == before["live_exports"]
    assert np.array_equal(np.from_dlpack(t), np.full(100, 3.0))


def test_jax_result_of_computation_on_dl_memory_outlives_it():
    t = dl.full((8,), 2.0, dtype="float32")
    z = jax_dlpack.from_dlpack(t) * 3
    del t
    assert np.array_equal(np.asarray(z), np.full(8, 6.0, dtype=np.float32))


# -- read-only --------------------------------------------------------------------------


def test_jax_import_is_read_only_everywhere():
    t = dl.from_dlpack(jnp.arange(6.0))
    assert t.readonly
    reason = "flag" if JAX_VERSIONED else "legacy"  # said, or assumed for a legacy capsule
    assert t.readonly_reason == reason
    assert f"readonly={reason!r}" in repr(t)
    a = np.from_dlpack(t)
    assert not a.flags.writeable
    assert memoryview(t).readonly
    # Versioned export keeps the flag for consumers that understand it.
    assert dl.from_dlpack(dl.to_dlpack(t, versioned=True)).readonly
    # A view of it keeps the reason.
    assert dl.from_dlpack(t).readonly_reason == reason
    if JAX_VERSIONED:
        with pytest.raises(BufferError, match="read-only"):
            dl.to_dlpack(t)
    else:
        # A legacy export passes the uncertainty on, as it came: legacy, read-only again.
        u = dl.from_dlpack(dl.to_dlpack(t))
        assert u.data_ptr == t.data_ptr and u.readonly_reason == "legacy"


@pytest.mark.parametrize("name", JAX_DTYPES)
def test_jax_to_dl_to_jax_every_dtype_zero_copy(name):
    x = jax_source(name)
    t = dl.from_dlpack(x)
    y = jax_dlpack.from_dlpack(t)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert pointer(y) == pointer(x) == t.data_ptr
    assert np.asarray(y).tobytes() == np.asarray(x).tobytes()
    del x, t
    assert np.asarray(y).tobytes() == np.asarray(jax_source(name)).tobytes()


def numpy_dlpack_knows(name):
    """Whether this NumPy's DLPack import takes the dtype (NumPy 2.5 takes ml_dtypes')."""
    try:
        np.from_dlpack(dl.zeros((1,), name))
    except (BufferError, RuntimeError, TypeError):
        return False
    return True


@pytest.mark.parametrize("name", JAX_DTYPES)
def test_jax_to_dl_to_numpy_every_dtype_zero_copy(name):
    # NumPy holds float4 unpacked (a byte an element), so packed float4 has no NumPy view.
    x = jax_source(name)
    t = dl.from_dlpack(x)
    if numpy_dlpack_knows(name):
        a = np.from_dlpack(t)
    else:
        # This NumPy's DLPack refuses ml_dtypes' types: the pickle buffer is the road.
        buffers = []
        pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
        a = np.frombuffer(buffers[0].raw(), dtype=t.dtype.to_numpy()).reshape(t.shape)
    assert a.ctypes.data == pointer(x)
    assert not a.flags.writeable
    assert a.dtype == x.dtype and a.tobytes() == np.asarray(x).tobytes()


@pytest.mark.parametrize("name", JAX_DTYPES)
def test_jax_to_dl_to_torch_every_dtype_torch_has(name):
    torch = pytest.importorskip("torch")
    x = jax_source(name)
    t = dl.from_dlpack(x)
    torch_dtype = getattr(torch, name, None)
    if torch_dtype is None:
        # PyTorch has no such type: its own refusal, with the tensor intact.
        with pytest.raises(BufferError, match="Unsupported code"):
            torch.from_dlpack(t)
        assert dl.from_dlpack(t).data_ptr == pointer(x)
        return
    y = torch.from_dlpack(t)
    assert y.dtype == torch_dtype and tuple(y.shape) == x.shape
    assert y.data_ptr() == pointer(x)
    assert y.view(torch.uint8).numpy().tobytes() == np.asarray(x).view(np.uint8).tobytes()


def test_read_only_by_flag_tensor_goes_to_jax_only_where_jax_reads_the_flag():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly_reason == "flag"
    if JAX_VERSIONED:
        # JAX arrays are immutable: it takes read-only memory as it is.
        y = jax_dlpack.from_dlpack(t)
        assert pointer(y) == a.ctypes.data or a.ctypes.data % 64
    else:
        # A legacy capsule would drop the flag: dlinterop refuses it.
        with pytest.raises(BufferError, match="legacy capsule"):
            jax_dlpack.from_dlpack(t)
        y = jax_dlpack.from_dlpack(t.copy())
    assert np.array_equal(np.asarray(y), a)


def test_jnp_asarray_of_a_tensor_works_or_fails_loudly_and_from_dlpack_works():
    # JAX's asarray asks NumPy for t.dtype, a dlinterop DType: NumPy 2.2 follows its own
    # `dtype` attribute and JAX then reads the buffer (right values); newer NumPy refuses a
    # dtype attribute that is not a NumPy dtype, a clear error. Never wrong data.
    # docs/concepts.md: use from_dlpack, which works everywhere.
    import jax.numpy as jnp

    t = dl.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    expected = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    try:
        x = jnp.asarray(t)
    except (TypeError, ValueError):
        pass
    else:
        assert x.shape == (2, 3) and x.dtype == jnp.float32 and x.tolist() == expected
    assert jnp.from_dlpack(t).tolist() == expected
