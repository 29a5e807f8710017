"""What the JAX interop tests share: the dtypes JAX holds, a tensor's bytes, JAX sources, and
whether this JAX speaks versioned capsules."""

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
jax = pytest.importorskip("jax")
# Every JAX test file imports this module first: JAX runs with 64-bit types from here on.
jax.config.update("jax_enable_x64", True)
jnp = pytest.importorskip("jax.numpy")
jax_dlpack = pytest.importorskip("jax.dlpack")


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
