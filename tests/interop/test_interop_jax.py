"""Interop with JAX (CPU, x64 enabled), both directions: every dtype both sides know, the
layouts XLA accepts, lifetimes, and read-only memory.

JAX arrays are immutable, so they always import read-only. Older JAX speaks only legacy
"dltensor" capsules (it calls __dlpack__(stream=None)): its arrays import read-only by
assumption (readonly_reason "legacy") and go back to JAX the same way. Newer JAX speaks
versioned capsules with READ_ONLY set, and takes read-only memory back. Which one this JAX
is, is asked of JAX itself (JAX_VERSIONED), never read from its version number. JAX takes
data without copying only when it is 64-byte aligned (dlinterop aligns to 256), refuses
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
JAX_DTYPES = [
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
    "complex64",
    "complex128",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]


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
            raw[raw == 0xFF] = 0x7F  # 0xFF is its NaN; keep comparisons exact
        host = raw.view(npdt).reshape(shape)
    return jnp.asarray(host)


def pointer(y):
    return y.unsafe_buffer_pointer()


class _Recorder:
    """A producer over a dl.Tensor that records how its consumer calls __dlpack__."""

    def __init__(self, t):
        self.t, self.calls = t, []

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def _jax_speaks_versioned():
    recorder = _Recorder(dl.zeros((2,)))
    consumer = jax_dlpack.from_dlpack
    if hasattr(consumer, "__dlpack_checked__"):
        # dlinterop's pytest plugin replaced it (relaying, the recorder would see
        # dlinterop's call): JAX's own is asked
        consumer = consumer.__wrapped__
    consumer(recorder)
    return recorder.calls[0].get("max_version") is not None


# Whether this JAX asks for (and so also sends) versioned capsules.
JAX_VERSIONED = _jax_speaks_versioned()


def test_jax_sends_the_capsule_kind_it_asks_for():
    capsule = (
        jnp.arange(3.0).__dlpack__(max_version=(1, 3))
        if JAX_VERSIONED
        else (jnp.arange(3.0).__dlpack__())
    )
    assert dl.from_dlpack(capsule).readonly_reason == ("flag" if JAX_VERSIONED else "legacy")


def test_x64_is_enabled():
    assert jnp.zeros(1, dtype=jnp.int64).dtype == np.int64
    assert jnp.zeros(1, dtype=jnp.float64).dtype == np.float64


# -- dtypes -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", JAX_DTYPES + ["float4_e2m1fn"])
def test_jax_to_dl_every_dtype_zero_copy_read_only(name):
    if name == "float4_e2m1fn":
        codes = np.array([1, 2, 3, 4, 5, 6], dtype=np.uint8)
        x = jnp.asarray(codes.view(ml_dtypes.float4_e2m1fn))
        expected = bytes(
            [0x21, 0x43, 0x65]
        )  # packed, low nibble first (DLPack: sub-byte data is little bit-endian)
    else:
        x = jax_source(name)
        expected = np.asarray(x).tobytes()
    t = dl.from_dlpack(x)
    assert t.dtype == name
    assert t.shape == x.shape
    assert t.data_ptr == pointer(x)
    assert t.readonly  # JAX arrays are immutable (and a legacy capsule could not say)
    assert tensor_bytes(t) == expected


@pytest.mark.parametrize("name", JAX_DTYPES)
def test_dl_to_jax_every_dtype_zero_copy(name):
    t = dl.full((2, 3), True if name == "bool" else 1.0, dtype=name)
    y = jax_dlpack.from_dlpack(t)
    assert y.dtype == dl.dtype(name).to_numpy()
    assert y.shape == (2, 3)
    assert pointer(y) == t.data_ptr  # 256-byte aligned: XLA takes it as is
    expected = np.full((2, 3), True if name == "bool" else 1.0, dtype=dl.dtype(name).to_numpy())
    assert np.asarray(y).tobytes() == expected.tobytes() == tensor_bytes(t)


@pytest.mark.parametrize(
    "name, message",
    [
        ("float6_e2m3fn", "invalid DLPack type code 15"),
        ("float6_e3m2fn", "invalid DLPack type code 16"),
    ],
)
def test_dl_to_jax_float6_types_are_refused_by_jax(name, message):
    t = dl.full((6,), 1.0, dtype=name)
    with pytest.raises(JaxRuntimeError, match=message):
        jax_dlpack.from_dlpack(t)
    assert t.nbytes == (6 * t.dtype.bits + 7) // 8  # still intact


def test_dl_to_jax_packed_float4_is_taken_right_or_refused_by_jax():
    # Some JAX versions import packed float4 (two to a byte), others refuse its layout.
    codes = np.array([1, 2, 3, 4, 5, 6], dtype=np.uint8)
    values = codes.view(ml_dtypes.float4_e2m1fn)
    t = dl.from_dlpack(jnp.asarray(values)).copy()  # packed, writable, dl's memory
    try:
        y = jax_dlpack.from_dlpack(t)
    except JaxRuntimeError as e:
        assert "layout" in str(e)  # "only support default layout", "Unsupported layout"
    else:
        assert y.dtype == values.dtype
        assert np.asarray(y).view(np.uint8).tolist() == codes.tolist()
    assert tensor_bytes(t) == bytes([0x21, 0x43, 0x65])  # still intact


# -- layouts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [(), (0,), (3, 0), (2, 0, 1), (2,) + (1,) * 31],
    ids=["0d", "(0,)", "(3,0)", "(2,0,1)", "32_dims"],
)
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


@pytest.mark.parametrize(
    "shape",
    [(), (0,), (3, 0), (2, 0, 1), (2,) + (1,) * 31, (3, 4, 5)],
    ids=["0d", "(0,)", "(3,0)", "(2,0,1)", "32_dims", "(3,4,5)"],
)
def test_dl_to_jax_shapes_zero_copy(shape):
    t = dl.full(shape, 2.5, dtype="float64")
    y = jax_dlpack.from_dlpack(t)
    assert y.shape == shape
    if t.size:
        assert pointer(y) == t.data_ptr
    assert np.array_equal(np.asarray(y), np.full(shape, 2.5))


def jax_reads_aligned_permuted_strides():
    """Whether this JAX honours the strides of a 64-byte aligned transposed NumPy array."""
    base = np.from_dlpack(dl.zeros((2, 3, 4), "float32"))  # dlinterop aligns to 256
    base[...] = np.arange(24).reshape(2, 3, 4)
    view = base.transpose(2, 0, 1)
    return np.array_equal(np.asarray(jax_dlpack.from_dlpack(view)), view)


@pytest.mark.parametrize(
    "layout",
    [
        "zero_size_(0,)",
        "zero_size_(3,0)",
        "zero_size_(2,0,1)",
        "32_dims",
        "transpose",
        "0d",
        "offset_view_compact",
    ],
)
def test_dl_to_jax_strided_layouts_jax_accepts(dl_layout, layout):
    """Permuted compact strides are fine; JAX copies unless element 0 is 64-byte aligned."""
    if layout == "offset_view_compact":
        t, view = dl_layout("32_dims")
        view = np.from_dlpack(t).reshape(-1)[1:]  # 4 bytes past an aligned start
        t = dl.from_dlpack(view)
    else:
        t, view = dl_layout(layout)
    y = jax_dlpack.from_dlpack(t)
    if layout == "transpose" and not jax_reads_aligned_permuted_strides():
        # This JAX reads an aligned, permuted layout it takes without copying in C order,
        # NumPy's own capsule of the same memory too: dlinterop gets the same treatment.
        assert np.array_equal(np.asarray(y), np.asarray(jax_dlpack.from_dlpack(view)))
    else:
        assert np.array_equal(np.asarray(y), view)
    if t.size:
        aligned = t.data_ptr % 64 == 0
        assert (pointer(y) == t.data_ptr) == aligned


@pytest.mark.parametrize(
    "layout", ["slice", "offset_view", "zero_strides", "negative_strides", "size1_odd_strides"]
)
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


@pytest.mark.dlpack_sanitizer_expected  # where JAX takes the capsule, it is offered twice
def test_bare_capsules_into_jax_are_refused_unconsumed_or_taken():
    # Newer JAX refuses capsules (it wants __dlpack__ objects); older JAX consumes them.
    t = dl.full((3,), 2.0)
    capsule = dl.to_dlpack(t)
    try:
        y = jax_dlpack.from_dlpack(capsule)
    except TypeError as e:
        assert "__dlpack__" in str(e)
        # The capsule was never consumed: dl can still take it back.
        assert dl.from_dlpack(capsule).data_ptr == t.data_ptr
    else:
        assert np.array_equal(np.asarray(y), np.full(3, 2.0))
        with pytest.raises(ValueError, match="already consumed"):
            dl.from_dlpack(capsule)


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
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
