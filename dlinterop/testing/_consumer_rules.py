"""The consumer rules: a framework's from_dlpack, fed by producers dlinterop builds natively,
well-formed and malformed, whose deleters count their calls."""

import gc

from dlinterop.testing._frameworks.dtypes import _np, _numpy_dtype
from dlinterop.testing._helpers import _code, _native, _nbytes, _values
from dlinterop.testing._model import (
    IS_SUBBYTE_TYPE_PADDED,
    READ_ONLY,
    NotApplicable,
    _fail,
    register,
    rule,
)


def _producer(values=None, dtype="int32", **fields):
    """A native producer of `values` as `dtype`, C-contiguous strides filled, unless
    `fields` say otherwise (strides=None: NULL strides)."""
    np = _np()
    values = np.arange(4) if values is None else values
    payload = np.ascontiguousarray(np.asarray(values).astype(_numpy_dtype(dtype))).tobytes()
    code, bits, _ = _code(dtype)
    shape = tuple(fields.pop("shape", np.shape(values)))
    if "strides" not in fields:
        strides, step = [], 1
        for extent in reversed(shape):
            strides.insert(0, step)
            step *= max(extent, 1)
        fields["strides"] = tuple(strides)
    settings = {"payload": payload, "shape": shape, "code": code, "bits": bits}
    settings.update(fields)
    return _native().Producer(**settings)


def _bytes_of(fw, obj):
    """The bytes (C order) of a consumer's array, through its own export."""
    import dlinterop as dl

    try:
        t = dl.from_dlpack(obj).copy()
    except Exception as e:
        raise NotApplicable(f"its arrays cannot be read back through DLPack ({e})") from None
    capsule = t.__dlpack__(max_version=(1, 3))
    info = _native().inspect(capsule)
    return _native().read(capsule, _nbytes(info))


def _pointer_of(obj):
    try:
        capsule = obj.__dlpack__(max_version=(1, 3))
    except Exception:
        return None
    info = _native().inspect(capsule)
    return info.get("data", 0) + info.get("byte_offset", 0) if "data" in info else None


def _release(*objects):
    del objects
    gc.collect()


@rule("consumer.imports", "a versioned capsule's values, shared")
def c_imports(fw):
    p = _producer()
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("imported values differ from the producer's")
    pointer = _pointer_of(out)
    if pointer is not None and pointer != p.data_address:
        return "copied (allowed where sharing is not possible)"


@rule("consumer.renames-capsule", "the capsule is renamed used_*")
def c_renames(fw):
    p = _producer()
    out = fw.from_dlpack(p)
    name = _native().inspect(p.capsule)["name"]
    if not name.startswith("used_"):
        _fail(f"capsule left named {name!r} after the import (must be renamed used_*)")
    del out


@rule("consumer.deleter-once", "the deleter runs once, when the imported array dies")
def c_deleter_once(fw):
    p = _producer()
    out = fw.from_dlpack(p)
    p.capsule = None
    gc.collect()
    copied = _pointer_of(out) not in (None, p.data_address)
    if p.deleter_calls != (1 if copied else 0):
        _fail(
            f"deleter called {p.deleter_calls}× while the imported array lives "
            f"({'a copy' if copied else 'sharing the memory'})"
        )
    del out
    gc.collect()
    if p.deleter_calls != 1:
        _fail(f"deleter called {p.deleter_calls}× once the imported array died (expected 1)")


@rule("consumer.passes-max-version", "__dlpack__ gets max_version=(1, x)")
def c_max_version(fw):
    p = _producer()
    fw.from_dlpack(p)
    mv = (p.kwargs or {}).get("max_version")
    if mv is None:
        _fail("__dlpack__ called without max_version (array API 2023.12: pass (1, minor))")
    if tuple(mv)[0] != 1:
        _fail(f"max_version={mv} passed (major 1 expected)")
    return f"max_version={tuple(mv)}"


@rule(
    "consumer.old-producer",
    "a producer that rejects max_version with TypeError is asked again without",
)
def c_old_signature(fw):
    p = _producer(versioned=False, old_signature=True)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("imported values differ from the producer's")


@rule("consumer.legacy-capsule", "a legacy capsule is accepted when a versioned one was asked for")
def c_legacy(fw):
    p = _producer(versioned=False)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("imported values differ from the producer's")


@rule("consumer.stream-cpu", "no stream is passed for CPU memory")
def c_stream_cpu(fw):
    p = _producer()
    fw.from_dlpack(p)
    stream = (p.kwargs or {}).get("stream", None)
    if stream is not None:
        _fail(f"stream={stream!r} passed for CPU memory (None expected)")


def _refuses(fw, p, what):
    try:
        out = fw.from_dlpack(p)
    except SystemError as e:
        _fail(f"SystemError (an exception lost or mishandled): {e}")
    except Exception as e:
        refusal = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    else:
        del out
        gc.collect()
        p.capsule = None
        gc.collect()
        return None, p.deleter_calls
    p.capsule = None
    gc.collect()
    if p.deleter_calls != 1:
        _fail(f"{what}: refused ({refusal}) but the deleter ran {p.deleter_calls}× (expected 1)")
    return refusal, 1


@rule("consumer.consume-once", "a used capsule is refused")
def c_consume_once(fw):
    p = _producer(name="used_dltensor_versioned")
    refusal, _ = _refuses(fw, p, "a consumed capsule")
    if refusal is None:
        _fail("a capsule already named used_dltensor_versioned was imported")
    return refusal


@rule("consumer.read-only", "READ_ONLY gives a read-only array (or a copy)")
def c_read_only(fw):
    p = _producer(flags=READ_ONLY)
    out = fw.from_dlpack(p)
    if fw.immutable:
        return "its arrays are immutable"
    writable = fw.writable(out) if fw.writable else None
    if writable is None:
        raise NotApplicable("cannot tell whether its arrays are writable")
    if writable and _pointer_of(out) == p.data_address:
        _fail("a READ_ONLY capsule became a writable array sharing its memory")
    return "copied" if writable else None


@rule("consumer.zero-d", "ndim 0 with NULL shape and strides")
def c_zero_d(fw):
    np = _np()
    p = _producer(np.int32(7), shape=())
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != np.int32(7).tobytes():
        _fail("0-d import (NULL shape and strides) read another value")


@rule("consumer.null-strides", "NULL strides mean C-contiguous")
def c_null_strides(fw):
    np = _np()
    values = np.arange(6).reshape(2, 3)
    p = _producer(values, strides=None, minor=0)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("NULL strides not read as C-contiguous")


@rule("consumer.byte-offset", "byte_offset is honoured")
def c_byte_offset(fw):
    np = _np()
    p = _producer(np.arange(4), byte_offset=16)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("byte_offset not honoured")


@rule("consumer.zero-size", "size 0 with a NULL data pointer")
def c_zero_size(fw):
    np = _np()
    p = _producer(np.zeros(0), shape=(0,), null_data=True)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != b"":
        _fail("a size-0 import holds data")


def _consumer_layout_rule(strides, shape, expected, start=0):
    def rule(fw):
        np = _np()
        base = np.arange(8)
        p = _producer(base, shape=shape, strides=strides, shift=start * 4)
        try:
            out = fw.from_dlpack(p)
        except BufferError as e:
            return f"refused with BufferError ({e})"
        except Exception as e:
            _fail(
                f"refused with {type(e).__name__}, where the standard says BufferError: "
                f"{str(e).splitlines()[0][:80] if str(e) else ''}"
            )
        got = _bytes_of(fw, out)
        if got != np.asarray(expected, np.int32).tobytes():
            _fail(
                f"strides {strides} read as {np.frombuffer(got, np.int32).tolist()}, "
                f"expected {list(expected)}"
            )

    return rule


register(
    "consumer.negative-strides",
    _consumer_layout_rule((-1,), (4,), [3, 2, 1, 0], 3),
    "negative strides (or a BufferError)",
)
register(
    "consumer.zero-strides",
    _consumer_layout_rule((0,), (3,), [0, 0, 0]),
    "zero strides (or a BufferError)",
)
register(
    "consumer.non-compact-strides",
    _consumer_layout_rule((2,), (3,), [0, 2, 4]),
    "non-compact strides (or a BufferError)",
)


def _consumer_dtype_rule(name):
    def rule(fw):
        try:
            _numpy_dtype(name)
        except (ImportError, AttributeError, TypeError):
            raise NotApplicable(f"ml_dtypes cannot make {name} values here") from None
        values = _values(4)
        p = _producer(values, dtype=name)
        try:
            out = fw.from_dlpack(p)
        except (BufferError, TypeError, ValueError, NotImplementedError) as e:
            if name in fw.dtypes:
                _fail(f"refuses {name}, which it has ({type(e).__name__})")
            return f"refused ({type(e).__name__}); it has no {name}"
        except Exception as e:
            _fail(
                f"refused {name} with {type(e).__name__}, where the standard says "
                f"BufferError: {str(e).splitlines()[0][:80] if str(e) else ''}"
            )
        if _bytes_of(fw, out) != p.payload:
            _fail(f"{name} imported with other bytes")

    return rule


register("consumer.dtype-bool", _consumer_dtype_rule("bool"), "bool")
register("consumer.dtype-complex64", _consumer_dtype_rule("complex64"), "complex64")
register("consumer.dtype-bfloat16", _consumer_dtype_rule("bfloat16"), "bfloat16")
register("consumer.dtype-float8", _consumer_dtype_rule("float8_e4m3fn"), "float8_e4m3fn")


@rule(
    "consumer.subbyte-padded",
    "padded float4 data (IS_SUBBYTE_TYPE_PADDED) reads one element per byte, or is refused",
)
def c_subbyte_padded(fw):
    try:
        _numpy_dtype("float4_e2m1fn")
    except (ImportError, AttributeError, TypeError):
        raise NotApplicable("ml_dtypes cannot make float4_e2m1fn values here") from None
    values = _np().array([0.5, 1.0, 1.5, 2.0, 3.0])
    # ml_dtypes holds one float4 per byte: that is the padded layout.
    p = _producer(values, dtype="float4_e2m1fn", flags=IS_SUBBYTE_TYPE_PADDED)
    try:
        out = fw.from_dlpack(p)
    except (BufferError, TypeError, ValueError, NotImplementedError) as e:
        return f"refused ({type(e).__name__})"
    except Exception as e:
        _fail(f"refused with {type(e).__name__}, where the standard says BufferError")
    codes = [b & 0xF for b in p.payload]
    packed = bytes(
        codes[i] | (codes[i + 1] << 4 if i + 1 < len(codes) else 0) for i in range(0, len(codes), 2)
    )
    if _bytes_of(fw, out) != packed:
        _fail("padded data read as packed: the values differ (the flag was ignored)")


@rule("consumer.copy-true", "copy=True does not share the producer's memory")
def c_copy_true(fw):
    p = _producer()
    try:
        out = fw.from_dlpack(p, copy=True)
    except TypeError as e:
        raise NotApplicable(f"from_dlpack takes no copy= ({e})") from None
    pointer = _pointer_of(out)
    if pointer is None:
        raise NotApplicable("its arrays cannot be exported to compare memory")
    if _bytes_of(fw, out) != p.payload:
        _fail("copy=True import holds other values")
    # This producer honours copy= (flagging IS_COPIED); a consumer that does not pass it on
    # must copy itself.
    if (p.kwargs or {}).get("copy") is not True and pointer == p.data_address:
        _fail("copy=True neither passed on nor honoured: the import shares the producer's memory")
    return "passed on to the producer" if (p.kwargs or {}).get("copy") is True else "copied"


def _malformed_rule(what, **fields):
    def rule(fw):
        p = _producer(**fields)
        refusal, calls = _refuses(fw, p, what)
        if refusal is None:
            _fail(f"{what}: imported without complaint (deleter ran {calls}×)")
        return refusal

    return rule


register(
    "consumer.malformed-name",
    _malformed_rule("wrong name", name="not_a_dltensor"),
    "a capsule of another name is refused, its deleter run once",
)
register(
    "consumer.malformed-major-2",
    _malformed_rule("major version 2", major=2, force_versioned=True),
    "major version 2 is refused, its deleter run once",
)
register(
    "consumer.malformed-dtype",
    _malformed_rule("dtype code 99", code=99),
    "an unknown dtype code is refused",
)
register(
    "consumer.malformed-device",
    _malformed_rule("device type 99", device_type=99),
    "an unknown device type is refused",
)
register(
    "consumer.malformed-null-shape",
    _malformed_rule("NULL shape", shape=(2, 2), null_shape=True),
    "a NULL shape with ndim > 0 is refused",
)
register(
    "consumer.malformed-overflow",
    _malformed_rule("overflowing extents", shape=(2**62, 2**62)),
    "extents whose product overflows are refused",
)
register(
    "consumer.malformed-negative-dim",
    _malformed_rule("a negative dimension", shape=(-3,)),
    "a negative dimension is refused",
)
register(
    "consumer.malformed-null-data",
    _malformed_rule("NULL data, 4 elements", null_data=True),
    "NULL data with elements is refused",
)
register(
    "consumer.malformed-ndim",
    _malformed_rule("ndim -1", ndim_override=-1),
    "a negative ndim is refused",
)
