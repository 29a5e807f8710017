"""Interop with JAX (CPU, x64 enabled), both directions: every dtype both sides know, the
layouts XLA accepts, lifetimes, and JAX's legacy (hence read-only) capsules.

JAX speaks only legacy "dltensor" capsules (it calls __dlpack__(stream=None)), so its arrays
import read-only by assumption (readonly_reason "legacy") and go back to JAX the same way. It
takes data without copying only when it is 64-byte aligned (dlinterop aligns to 256), refuses
strides that are not a permutation of a compact layout. Those refusals are JAX's; the tests
pin JAX's own error and show dlinterop did not crash or leak (the conftest leak check runs
after every test).
"""
import pickle

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = pytest.importorskip("jax.numpy")
jax_dlpack = pytest.importorskip("jax.dlpack")

JaxRuntimeError = jax.errors.JaxRuntimeError

# Every DLPack type JAX arrays can hold on the CPU, both ways.
JAX_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float16", "float32", "float64", "bfloat16", "complex64",
              "complex128", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
              "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
              "float8_e8m0fnu"]


def tensor_bytes(t):
    """The bytes of a dl.Tensor in C order, through its pickle buffer (every dtype)."""
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    with buffers[0].raw() as raw:
        return raw.tobytes()


def jax_source(name, shape=(2, 3)):
    """A JAX array of that dtype with varied bit patterns, in JAX's own buffer."""
    npdt = dl.dtype(name).to_numpy()
    if name == "bool":
        host = (np.arange(6) % 2 == 0).reshape(shape)
    else:
        raw = (np.arange(6 * npdt.itemsize) * 37 % 251).astype(np.uint8)
        if name == "float8_e8m0fnu":
            raw[raw == 0xFF] = 0x7F   # 0xFF is its NaN; keep comparisons exact
        host = raw.view(npdt).reshape(shape)
    return jnp.asarray(host)


def pointer(y):
    return y.unsafe_buffer_pointer()


def test_x64_is_enabled():
    assert jnp.zeros(1, dtype=jnp.int64).dtype == np.int64
    assert jnp.zeros(1, dtype=jnp.float64).dtype == np.float64


# -- dtypes -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", JAX_DTYPES + ["float4_e2m1fn"])
def test_jax_to_dl_every_dtype_zero_copy_read_only(name):
    if name == "float4_e2m1fn":
        codes = np.array([1, 2, 3, 4, 5, 6], dtype=np.uint8)
        x = jnp.asarray(codes.view(ml_dtypes.float4_e2m1fn))
        expected = bytes([0x21, 0x43, 0x65])   # packed, low nibble first (SPEC section 11)
    else:
        x = jax_source(name)
        expected = np.asarray(x).tobytes()
    t = dl.from_dlpack(x)
    assert t.dtype == name
    assert t.shape == x.shape
    assert t.data_ptr == pointer(x)
    assert t.readonly   # JAX's capsules are legacy: dlinterop cannot know they are writable
    assert tensor_bytes(t) == expected


@pytest.mark.parametrize("name", JAX_DTYPES)
def test_dl_to_jax_every_dtype_zero_copy(name):
    t = dl.full((2, 3), True if name == "bool" else 1.0, dtype=name)
    y = jax_dlpack.from_dlpack(t)
    assert y.dtype == dl.dtype(name).to_numpy()
    assert y.shape == (2, 3)
    assert pointer(y) == t.data_ptr   # 256-byte aligned: XLA takes it as is
    expected = np.full((2, 3), True if name == "bool" else 1.0, dtype=dl.dtype(name).to_numpy())
    assert np.asarray(y).tobytes() == expected.tobytes() == tensor_bytes(t)


@pytest.mark.parametrize("name, message", [
    ("float4_e2m1fn", "only support default layout"),
    ("float6_e2m3fn", "invalid DLPack type code 15"),
    ("float6_e3m2fn", "invalid DLPack type code 16"),
])
def test_dl_to_jax_sub_byte_types_are_refused_by_jax(name, message):
    t = dl.full((6,), 1.0, dtype=name)
    with pytest.raises(JaxRuntimeError, match=message):
        jax_dlpack.from_dlpack(t)
    assert t.nbytes == (6 * t.dtype.bits + 7) // 8   # still intact


# -- layouts ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 0, 1), (2,) + (1,) * 31],
                         ids=["0d", "(0,)", "(3,0)", "(2,0,1)", "32_dims"])
def test_jax_to_dl_shapes(shape):
    x = jnp.arange(int(np.prod(shape)), dtype=jnp.float64).reshape(shape)
    t = dl.from_dlpack(x)
    assert t.shape == shape
    assert t.data_ptr == pointer(x)
    assert np.array_equal(np.from_dlpack(t), np.asarray(x))


def test_jax_transposed_array_is_exported_compact():
    # JAX materialises transposes: what arrives is dense, in C order.
    x = jnp.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1)
    t = dl.from_dlpack(x)
    assert t.is_contiguous() and t.shape == (4, 2, 3)
    assert np.array_equal(np.from_dlpack(t), np.asarray(x))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 0, 1), (2,) + (1,) * 31, (3, 4, 5)],
                         ids=["0d", "(0,)", "(3,0)", "(2,0,1)", "32_dims", "(3,4,5)"])
def test_dl_to_jax_shapes_zero_copy(shape):
    t = dl.full(shape, 2.5, dtype="float64")
    y = jax_dlpack.from_dlpack(t)
    assert y.shape == shape
    if t.size:
        assert pointer(y) == t.data_ptr
    assert np.array_equal(np.asarray(y), np.full(shape, 2.5))


@pytest.mark.parametrize("layout", ["zero_size_(0,)", "zero_size_(3,0)", "zero_size_(2,0,1)",
                                    "32_dims", "transpose", "0d", "offset_view_compact"])
def test_dl_to_jax_strided_layouts_jax_accepts(dl_layout, layout):
    """Permuted compact strides are fine; JAX copies unless element 0 is 64-byte aligned."""
    if layout == "offset_view_compact":
        t, view = dl_layout("32_dims")
        view = np.from_dlpack(t).reshape(-1)[1:]   # 4 bytes past an aligned start
        t = dl.from_dlpack(view)
    else:
        t, view = dl_layout(layout)
    y = jax_dlpack.from_dlpack(t)
    assert np.array_equal(np.asarray(y), view)
    if t.size:
        aligned = t.data_ptr % 64 == 0
        assert (pointer(y) == t.data_ptr) == aligned


@pytest.mark.parametrize("layout", ["slice", "offset_view", "zero_strides", "negative_strides",
                                    "size1_odd_strides"])
def test_dl_to_jax_non_compact_strides_are_refused_by_jax(dl_layout, layout):
    """XLA takes only permutations of a compact layout; it even refuses an odd stride on a
    size-1 dimension. The refusal is JAX's error; dlinterop's tensor stays intact."""
    t, view = dl_layout(layout)
    with pytest.raises(JaxRuntimeError, match="trivial \\(compact\\) striding"):
        jax_dlpack.from_dlpack(t)
    assert np.array_equal(np.from_dlpack(t), view)
    # The way in is an explicit copy.
    y = jax_dlpack.from_dlpack(t.copy())
    assert np.array_equal(np.asarray(y), view)


def test_jax_refuses_bare_capsules():
    t = dl.zeros(3)
    capsule = dl.to_dlpack(t)
    with pytest.raises(TypeError, match="__dlpack__"):
        jax_dlpack.from_dlpack(capsule)
    # The capsule was never consumed: dl can still take it back.
    assert dl.from_dlpack(capsule).data_ptr == t.data_ptr


def test_jax_capsule_into_dl_is_consumed_once():
    x = jnp.arange(4.0)
    capsule = x.__dlpack__()
    t = dl.from_dlpack(capsule)
    assert t.data_ptr == pointer(x) and t.readonly
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(capsule)


def test_unconsumed_capsules_release_everything(live_counters):
    before = live_counters()
    x = jnp.arange(4.0)
    jax_capsule = x.__dlpack__()
    t = dl.zeros(4)
    dl_capsule = dl.to_dlpack(t)
    del jax_capsule, dl_capsule, t
    assert live_counters() == before
    assert np.array_equal(np.asarray(x), np.arange(4.0))


# -- lifetimes --------------------------------------------------------------------------

def test_jax_producer_deleted_before_dl_consumer():
    x = jnp.arange(1000, dtype=jnp.float64)
    t = dl.from_dlpack(x)
    del x
    jnp.zeros(1000, dtype=jnp.float64).block_until_ready()   # would reuse freed memory
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
    assert t.readonly_reason == "legacy"   # assumed: JAX's legacy capsule could not say
    assert "readonly='legacy'" in repr(t)
    a = np.from_dlpack(t)
    assert not a.flags.writeable
    assert memoryview(t).readonly
    # Versioned export keeps the flag for consumers that understand it.
    assert dl.from_dlpack(dl.to_dlpack(t, versioned=True)).readonly
    # A legacy export passes the uncertainty on, as it came: legacy again, read-only again.
    u = dl.from_dlpack(dl.to_dlpack(t))
    assert u.data_ptr == t.data_ptr and u.readonly_reason == "legacy"
    # A view of it keeps the reason.
    assert dl.from_dlpack(t).readonly_reason == "legacy"


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


def test_read_only_by_flag_tensor_cannot_go_to_jax_without_a_copy():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly_reason == "flag"
    with pytest.raises(BufferError, match="read-only"):
        jax_dlpack.from_dlpack(t)
    y = jax_dlpack.from_dlpack(t.copy())
    assert np.array_equal(np.asarray(y), a)


def test_read_only_numpy_array_through_dl_to_jax_is_refused():
    a = np.arange(6.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    with pytest.raises(BufferError, match="legacy capsule"):
        jax_dlpack.from_dlpack(t)
