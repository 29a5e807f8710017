"""dlinterop.testing: a DLPack conformance checker for any producer and consumer.

    python -m dlinterop check numpy torch jax          # a table on the terminal
    python -m dlinterop check numpy --json out.json    # and the results as JSON
    python -m dlinterop check mypkg.testing:framework  # a framework described by a callable

Each framework is checked as a **producer** (its arrays' ``__dlpack__`` and
``__dlpack_device__``, its C exchange table) and as a **consumer** (its ``from_dlpack``, fed
by producers built natively to order, well-formed and malformed), one named rule at a time,
against DLPack 1.3, its Python specification and the array API standard. A rule passes,
fails (with a one-line reason) or does not apply (n/a, with why). Rules run in a child
process, so a framework that crashes fails that rule, not the run.

From another project's tests::

    from dlinterop.testing import assert_conforms, check_consumer, check_producer
    assert_conforms(check_producer("numpy"), allow={"producer.default-legacy"})

A framework is a builtin name (see FRAMEWORKS), ``"module:callable"`` (the callable
returns a Framework; it runs in the child process too), or a Framework object (checked in
this process).
"""
from __future__ import annotations

import dataclasses
import gc
import importlib
import json
import os
import subprocess
import sys
import weakref
from typing import Any, Callable, Iterable

__all__ = ["Framework", "NotApplicable", "Report", "Result", "RULES", "FRAMEWORKS",
           "assert_conforms", "check", "check_consumer", "check_producer", "framework",
           "main"]

READ_ONLY = 1 << 0
IS_COPIED = 1 << 1
ROLES = ("producer", "consumer")


class NotApplicable(Exception):
    """Raised by a rule that does not apply to the framework; the message says why."""


class RuleFailure(AssertionError):
    """Raised by a rule that the framework breaks; the message says how."""


def _fail(reason):
    raise RuleFailure(reason)


@dataclasses.dataclass(frozen=True)
class Result:
    rule: str
    framework: str
    role: str
    result: str          # "pass", "fail" or "n/a"
    reason: str = ""


@dataclasses.dataclass
class Report:
    """The results of checking one framework (in one or both roles)."""
    framework: str
    results: list

    def counts(self):
        out = {"pass": 0, "fail": 0, "n/a": 0}
        for r in self.results:
            out[r.result] += 1
        return out

    def failures(self):
        return [r for r in self.results if r.result == "fail"]

    def as_dict(self):
        return {"results": [dataclasses.asdict(r) for r in self.results]}

    def __bool__(self):
        return not self.failures()


# ---- frameworks (peers imported by name: type checkers of an installation without them
# must not look for them) ---------------------------------------------------------------------------

@dataclasses.dataclass
class Framework:
    """What the checker needs of a framework.

    make(values, dtype): a new array of this framework with the values of the NumPy array
    `values` cast to `dtype` (a dlinterop dtype name: "float32", "bfloat16", ...).
    dtypes: the dtype names it has. from_dlpack(obj, **kwargs): its consumer.
    view(kind, values): an array of the framework whose layout is `kind` ("reversed",
    "strided", "broadcast") over `values`, or None when it cannot make one.
    readonly(values): a read-only array, or None when it has none. writable(obj): whether
    an array may be written (None: cannot say). Missing optional parts make their rules n/a.
    """
    name: str
    make: Callable[[Any, str], Any]
    from_dlpack: Callable[..., Any]
    dtypes: frozenset
    view: Callable[[str, Any], Any] | None = None
    readonly: Callable[[Any], Any] | None = None
    writable: Callable[[Any], bool | None] | None = None
    immutable: bool = False       # its arrays can never be written (JAX, array-api-strict)


_STANDARD = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64", "float16", "float32", "float64", "complex64", "complex128")
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
              "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e8m0fnu",
              "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")


def _np():
    return importlib.import_module("numpy")


def _numpy_dtype(name):
    np = _np()
    if name in _STANDARD:
        return np.dtype(name if name != "bool" else "bool")
    return np.dtype(getattr(importlib.import_module("ml_dtypes"), name))


def _numpy_framework():
    np = _np()

    def view(kind, values):
        base = np.array(values)
        if kind == "reversed":
            return base[::-1]
        if kind == "strided":
            return base[::2]
        if kind == "broadcast":
            return np.broadcast_to(base[:1], (4,))
        return None

    def readonly(values):
        a = np.array(values)
        a.flags.writeable = False
        return a

    return Framework("numpy", lambda v, d: np.asarray(v).astype(_numpy_dtype(d)), np.from_dlpack,
                     frozenset(_STANDARD), view, readonly, lambda a: bool(a.flags.writeable))


def _torch_framework():
    torch = importlib.import_module("torch")
    np = _np()
    names = [n for n in _STANDARD + _ML_DTYPES if n != "float8_e4m3" and
             isinstance(getattr(torch, n if n != "bool" else "bool", None), torch.dtype)]

    def make(values, dtype):
        target = getattr(torch, dtype)
        base = np.asarray(values)
        if base.dtype.kind in "biu" and dtype in _STANDARD:
            return torch.from_numpy(base.astype(_numpy_dtype(dtype)).copy())
        return torch.from_numpy(base.astype(np.complex128 if base.dtype.kind == "c"
                                            else np.float64).copy()).to(target)

    def view(kind, values):
        base = torch.from_numpy(np.array(values))
        if kind == "strided":
            return base[::2]
        if kind == "broadcast":
            return base[:1].expand(4)
        return None     # torch has no negative strides

    return Framework("torch", make, torch.from_dlpack, frozenset(names), view, None,
                     lambda x: True)


def _jax_framework():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = importlib.import_module("jax")
    jnp = importlib.import_module("jax.numpy")
    np = _np()
    jax.config.update("jax_enable_x64", True)
    names = [n for n in _STANDARD + _ML_DTYPES if hasattr(jnp, n if n != "bool" else "bool_")]

    def make(values, dtype):
        return jnp.asarray(np.asarray(values).astype(_numpy_dtype(dtype)))

    return Framework("jax", make, jnp.from_dlpack, frozenset(names), None, None,
                     lambda x: False, immutable=True)


def _tvm_ffi_framework():
    tvm_ffi = importlib.import_module("tvm_ffi")
    numpy = _numpy_framework()

    def make(values, dtype):
        return tvm_ffi.from_dlpack(numpy.make(values, dtype))

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else tvm_ffi.from_dlpack(v)

    return Framework("tvm_ffi", make, tvm_ffi.from_dlpack, numpy.dtypes, view)


def _array_api_strict_framework():
    xp = importlib.import_module("array_api_strict")
    np = _np()
    names = [n for n in _STANDARD if hasattr(xp, n)]

    def make(values, dtype):
        return xp.asarray(np.asarray(values).astype(_numpy_dtype(dtype)))

    def writable(x):
        inner = getattr(x, "_array", None)
        return None if inner is None else bool(inner.flags.writeable)

    return Framework("array_api_strict", make, xp.from_dlpack, frozenset(names),
                     None, None, writable)


def _dlinterop_framework():
    import dlinterop as dl
    numpy = _numpy_framework()
    np = _np()

    def make(values, dtype):
        base = np.asarray(values)
        if dtype in _STANDARD:
            return dl.from_dlpack(base.astype(_numpy_dtype(dtype))).copy()
        return dl.asarray(base.astype(_numpy_dtype(dtype))).copy()

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else dl.from_dlpack(v)

    def readonly(values):
        return dl.from_dlpack(numpy.readonly(values))

    return Framework("dlinterop", make, dl.from_dlpack,
                     frozenset(_STANDARD + _ML_DTYPES + ("complex32",)), view, readonly,
                     lambda t: not t.readonly)


def _cupy_framework():
    cupy = importlib.import_module("cupy")
    np = _np()
    return Framework("cupy", lambda v, d: cupy.asarray(np.asarray(v).astype(_numpy_dtype(d))),
                     cupy.from_dlpack, frozenset(n for n in _STANDARD if n != "bool") | {"bool"})


FRAMEWORKS = {
    "numpy": _numpy_framework, "torch": _torch_framework, "jax": _jax_framework,
    "tvm_ffi": _tvm_ffi_framework, "array_api_strict": _array_api_strict_framework,
    "dlinterop": _dlinterop_framework, "cupy": _cupy_framework,
}


def framework(spec):
    """A Framework from a builtin name, "module:callable" or a Framework (returned as is)."""
    if isinstance(spec, Framework):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a framework is a name, 'module:callable' or a Framework, got "
                        f"{type(spec).__name__}")
    if ":" in spec:
        module, _, attribute = spec.partition(":")
        made = getattr(importlib.import_module(module), attribute)()
        if not isinstance(made, Framework):
            raise TypeError(f"{spec} returned {type(made).__name__}, not a "
                            "dlinterop.testing.Framework")
        return made
    if spec not in FRAMEWORKS:
        raise ValueError(f"unknown framework {spec!r}; builtin ones: {', '.join(FRAMEWORKS)}"
                         " (or give module:callable)")
    return FRAMEWORKS[spec]()


# ---- helpers used by the rules ---------------------------------------------------------

def _native():
    from dlinterop import _conformance
    return _conformance


def _code(name):
    import dlinterop as dl
    d = dl.dtype(name)
    return (d.code, d.bits, d.lanes)


def _values(n=6):
    return _np().arange(n, dtype=_np().float64) % 5 + 1


def _export(x, **kwargs):
    capsule = x.__dlpack__(**kwargs)
    info = _native().inspect(capsule)
    return capsule, info


def _nbytes(info):
    count = 1
    for extent in info["shape"] or ():
        count *= extent
    return (count * info["dtype"][1] * info["dtype"][2] + 7) // 8


def _expected_bytes(values, dtype):
    return _np().ascontiguousarray(_np().asarray(values).astype(_numpy_dtype(dtype))).tobytes()


def _capsule_bytes(capsule, info):
    """The bytes a C-contiguous capsule shows, read without consuming it."""
    if info["strides"] is not None and info["ndim"] > 0:
        step = 1
        for extent, stride in reversed(list(zip(info["shape"], info["strides"]))):
            if extent > 1 and stride != step:
                _fail(f"expected C-contiguous strides, got {info['strides']}")
            step *= extent
    return _native().read(capsule, _nbytes(info))


def _versioned(x, **kwargs):
    capsule, info = _export(x, max_version=(1, 3), **kwargs)
    if not info.get("versioned"):
        raise NotApplicable(f"no versioned capsule for max_version=(1, 3) (got {info['name']!r})")
    return capsule, info


def _has(fw, dtype):
    if dtype not in fw.dtypes:
        raise NotApplicable(f"{fw.name} has no {dtype}")
    try:
        _numpy_dtype(dtype)
    except (ImportError, AttributeError, TypeError):
        raise NotApplicable(f"ml_dtypes cannot make {dtype} values here") from None


# ---- producer rules ---------------------------------------------------------------------

def p_device(fw):
    x = fw.make(_values(), "float32")
    device = x.__dlpack_device__()
    if not (isinstance(device, tuple) and len(device) == 2
            and all(isinstance(v, int) for v in device)):
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
            _fail(f"max_version={kwargs.get('max_version')}: capsule named {info['name']!r}, "
                  f"expected {want!r}")
        if expect_versioned:
            major, minor = info["version"]
            if major != 1:
                _fail(f"versioned capsule of major version {major} for max_version={max_version}")
            if max_version[0] == 1 and minor > max_version[1]:
                # Allowed: the standard recommends max_version itself, permits another, and
                # leaves the check to the consumer (1.x minors are ABI compatible).
                return f"gives (1, {minor}), newer than asked (allowed)"
    return rule


def p_versioned_recommended(fw):
    x = fw.make(_values(), "float32")
    _, info = _export(x, max_version=(1, 3))
    if info["name"] != "dltensor_versioned":
        _fail(f"max_version=(1, 3) answered with {info['name']!r}: a consumer asking for 1.x "
              "cannot learn READ_ONLY or IS_COPIED")


def p_keyword_only(fw):
    x = fw.make(_values(), "float32")
    try:
        x.__dlpack__(None)
    except TypeError:
        return
    _fail("__dlpack__(None) accepted a positional argument (keyword-only by the standard)")


def p_unknown_keyword(fw):
    x = fw.make(_values(), "float32")
    try:
        x.__dlpack__(max_version=(1, 3), no_such_keyword=1)
    except TypeError:
        return
    _fail("an unknown keyword was accepted (TypeError expected)")


def p_stream_none(fw):
    x = fw.make(_values(), "float32")
    x.__dlpack__(stream=None, max_version=(1, 3))


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


def p_copy_false(fw):
    x = fw.make(_values(), "float32")
    _, a = _versioned(x, copy=False)
    _, b = _versioned(x)
    if a["flags"] & IS_COPIED or a["data"] + a["byte_offset"] != b["data"] + b["byte_offset"]:
        _fail("copy=False did not share the source's memory")


def p_dl_device_same(fw):
    x = fw.make(_values(), "float32")
    _, a = _versioned(x, dl_device=tuple(x.__dlpack_device__()))
    _, b = _versioned(x)
    if a["data"] + a["byte_offset"] != b["data"] + b["byte_offset"]:
        _fail("dl_device= its own device copied instead of sharing")


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


def p_strides_filled(fw):
    x = fw.make(_values().reshape(2, 3), "float32")
    _, info = _versioned(x)
    if info["strides"] is None:
        _fail("NULL strides for ndim > 0 in a versioned capsule (DLPack 1.2+ requires them)")


def p_zero_d(fw):
    np = _np()
    x = fw.make(np.array(3.0), "float64")
    capsule, info = _versioned(x)
    if info["ndim"] != 0:
        _fail(f"0-d array exported with ndim {info['ndim']}")
    if _native().read(capsule, 8) != np.float64(3.0).tobytes():
        _fail("0-d array exported with another value")


def p_zero_size(fw):
    x = fw.make(_np().zeros((0, 3)), "float32")
    _, info = _versioned(x)
    if info["shape"] != (0, 3):
        _fail(f"size-0 (0, 3) array exported with shape {info['shape']}")


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
            values = _values(4)
            x = fw.make(values, name)
            capsule, info = _versioned(x)
            if info["dtype"] != _code(name):
                _fail(f"{name} exported as DLPack dtype {info['dtype']}, expected {_code(name)}")
            if _code(name)[1] >= 8:     # sub-byte types: packing is the producer's choice
                if _capsule_bytes(capsule, info) != _expected_bytes(values, name):
                    _fail(f"{name} exported with other bytes")
            checked.append(name)
        if not checked:
            raise NotApplicable("ml_dtypes cannot make these values here")
        return "checked " + ", ".join(checked)
    return rule


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


def p_keeps_source(fw):
    values = _values()
    x = fw.make(values, "float32")
    capsule, info = _versioned(x)
    del x
    gc.collect()
    if _capsule_bytes(capsule, info) != _expected_bytes(values, "float32"):
        _fail("the capsule's memory changed once the array was dropped")


def _weak(fw, x):
    try:
        return weakref.ref(x)
    except TypeError:
        raise NotApplicable(f"{type(x).__name__} objects take no weak references") from None


def p_deleter_unconsumed(fw):
    x = fw.make(_values(), "float32")
    capsule, _ = _versioned(x)
    ref = _weak(fw, x)
    del x
    gc.collect()
    if ref() is None:
        return "the array was freed while its capsule lived (it holds another owner)"
    del capsule
    gc.collect()
    if ref() is not None:
        _fail("an unconsumed capsule died without releasing the array (deleter not called)")


def p_deleter_consumed(fw):
    x = fw.make(_values(), "float32")
    capsule, _ = _versioned(x)
    ref = _weak(fw, x)
    del x
    if not _native().consume(capsule):
        _fail("capsule could not be consumed")
    del capsule      # renamed used_*: its destructor must not call the deleter again
    gc.collect()
    if ref() is not None:
        _fail("the deleter did not release the array")


def p_exchange_table(fw):
    x = fw.make(_values(), "float32")
    table = _native().exchange_table(type(x))
    if table is None:
        raise NotApplicable(f"{type(x).__name__} publishes no __dlpack_c_exchange_api__")
    if table.get("kind") != "capsule" or table.get("name") != "dlpack_exchange_api":
        _fail(f"__dlpack_c_exchange_api__ is not a 'dlpack_exchange_api' capsule: {table}")
    if table["version"][0] != 1:
        _fail(f"exchange table of version {table['version']}")
    missing = [k for k, v in table["functions"].items() if not v]
    if missing:
        _fail("exchange table lacks " + ", ".join(missing))


def p_exchange_round_trip(fw):
    x = fw.make(_values(), "float32")
    if _native().exchange_table(type(x)) is None:
        raise NotApplicable(f"{type(x).__name__} publishes no __dlpack_c_exchange_api__")
    _, reference = _versioned(x)
    managed, back, view = _native().exchange_round_trip(x)
    pointer = reference["data"] + reference["byte_offset"]
    if managed != pointer or view != pointer:
        _fail("the table's tensors do not share the array's memory")
    if type(back) is not type(x):
        _fail(f"managed_tensor_to_py_object_no_sync made a {type(back).__name__}")


# ---- consumer rules ---------------------------------------------------------------------

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


def c_imports(fw):
    p = _producer()
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("imported values differ from the producer's")
    pointer = _pointer_of(out)
    if pointer is not None and pointer != p.data_address:
        return "copied (allowed where sharing is not possible)"


def c_renames(fw):
    p = _producer()
    out = fw.from_dlpack(p)
    name = _native().inspect(p.capsule)["name"]
    if not name.startswith("used_"):
        _fail(f"capsule left named {name!r} after the import (must be renamed used_*)")
    del out


def c_deleter_once(fw):
    p = _producer()
    out = fw.from_dlpack(p)
    p.capsule = None
    gc.collect()
    copied = _pointer_of(out) not in (None, p.data_address)
    if p.deleter_calls != (1 if copied else 0):
        _fail(f"deleter called {p.deleter_calls}× while the imported array lives "
              f"({'a copy' if copied else 'sharing the memory'})")
    del out
    gc.collect()
    if p.deleter_calls != 1:
        _fail(f"deleter called {p.deleter_calls}× once the imported array died (expected 1)")


def c_max_version(fw):
    p = _producer()
    fw.from_dlpack(p)
    mv = (p.kwargs or {}).get("max_version")
    if mv is None:
        _fail("__dlpack__ called without max_version (array API 2023.12: pass (1, minor))")
    if tuple(mv)[0] != 1:
        _fail(f"max_version={mv} passed (major 1 expected)")
    return f"max_version={tuple(mv)}"


def c_old_signature(fw):
    p = _producer(versioned=False, old_signature=True)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("imported values differ from the producer's")


def c_legacy(fw):
    p = _producer(versioned=False)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("imported values differ from the producer's")


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


def c_consume_once(fw):
    p = _producer(name="used_dltensor_versioned")
    refusal, _ = _refuses(fw, p, "a consumed capsule")
    if refusal is None:
        _fail("a capsule already named used_dltensor_versioned was imported")
    return refusal


def c_read_only(fw):
    np = _np()
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


def c_zero_d(fw):
    np = _np()
    p = _producer(np.int32(7), shape=())
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != np.int32(7).tobytes():
        _fail("0-d import (NULL shape and strides) read another value")


def c_null_strides(fw):
    np = _np()
    values = np.arange(6).reshape(2, 3)
    p = _producer(values, strides=None, minor=0)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("NULL strides not read as C-contiguous")


def c_byte_offset(fw):
    np = _np()
    p = _producer(np.arange(4), byte_offset=16)
    out = fw.from_dlpack(p)
    if _bytes_of(fw, out) != p.payload:
        _fail("byte_offset not honoured")


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
            _fail(f"refused with {type(e).__name__}, where the standard says BufferError: "
                  f"{str(e).splitlines()[0][:80] if str(e) else ''}")
        got = _bytes_of(fw, out)
        if got != np.asarray(expected, np.int32).tobytes():
            _fail(f"strides {strides} read as {np.frombuffer(got, np.int32).tolist()}, "
                  f"expected {list(expected)}")
    return rule


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
            _fail(f"refused {name} with {type(e).__name__}, where the standard says "
                  f"BufferError: {str(e).splitlines()[0][:80] if str(e) else ''}")
        if _bytes_of(fw, out) != p.payload:
            _fail(f"{name} imported with other bytes")
    return rule


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
        _fail("copy=True neither passed on nor honoured: the import shares the producer's "
              "memory")
    return "passed on to the producer" if (p.kwargs or {}).get("copy") is True else "copied"


def _malformed_rule(what, **fields):
    def rule(fw):
        p = _producer(**fields)
        refusal, calls = _refuses(fw, p, what)
        if refusal is None:
            _fail(f"{what}: imported without complaint (deleter ran {calls}×)")
        return refusal
    return rule


def _rules():
    r = []
    P, C = "producer", "consumer"
    r += [("producer.device", P, p_device,
           "__dlpack_device__() is a (type, index) pair matching the capsule"),
          ("producer.default-legacy", P, _name_rule("none", False),
           "__dlpack__() without max_version gives a legacy 'dltensor' capsule"),
          ("producer.max-version-0.8", P, _name_rule((0, 8), False),
           "max_version=(0, 8) gives a legacy capsule"),
          ("producer.max-version-1.0", P, _name_rule((1, 0), True),
           "max_version=(1, 0) gives a versioned 1.x capsule"),
          ("producer.max-version-1.3", P, _name_rule((1, 3), True),
           "max_version=(1, 3) gives a versioned 1.x capsule"),
          ("producer.max-version-1.99", P, _name_rule((1, 99), True),
           "max_version=(1, 99) gives a versioned 1.x capsule"),
          ("producer.max-version-2.0", P, _name_rule((2, 0), True),
           "max_version=(2, 0) gives the newest 1.x capsule it has"),
          ("producer.versioned-recommended", P, p_versioned_recommended,
           "max_version=(1, 3) gets a versioned capsule, as the standard recommends"),
          ("producer.keyword-only", P, p_keyword_only, "__dlpack__ takes keywords only"),
          ("producer.unknown-keyword", P, p_unknown_keyword,
           "an unknown keyword raises TypeError"),
          ("producer.stream-none", P, p_stream_none, "stream=None is accepted for CPU memory"),
          ("producer.stream-int-cpu", P, p_stream_int_cpu,
           "an int stream for CPU memory is refused"),
          ("producer.copy-true", P, p_copy_true,
           "copy=True gives fresh memory flagged IS_COPIED"),
          ("producer.copy-false", P, p_copy_false, "copy=False shares"),
          ("producer.dl-device-same", P, p_dl_device_same,
           "dl_device= its own device shares"),
          ("producer.read-only", P, p_read_only, "read-only memory is flagged READ_ONLY"),
          ("producer.strides-filled", P, p_strides_filled, "strides are non-NULL for ndim > 0"),
          ("producer.zero-d", P, p_zero_d, "a 0-d array exports with its value"),
          ("producer.zero-size", P, p_zero_size, "a size-0 array exports with its shape"),
          ("producer.values", P, p_values, "dtype, shape and bytes are the array's"),
          ("producer.dtype-bool", P, _dtype_rule(["bool"]), "bool is (6, 8, 1)"),
          ("producer.dtype-integers", P,
           _dtype_rule(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]),
           "every integer type it has"),
          ("producer.dtype-floats", P, _dtype_rule(["float16", "float32", "float64"]),
           "float16/32/64"),
          ("producer.dtype-complex", P, _dtype_rule(["complex64", "complex128"]),
           "complex64/128 as kDLComplex"),
          ("producer.dtype-bfloat16", P, _dtype_rule(["bfloat16"]), "bfloat16 as kDLBfloat"),
          ("producer.dtype-float8", P, _dtype_rule([n for n in _ML_DTYPES if n.startswith("float8")]),
           "every float8 type it has"),
          ("producer.dtype-float6-float4", P,
           _dtype_rule(["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"]),
           "float6 and float4 types it has"),
          ("producer.negative-strides", P, _layout_rule("reversed", (-1,)),
           "a reversed view exports stride -1 (or is refused with BufferError)"),
          ("producer.zero-strides", P, _layout_rule("broadcast", (0,)),
           "a broadcast view exports stride 0 (or is refused with BufferError)"),
          ("producer.non-compact-strides", P, _layout_rule("strided", (2,)),
           "a strided view exports stride 2 (or is refused with BufferError)"),
          ("producer.capsule-keeps-source", P, p_keeps_source,
           "the capsule keeps the memory alive after the array is dropped"),
          ("producer.deleter-unconsumed", P, p_deleter_unconsumed,
           "an unconsumed capsule's death releases the array"),
          ("producer.deleter-consumed", P, p_deleter_consumed,
           "a consumed capsule's deleter releases the array, once"),
          ("producer.exchange-api", P, p_exchange_table,
           "the C exchange table, where published: name, version, functions"),
          ("producer.exchange-api-round-trip", P, p_exchange_round_trip,
           "each exchange function on an array shares its memory")]
    r += [("consumer.imports", C, c_imports, "a versioned capsule's values, shared"),
          ("consumer.renames-capsule", C, c_renames, "the capsule is renamed used_*"),
          ("consumer.deleter-once", C, c_deleter_once,
           "the deleter runs once, when the imported array dies"),
          ("consumer.passes-max-version", C, c_max_version, "__dlpack__ gets max_version=(1, x)"),
          ("consumer.old-producer", C, c_old_signature,
           "a producer that rejects max_version with TypeError is asked again without"),
          ("consumer.legacy-capsule", C, c_legacy,
           "a legacy capsule is accepted when a versioned one was asked for"),
          ("consumer.stream-cpu", C, c_stream_cpu, "no stream is passed for CPU memory"),
          ("consumer.consume-once", C, c_consume_once, "a used capsule is refused"),
          ("consumer.read-only", C, c_read_only,
           "READ_ONLY gives a read-only array (or a copy)"),
          ("consumer.zero-d", C, c_zero_d, "ndim 0 with NULL shape and strides"),
          ("consumer.null-strides", C, c_null_strides, "NULL strides mean C-contiguous"),
          ("consumer.byte-offset", C, c_byte_offset, "byte_offset is honoured"),
          ("consumer.zero-size", C, c_zero_size, "size 0 with a NULL data pointer"),
          ("consumer.negative-strides", C, _consumer_layout_rule((-1,), (4,), [3, 2, 1, 0], 3),
           "negative strides (or a BufferError)"),
          ("consumer.zero-strides", C, _consumer_layout_rule((0,), (3,), [0, 0, 0]),
           "zero strides (or a BufferError)"),
          ("consumer.non-compact-strides", C, _consumer_layout_rule((2,), (3,), [0, 2, 4]),
           "non-compact strides (or a BufferError)"),
          ("consumer.dtype-bool", C, _consumer_dtype_rule("bool"), "bool"),
          ("consumer.dtype-complex64", C, _consumer_dtype_rule("complex64"), "complex64"),
          ("consumer.dtype-bfloat16", C, _consumer_dtype_rule("bfloat16"), "bfloat16"),
          ("consumer.dtype-float8", C, _consumer_dtype_rule("float8_e4m3fn"), "float8_e4m3fn"),
          ("consumer.copy-true", C, c_copy_true, "copy=True does not share the producer's memory"),
          ("consumer.malformed-name", C, _malformed_rule("wrong name", name="not_a_dltensor"),
           "a capsule of another name is refused, its deleter run once"),
          ("consumer.malformed-major-2", C,
           _malformed_rule("major version 2", major=2, force_versioned=True),
           "major version 2 is refused, its deleter run once"),
          ("consumer.malformed-dtype", C, _malformed_rule("dtype code 99", code=99),
           "an unknown dtype code is refused"),
          ("consumer.malformed-device", C, _malformed_rule("device type 99", device_type=99),
           "an unknown device type is refused"),
          ("consumer.malformed-null-shape", C,
           _malformed_rule("NULL shape", shape=(2, 2), null_shape=True),
           "a NULL shape with ndim > 0 is refused"),
          ("consumer.malformed-overflow", C,
           _malformed_rule("overflowing extents", shape=(2**62, 2**62)),
           "extents whose product overflows are refused"),
          ("consumer.malformed-negative-dim", C,
           _malformed_rule("a negative dimension", shape=(-3,)),
           "a negative dimension is refused"),
          ("consumer.malformed-null-data", C,
           _malformed_rule("NULL data, 4 elements", null_data=True),
           "NULL data with elements is refused"),
          ("consumer.malformed-ndim", C,
           _malformed_rule("ndim -1", ndim_override=-1),
           "a negative ndim is refused")]
    return [Rule(*entry) for entry in r]


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    role: str
    function: Callable
    description: str


RULES = _rules()


# ---- running them -------------------------------------------------------------------------

def _run_rule(rule, fw):
    try:
        note = rule.function(fw)
    except NotApplicable as e:
        return Result(rule.id, fw.name, rule.role, "n/a", str(e))
    except RuleFailure as e:
        return Result(rule.id, fw.name, rule.role, "fail", str(e))
    except Exception as e:
        text = str(e).splitlines()[0][:160] if str(e) else ""
        return Result(rule.id, fw.name, rule.role, "fail", f"{type(e).__name__}: {text}")
    finally:
        gc.collect()
    return Result(rule.id, fw.name, rule.role, "pass", note or "")


def _selected(role, rules):
    chosen = [r for r in RULES if role in (None, r.role)]
    if rules is not None:
        wanted = set(rules)
        unknown = wanted - {r.id for r in RULES}
        if unknown:
            raise ValueError(f"unknown rules: {', '.join(sorted(unknown))}")
        chosen = [r for r in chosen if r.id in wanted]
    return chosen


def _worker(spec, rule_ids):
    """In the child: run the named rules, one JSON line each, flushed as it goes."""
    fw = framework(spec)
    by_id = {r.id: r for r in RULES}
    for rule_id in rule_ids:
        print(json.dumps(dataclasses.asdict(_run_rule(by_id[rule_id], fw))), flush=True)


def _isolated(spec, name, rules, timeout):
    results = []
    pending = [r.id for r in rules]
    role_of = {r.id: r.role for r in rules}
    while pending:
        code = (f"import dlinterop.testing as t; t._worker({spec!r}, {pending!r})")
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, timeout=timeout)
            stdout, returncode, stderr = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            returncode, stderr = "timeout", ""
        done = []
        for line in stdout.splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("rule") in role_of:
                results.append(Result(**data))
                done.append(data["rule"])
        pending = pending[len(done):]
        if not pending:
            break
        if returncode == 0:
            raise RuntimeError(f"the checker's child stopped early: {stderr[-400:]}")
        if not done and returncode != "timeout" and _setup_failed(stderr):
            reason = "cannot be set up: " + _last_line(stderr)
            results += [Result(rid, name, role_of[rid], "n/a", reason) for rid in pending]
            break
        crashed = pending.pop(0)
        how = ("timed out" if returncode == "timeout" else
               f"crashed (signal {-returncode})" if returncode < 0 else
               f"exited with status {returncode}")
        results.append(Result(crashed, name, role_of[crashed], "fail",
                              f"the process {how}: {_last_line(stderr)}".rstrip(": ")))
    return results


def _last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _setup_failed(stderr):
    return "Traceback" in (stderr or "") and "_worker" in stderr and "framework(" in stderr


def check(spec, role=None, rules=None, *, isolate=None, timeout=300):
    """Checks a framework in one role ("producer", "consumer") or both; returns a Report.
    Builtin names and "module:callable" run in a child process (isolate=True); a
    Framework object runs in this one."""
    if role not in (None,) + ROLES:
        raise ValueError(f"role must be 'producer', 'consumer' or None, got {role!r}")
    chosen = _selected(role, rules)
    if isinstance(spec, Framework):
        if isolate:
            raise ValueError("a Framework object is checked in this process; give a name "
                             "or 'module:callable' to isolate")
        return Report(spec.name, [_run_rule(r, spec) for r in chosen])
    name = spec if ":" not in spec else spec.partition(":")[2]
    if isolate is False:
        fw = framework(spec)
        return Report(fw.name, [_run_rule(r, fw) for r in chosen])
    if ":" not in spec and spec not in FRAMEWORKS:
        raise ValueError(f"unknown framework {spec!r}; builtin ones: {', '.join(FRAMEWORKS)}")
    return Report(name, _isolated(spec, name, chosen, timeout))


def check_producer(spec, rules=None, **kwargs):
    """check(spec, "producer", ...)."""
    return check(spec, "producer", rules, **kwargs)


def check_consumer(spec, rules=None, **kwargs):
    """check(spec, "consumer", ...)."""
    return check(spec, "consumer", rules, **kwargs)


def assert_conforms(report, allow: Iterable[str] = ()):
    """Raises AssertionError naming every failing rule (pytest shows the list), except the
    rule ids in `allow`."""
    allowed = set(allow)
    failing = [r for r in report.failures() if r.rule not in allowed]
    if failing:
        lines = "\n".join(f"  {r.rule} [{r.role}]: {r.reason}" for r in failing)
        raise AssertionError(f"{report.framework} fails {len(failing)} DLPack rule"
                             f"{'' if len(failing) == 1 else 's'}:\n{lines}")


# ---- the command line -----------------------------------------------------------------

_CELL = {"pass": "pass", "fail": "FAIL", "n/a": "n/a"}


def _role_rows(reports):
    """(role, [(rule id, [cell per framework])]) for each role that any report checked;
    a cell is empty where that framework was not checked against the rule."""
    names = [r.framework for r in reports]
    cells = {(res.rule, r.framework): res for r in reports for res in r.results}
    for role in ROLES:
        rows = [(rule.id, [_CELL[cells[(rule.id, n)].result] if (rule.id, n) in cells else ""
                           for n in names])
                for rule in RULES if rule.role == role
                and any((rule.id, n) in cells for n in names)]
        if rows:
            yield role, rows


def _markdown_section(role, names, rows):
    lines = [f"\n**{role}**\n", "| rule | " + " | ".join(names) + " |",
             "| --- |" + " --- |" * len(names)]
    lines += [f"| `{rule}` | " + " | ".join(row) + " |" for rule, row in rows]
    return lines


def _text_section(role, names, rows):
    width = max(len(rule) for rule, _ in rows) + 2
    lines = [f"\n{role}s".upper(), f"{'rule':<{width}}" + "".join(f"{n:>18}" for n in names),
             "-" * (width + 18 * len(names))]
    lines += [f"{rule:<{width}}" + "".join(f"{cell:>18}" for cell in row) for rule, row in rows]
    return lines


def _table(reports, markdown):
    names = [r.framework for r in reports]
    section = _markdown_section if markdown else _text_section
    lines = []
    for role, rows in _role_rows(reports):
        lines += section(role, names, rows)
    lines.append("")
    for r in reports:
        c = r.counts()
        lines.append(f"{r.framework}: {c['pass']} passed, {c['fail']} failed, {c['n/a']} n/a")
    failures = [res for r in reports for res in r.failures()]
    if failures:
        lines.append("\nfailures:")
        lines += [f"  {res.framework} {res.rule}: {res.reason}" for res in failures]
    return "\n".join(lines)


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m dlinterop check",
        description="Check frameworks against DLPack 1.3 as producers and consumers.")
    parser.add_argument("frameworks", nargs="+", metavar="NAME",
                        help=f"{', '.join(FRAMEWORKS)}, or module:callable")
    parser.add_argument("--role", choices=ROLES, help="check one role only")
    parser.add_argument("--rule", action="append", dest="rules", help="only this rule (repeat)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--list", action="store_true", help="list the rules and stop")
    parser.add_argument("--strict", metavar="NAME", action="append", default=[],
                        help="exit 1 if NAME fails a rule (repeat; default: any failure "
                             "of any framework only prints)")
    args = parser.parse_args(argv)
    if args.list:
        for rule in RULES:
            print(f"{rule.id:<36} {rule.description}")
        return 0
    reports = []
    for spec in args.frameworks:
        try:
            reports.append(check(spec, args.role, args.rules))
        except ValueError as e:
            parser.error(str(e))
    print(_table(reports, args.markdown))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": [dataclasses.asdict(res) for r in reports
                                   for res in r.results]}, f, indent=1)
    failing = [r.framework for r in reports if r.framework in args.strict and not r]
    return 1 if failing else 0
