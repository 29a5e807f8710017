"""Fuzz dl.from_dlpack with arbitrary DLManagedTensor / DLManagedTensorVersioned contents.

Each input is decoded into one forged DLPack capsule (tests/support/forge/): any capsule name,
version, flags, ndim, shape, strides, dtype, device, byte_offset and data pointer, handed over
directly or through a producer, with or without copy=, device= or stream=. The harness checks
every input against an independent model of dl.from_dlpack's rules (fuzz_model.py: which
inputs must be accepted, and which rejected with which exception) and then checks ownership: a
rejected capsule keeps its name and its deleter runs exactly once when it is released; an
accepted one's deleter runs exactly once when the Tensor dies; dl.memory_stats() returns to its
baseline. Accepted tensors whose memory the harness allocated are also read (copy, NumPy,
re-export).

Any violation raises, which atheris reports as a crash and saves as crash-<sha1>.

Run (see README.md in this folder):
    python tests/fuzz/fuzz_from_dlpack.py tests/fuzz/corpus -max_total_time=600
    python tests/fuzz/fuzz_from_dlpack.py --random 100000      # no atheris: seeded random bytes
    python tests/fuzz/fuzz_from_dlpack.py --replay tests/fuzz/corpus
"""

import ctypes
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))  # for forge
if HERE not in sys.path:  # for fuzz_model (python -P leaves the script's folder out)
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from fuzz_model import (  # noqa: E402
    NUMPY_CODES,
    READABLE_LIMIT,
    decode,
    element_bounds,
    expected_error,
    padded,
)

import dlinterop as dl  # noqa: E402

import forge as forge_module  # noqa: E402
from forge import CountingProducer, capsule_name, forge  # noqa: E402

# --------------------------------------------------------------------------------------
# One input
# --------------------------------------------------------------------------------------

_LEAK_KEYS = ("live_buffers", "live_bytes", "live_exports")
_baseline = None


def _counters():
    stats = dl.memory_stats()
    return tuple(stats[key] for key in _LEAK_KEYS)


def _build(spec):
    """The Forged capsule for `spec`, and whether its data may be read."""
    ndim = spec["ndim"]
    error = expected_error(spec)
    readable = False
    buffer = None
    kwargs = dict(
        shape=spec["shape"],
        dtype=spec["dtype"],
        versioned=spec["versioned"],
        strides=spec["strides"],
        byte_offset=spec["byte_offset"],
        device=spec["device"],
        ndim=ndim,
        null_shape=spec["null_shape"],
        null_deleter=spec["null_deleter"],
        name=spec.get("name"),
    )
    if spec["versioned"]:
        kwargs.update(version=spec["version"], flags=spec["flags"])
    if spec["null_data"]:
        kwargs["data"] = None
    else:
        size, shift = 64, 0
        # A huge byte_offset would put the data pointer itself far outside the buffer.
        if error is None and spec["device"] == (1, 0) and spec["byte_offset"] <= READABLE_LIMIT:
            low, high = element_bounds(spec)
            copy_bytes = math.prod(spec["shape"][:ndim]) * (spec["dtype"][1] + 7) // 8
            if high >= low and high - low + 1 <= READABLE_LIMIT and copy_bytes <= READABLE_LIMIT:
                size, shift, readable = high - low + 1, -low, True
        buffer = (ctypes.c_uint8 * size)()
        ctypes.memset(buffer, 0x01, size)  # a valid value of every type
        kwargs["data"] = ctypes.addressof(buffer) + shift
    if padded(spec) and not readable:
        # Repacking reads every element: only data the harness backs may say it is padded.
        spec["flags"] &= ~4
        kwargs["flags"] = spec["flags"]
    f = forge(**kwargs)
    f.fuzz_buffer = buffer  # lives as long as the Forged
    return f, readable


def _import(route, f, readable):
    """Imports the capsule by `route`. Routes that copy, or would copy if the tensor were
    accepted, are taken only when the harness backs the whole tensor with real memory."""
    if not readable and route.endswith(("-copy", "-device")):
        route = route.rpartition("-")[0]
    if route == "capsule":
        return dl.from_dlpack(f.capsule)
    if route == "capsule-copy":
        return dl.from_dlpack(f.capsule, copy=True)
    if route == "capsule-device":
        return dl.from_dlpack(f.capsule, device="cpu")
    producer = CountingProducer(f)
    if route == "producer":
        return dl.from_dlpack(producer)
    if route == "producer-copy":
        return dl.from_dlpack(producer, copy=True)
    if route == "producer-stream":
        return dl.from_dlpack(producer, stream=-1)
    return dl.from_dlpack(producer, device="cpu")


def _exercise(t, spec, readable):
    """Reads an accepted tensor every way that does not need a device."""
    ndim = spec["ndim"]
    assert t.ndim == ndim
    assert t.shape == spec["shape"][:ndim]
    assert t.dtype.__dlpack_data_type__() == tuple(spec["dtype"])
    t.strides, t.size, t.nbytes, t.is_contiguous(), t.readonly, t.__dlpack_device__()
    if not readable:
        return
    repr(t)  # reads values (host memory), as NumPy's and torch's repr do
    copied = t.copy()
    if t.size:  # (an empty tensor's extents can be huge: its tolist would be too)
        assert copied.tolist() == t.tolist()
    if padded(spec):
        assert t.is_copied and t.is_contiguous()
    if (
        tuple(spec["dtype"]) in NUMPY_CODES and math.prod(d for d in t.shape if d) < 2**31
    ):  # NumPy refuses more, even empty
        np.testing.assert_array_equal(np.asarray(copied), np.from_dlpack(t))
    try:
        capsule = t.__dlpack__(max_version=spec["max_version"])
    except BufferError:
        assert t.readonly and spec["max_version"] is None
    else:
        again = dl.from_dlpack(capsule)
        assert again.data_ptr == t.data_ptr and again.strides == t.strides
        del again, capsule


_OUTCOMES = {}


def classify(outcome, spec):
    """Counts what kind of outcome an input had. Instrumented by atheris, its branches give
    the fuzzer coverage feedback from the native importer's decisions (which it cannot
    instrument directly): an input that reaches a new rejection or a new kind of accepted
    tensor is kept in the corpus."""
    if isinstance(outcome, BaseException):
        message = str(outcome)
        if "already consumed" in message:
            key = "used"
        elif "not a DLPack capsule" in message or "no name" in message:
            key = "name"
        elif "major version" in message:
            key = "version"
        elif "ndim" in message:
            key = "ndim"
        elif "NULL shape" in message:
            key = "null-shape"
        elif "lanes" in message:
            key = "lanes"
        elif "data type" in message:
            key = "dtype"
        elif "device type" in message:
            key = "device-type"
        elif "device index" in message:
            key = "device-id"
        elif "negative dimension" in message:
            key = "negative-dim"
        elif "element count" in message:
            key = "count"
        elif "NULL data" in message:
            key = "null-data"
        elif "byte extent" in message:
            key = "extent"
        elif "flag bit" in message:
            key = "unknown-flags"
        else:
            key = "other:" + type(outcome).__name__
    else:
        t = outcome
        key = f"ok:ndim{min(t.ndim, 5)}"
        if t.size == 0:
            key += ":empty"
        elif not t.is_contiguous():
            key += ":strided"
        if t.readonly:
            key += ":readonly"
        if t.is_copied:
            key += ":copied"
        if spec["device"] != (1, 0):
            key += ":device"
    _OUTCOMES[key] = _OUTCOMES.get(key, 0) + 1
    return key


def check_one(data):
    """Runs one input; raises AssertionError (or the unexpected exception) on a violation."""
    global _baseline
    if _baseline is None:
        _baseline = _counters()
    spec = decode(data)
    error = expected_error(spec)
    name = spec.get("name", "dltensor_versioned" if spec["versioned"] else "dltensor")
    deletes = 0 if (spec["null_deleter"] or name.startswith("used_")) else 1
    f, readable = _build(spec)
    try:
        t = _import(spec["route"], f, readable)
    except (BufferError, ValueError, TypeError) as caught:
        if error is None or not isinstance(caught, error):
            raise AssertionError(f"{spec}: expected {error}, got {caught!r}") from caught
        classify(caught, spec)
        del caught
        assert capsule_name(f.capsule) == f.name, "a rejected capsule was consumed"
        assert f.deleter_calls == 0, "the deleter ran for a rejected capsule"
        f.release()
        assert f.deleter_calls == deletes, (spec, f.deleter_calls)
    else:
        if error is not None:
            raise AssertionError(f"{spec}: accepted, expected {error.__name__}")
        classify(t, spec)
        _exercise(t, spec, readable)
        del t
        f.release()
        assert f.deleter_calls == deletes, (spec, f.deleter_calls)
    after = _counters()
    if after != _baseline:
        raise AssertionError(f"{spec}: memory_stats {after} != baseline {_baseline}")
    # forge parks the memory of a Forged whose deleter never ran (a used_* capsule, a NULL
    # deleter) in case a consumer still holds it. Nothing does by now (checked above), and
    # millions of inputs would otherwise grow without bound. Under ASan a consumer that
    # still held it would show up as a use after free.
    del forge_module._ORPHANS[:]


def replay(paths):
    """Runs every file under `paths` (files or folders); returns how many ran."""
    count = 0
    for path in paths:
        files = (
            [os.path.join(path, n) for n in sorted(os.listdir(path))]
            if os.path.isdir(path)
            else [path]
        )
        for name in files:
            with open(name, "rb") as handle:
                check_one(handle.read())
            count += 1
    return count


def random_inputs(count, seed=0):
    """Seeded random inputs: the fuzzer's fallback where atheris is not installed."""
    rng = random.Random(seed)
    for _ in range(count):
        yield rng.randbytes(rng.choice([0, 8, 16, 32, 64, 128, 256]))


def main(argv):
    if len(argv) > 1 and argv[1] == "--replay":
        print(f"replayed {replay(argv[2:])} inputs cleanly")
        return
    if len(argv) > 1 and argv[1] == "--random":
        count = int(argv[2]) if len(argv) > 2 else 100_000
        seed = int(argv[3]) if len(argv) > 3 else 0
        for i, data in enumerate(random_inputs(count, seed)):
            try:
                check_one(data)
            except BaseException:
                print(f"failing input #{i}: {data.hex()}", file=sys.stderr)
                raise
        print(f"ran {count} random inputs cleanly; outcomes: {sorted(_OUTCOMES.items())}")
        return
    import atheris

    atheris.instrument_func(decode)
    atheris.instrument_func(expected_error)
    atheris.instrument_func(check_one)
    atheris.instrument_func(classify)
    atheris.Setup(argv, check_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
