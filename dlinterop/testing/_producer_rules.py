"""The producer rules on what an export holds: a framework's arrays' __dlpack__ and
__dlpack_device__ against DLPack 1.3 (https://dmlc.github.io/dlpack/latest/python_spec.html).
The rules on ownership and the C exchange table follow in _producer_ownership_rules."""

from dlinterop.testing._frameworks.dtypes import _ML_DTYPES, _SUB_BYTE_INTS, _np, _numpy_dtype
from dlinterop.testing._helpers import (
    _capsule_bytes,
    _capsule_codes,
    _code,
    _expected_bytes,
    _expected_codes,
    _export,
    _native,
    _values,
    _versioned,
)
from dlinterop.testing._model import (
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    KNOWN_FLAGS,
    READ_ONLY,
    NotApplicable,
    _fail,
    register,
    rule,
)


@rule("producer.device", "__dlpack_device__() is a (type, index) pair matching the capsule")
def p_device(fw):
    x = fw.make(_values(), "float32")
    device = x.__dlpack_device__()
    if not (
        isinstance(device, tuple) and len(device) == 2 and all(isinstance(v, int) for v in device)
    ):
        _fail(f"__dlpack_device__() returned {device!r}, not a (device_type, index) tuple")
    _, info = _export(x, max_version=(1, 3))
    if "device" in info and tuple(int(v) for v in device) != info["device"]:
        _fail(f"__dlpack_device__() says {device}, the capsule {info['device']}")


def _name_rule(max_version, expect_versioned):
    def rule(fw):
        x = fw.make(_values(), "float32")
        kwargs = {} if max_version == "none" else {"max_version": max_version}
        _, info = _export(x, **kwargs)
        want = "dltensor_versioned" if expect_versioned else "dltensor"
        if expect_versioned and info["name"] == "dltensor":
            # "may return a capsule of version max_version (recommended ...), or of a
            # different version": see producer.versioned-recommended.
            return "a legacy capsule (allowed; versioned is recommended)"
        if info["name"] != want:
            _fail(
                f"max_version={kwargs.get('max_version')}: capsule named {info['name']!r}, "
                f"expected {want!r}"
            )
        if expect_versioned:
            major, minor = info["version"]
            if major != 1:
                _fail(f"versioned capsule of major version {major} for max_version={max_version}")
            if max_version[0] == 1 and minor > max_version[1]:
                # Allowed: the standard recommends max_version itself, permits another, and
                # leaves the check to the consumer (1.x minors are ABI compatible).
                return f"gives (1, {minor}), newer than asked (allowed)"

    return rule


register(
    "producer.default-legacy",
    _name_rule("none", False),
    "__dlpack__() without max_version gives a legacy 'dltensor' capsule",
)
register(
    "producer.max-version-0.8",
    _name_rule((0, 8), False),
    "max_version=(0, 8) gives a legacy capsule",
)
register(
    "producer.max-version-1.0",
    _name_rule((1, 0), True),
    "max_version=(1, 0) gives a versioned 1.x capsule",
)
register(
    "producer.max-version-1.3",
    _name_rule((1, 3), True),
    "max_version=(1, 3) gives a versioned 1.x capsule",
)
register(
    "producer.max-version-1.99",
    _name_rule((1, 99), True),
    "max_version=(1, 99) gives a versioned 1.x capsule",
)
register(
    "producer.max-version-2.0",
    _name_rule((2, 0), True),
    "max_version=(2, 0) gives the newest 1.x capsule it has",
)


@rule(
    "producer.versioned-recommended",
    "max_version=(1, 3) gets a versioned capsule, as the standard recommends",
)
def p_versioned_recommended(fw):
    x = fw.make(_values(), "float32")
    _, info = _export(x, max_version=(1, 3))
    if info["name"] != "dltensor_versioned":
        _fail(
            f"max_version=(1, 3) answered with {info['name']!r}: a consumer asking for 1.x "
            "cannot learn READ_ONLY or IS_COPIED"
        )


@rule("producer.keyword-only", "__dlpack__ takes keywords only")
def p_keyword_only(fw):
    x = fw.make(_values(), "float32")
    try:
        x.__dlpack__(None)
    except TypeError:
        return
    _fail("__dlpack__(None) accepted a positional argument (keyword-only by the standard)")


@rule("producer.unknown-keyword", "an unknown keyword raises TypeError")
def p_unknown_keyword(fw):
    x = fw.make(_values(), "float32")
    try:
        x.__dlpack__(max_version=(1, 3), no_such_keyword=1)
    except TypeError:
        return
    _fail("an unknown keyword was accepted (TypeError expected)")


@rule("producer.stream-none", "stream=None is accepted for CPU memory")
def p_stream_none(fw):
    x = fw.make(_values(), "float32")
    x.__dlpack__(stream=None, max_version=(1, 3))


@rule("producer.stream-int-cpu", "an int stream for CPU memory is refused")
def p_stream_int_cpu(fw):
    # "On CPU and other device types without streams, only None is accepted."
    x = fw.make(_values(), "float32")
    try:
        x.__dlpack__(stream=1, max_version=(1, 3))
    except SystemError as e:
        _fail(f"SystemError: {e}")
    except Exception as e:
        return f"refused ({type(e).__name__})"
    _fail("stream=1 accepted for CPU memory (only None is, by the standard)")


@rule("producer.copy-true", "copy=True gives fresh memory flagged IS_COPIED")
def p_copy_true(fw):
    values = _values()
    x = fw.make(values, "float32")
    try:
        capsule, info = _versioned(x, copy=True)
    except TypeError as e:
        _fail(f"copy=True not accepted: {e}")
    except BufferError as e:
        return f"refused with BufferError ({e}), as the standard allows"
    _, shared = _versioned(x)
    if not info["flags"] & IS_COPIED:
        _fail("copy=True export without the IS_COPIED flag")
    if info["data"] + info["byte_offset"] == shared["data"] + shared["byte_offset"]:
        _fail("copy=True shares the source's memory")
    if _capsule_bytes(capsule, info) != _expected_bytes(values, "float32"):
        _fail("copy=True export holds other values")


@rule("producer.copy-false", "copy=False shares")
def p_copy_false(fw):
    x = fw.make(_values(), "float32")
    _, a = _versioned(x, copy=False)
    _, b = _versioned(x)
    if a["flags"] & IS_COPIED or a["data"] + a["byte_offset"] != b["data"] + b["byte_offset"]:
        _fail("copy=False did not share the source's memory")


@rule("producer.dl-device-same", "dl_device= its own device shares")
def p_dl_device_same(fw):
    x = fw.make(_values(), "float32")
    _, a = _versioned(x, dl_device=tuple(x.__dlpack_device__()))
    _, b = _versioned(x)
    if a["data"] + a["byte_offset"] != b["data"] + b["byte_offset"]:
        _fail("dl_device= its own device copied instead of sharing")


@rule("producer.read-only", "read-only memory is flagged READ_ONLY")
def p_read_only(fw):
    if fw.immutable:
        x = fw.make(_values(), "float32")
        _, info = _versioned(x)
        if not info["flags"] & READ_ONLY:
            _fail("immutable arrays exported without READ_ONLY (a consumer may write them)")
        return None
    if fw.readonly is None:
        raise NotApplicable(f"{fw.name} has no read-only arrays")
    x = fw.readonly(_values())
    _, info = _versioned(x)
    if not info["flags"] & READ_ONLY:
        _fail("a read-only array exported without the READ_ONLY flag")


@rule("producer.strides-filled", "strides are non-NULL for ndim > 0")
def p_strides_filled(fw):
    x = fw.make(_values().reshape(2, 3), "float32")
    _, info = _versioned(x)
    if info["strides"] is None:
        _fail("NULL strides for ndim > 0 in a versioned capsule (DLPack 1.2+ requires them)")


@rule("producer.zero-d", "a 0-d array exports with its value")
def p_zero_d(fw):
    np = _np()
    x = fw.make(np.array(3.0), "float64")
    capsule, info = _versioned(x)
    if info["ndim"] != 0:
        _fail(f"0-d array exported with ndim {info['ndim']}")
    if _native().read(capsule, 8) != np.float64(3.0).tobytes():
        _fail("0-d array exported with another value")


@rule("producer.zero-size", "a size-0 array exports with its shape")
def p_zero_size(fw):
    x = fw.make(_np().zeros((0, 3)), "float32")
    _, info = _versioned(x)
    if info["shape"] != (0, 3):
        _fail(f"size-0 (0, 3) array exported with shape {info['shape']}")


@rule("producer.values", "dtype, shape and bytes are the array's")
def p_values(fw):
    values = _values().reshape(2, 3)
    x = fw.make(values, "float32")
    capsule, info = _versioned(x)
    if info["dtype"] != _code("float32") or info["shape"] != (2, 3):
        _fail(f"float32 (2, 3) exported as dtype {info['dtype']} shape {info['shape']}")
    if _capsule_bytes(capsule, info) != _expected_bytes(values, "float32"):
        _fail("exported bytes differ from the array's")


def _dtype_rule(names):
    def rule(fw):
        have = [n for n in names if n in fw.dtypes]
        if not have:
            raise NotApplicable(f"{fw.name} has none of {', '.join(names)}")
        checked = []
        for name in have:
            try:
                _numpy_dtype(name)
            except (ImportError, AttributeError, TypeError):
                continue
            values = _values(5) - (3 if name.startswith("int") else 0)
            if name in ("int1", "uint1"):
                values = values % 2 - (1 if name == "int1" else 0)
            elif name in ("int2", "uint2"):
                values = values % 4 - (2 if name == "int2" else 0)
            try:
                x = fw.make(values, name)
            except Exception:
                continue  # the framework cannot make these values here: nothing to check
            capsule, info = _versioned(x)
            if info["dtype"] != _code(name):
                _fail(f"{name} exported as DLPack dtype {info['dtype']}, expected {_code(name)}")
            if _code(name)[1] >= 8:
                if _capsule_bytes(capsule, info) != _expected_bytes(values, name):
                    _fail(f"{name} exported with other bytes")
            elif _capsule_codes(capsule, info) != _expected_codes(values, name):
                # Sub-byte data is packed unless the producer sets the padded flag.
                layout = "padded" if info["flags"] & IS_SUBBYTE_TYPE_PADDED else "packed"
                _fail(f"{name} read as {layout} (as its flags say) gives other values")
            checked.append(name)
        if not checked:
            raise NotApplicable(f"neither {fw.name} nor ml_dtypes can make these values here")
        return "checked " + ", ".join(checked)

    return rule


register("producer.dtype-bool", _dtype_rule(["bool"]), "bool is (6, 8, 1)")
register(
    "producer.dtype-integers",
    _dtype_rule(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]),
    "every integer type it has",
)
register("producer.dtype-floats", _dtype_rule(["float16", "float32", "float64"]), "float16/32/64")
register(
    "producer.dtype-complex",
    _dtype_rule(["complex64", "complex128"]),
    "complex64/128 as kDLComplex",
)
register("producer.dtype-bfloat16", _dtype_rule(["bfloat16"]), "bfloat16 as kDLBfloat")
register(
    "producer.dtype-float8",
    _dtype_rule([n for n in _ML_DTYPES if n.startswith("float8")]),
    "every float8 type it has",
)
register(
    "producer.dtype-float6-float4",
    _dtype_rule(["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"]),
    "float6 and float4 types it has, read back exactly, packed or padded as flagged",
)
register(
    "producer.dtype-subbyte-integers",
    _dtype_rule(list(_SUB_BYTE_INTS)),
    "int1/2/4 and uint1/2/4 it has, read back exactly, packed or padded as flagged",
)


@rule("producer.flags-known", "a versioned capsule sets no flag bit DLPack does not define")
def p_flags_known(fw):
    _, info = _versioned(fw.make(_values(), "float32"))
    unknown = info["flags"] & ~KNOWN_FLAGS
    if unknown:
        _fail(
            f"flags {info['flags']:#x} set bits DLPack does not define ({unknown:#x}); a "
            "consumer cannot know what they change"
        )


@rule(
    "producer.unexportable-buffer-error",
    "a type it cannot export raises BufferError, not TypeError",
)
def p_unexportable_buffer_error(fw):
    if fw.unexportable is None:
        raise NotApplicable(f"{fw.name} holds only types DLPack carries")
    x = fw.unexportable()
    try:
        x.__dlpack__(max_version=(1, 3))
    except BufferError as e:
        return f"BufferError ({str(e).splitlines()[0][:60] if str(e) else ''})"
    except TypeError as e:
        _fail(
            f"TypeError for a type it cannot export: a consumer takes TypeError for 'no "
            f"max_version keyword' and retries the deprecated unversioned call ({e})"
        )
    except Exception as e:
        _fail(
            f"{type(e).__name__} where the standard says BufferError: "
            f"{str(e).splitlines()[0][:80] if str(e) else ''}"
        )
    else:
        _fail(f"exported {type(x).__name__}, which was meant to be a type it cannot export")


def _layout_rule(kind, expected):
    def rule(fw):
        if fw.view is None:
            raise NotApplicable(f"{fw.name}: no way to make a {kind} view")
        try:
            x = fw.view(kind, _np().arange(1.0, 9.0))
        except Exception as e:
            raise NotApplicable(f"{fw.name} cannot make a {kind} view here ({e})") from None
        if x is None:
            raise NotApplicable(f"{fw.name} has no {kind} views")
        try:
            _, info = _versioned(x)
        except BufferError as e:
            return f"refused with BufferError ({e})"
        if info["strides"] != expected:
            _fail(f"{kind} view exported with strides {info['strides']}, expected {expected}")

    return rule


register(
    "producer.negative-strides",
    _layout_rule("reversed", (-1,)),
    "a reversed view exports stride -1 (or is refused with BufferError)",
)
register(
    "producer.zero-strides",
    _layout_rule("broadcast", (0,)),
    "a broadcast view exports stride 0 (or is refused with BufferError)",
)
register(
    "producer.non-compact-strides",
    _layout_rule("strided", (2,)),
    "a strided view exports stride 2 (or is refused with BufferError)",
)
