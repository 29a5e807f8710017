"""Interop with JAX (CPU, x64 enabled), both directions: every dtype both sides know, the
layouts XLA accepts, capsules.

JAX arrays are immutable, so they always import read-only. Older JAX speaks only legacy
"dltensor" capsules (it calls __dlpack__(stream=None)): its arrays import read-only by
assumption (readonly_reason "legacy") and go back to JAX the same way. Newer JAX speaks
versioned capsules with READ_ONLY set, and takes read-only memory back. Which one this JAX
is, is asked of JAX itself (JAX_VERSIONED), never read from its version number. JAX takes
data without copying only when it is 64-byte aligned (dlinterop aligns to 256), refuses
strides that are not a permutation of a compact layout. Those refusals are JAX's; the tests
pin JAX's own error and show dlinterop did not crash or leak (the conftest leak check runs
after every test)."""

import pytest

import dlinterop as dl

from buffer_cases import tensor_bytes
from jax_cases import (
    JAX_DTYPES,
    JAX_VERSIONED,
    jax_dlpack,
    jax_source,
    pointer,
)

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

JaxRuntimeError = jax.errors.JaxRuntimeError


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
