"""Fuzz dl.from_dlpack with arbitrary DLManagedTensor / DLManagedTensorVersioned contents.

Each input is decoded into one forged DLPack capsule (tests/support/forge/): any capsule name,
version, flags, ndim, shape, strides, dtype, device, byte_offset and data pointer, handed over
directly or through a producer, with or without copy=, device= or stream=. The harness checks
every input against an independent model of dl.from_dlpack's rules (which inputs must be
accepted, and which rejected with which exception) and then checks ownership: a rejected capsule
keeps its name and its deleter runs exactly once when it is released; an accepted one's deleter
runs exactly once when the Tensor dies; dl.memory_stats() returns to its baseline. Accepted
tensors whose memory the harness allocated are also read (copy, NumPy, re-export).

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

import numpy as np  # noqa: E402

import dlinterop as dl  # noqa: E402

import forge as forge_module  # noqa: E402
from forge import CountingProducer, capsule_name, forge  # noqa: E402

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1
READABLE_LIMIT = 1 << 16  # bytes the harness allocates to back an accepted tensor

VALID_DTYPES = [
    (0, 8, 1),
    (0, 16, 1),
    (0, 32, 1),
    (0, 64, 1),
    (1, 8, 1),
    (1, 16, 1),
    (1, 32, 1),
    (1, 64, 1),
    (2, 16, 1),
    (2, 32, 1),
    (2, 64, 1),
    (4, 16, 1),
    (5, 32, 1),
    (5, 64, 1),
    (5, 128, 1),
    (6, 8, 1),
    *((code, 8, 1) for code in range(7, 15)),
    (15, 6, 1),
    (16, 6, 1),
    (17, 4, 1),
    (17, 4, 2),
    (0, 1, 1),
    (0, 2, 1),
    (0, 4, 1),
    (1, 1, 1),
    (1, 2, 1),
    (1, 4, 1),
    (18, 32, 1),
]
NUMPY_CODES = {
    (0, 8, 1),
    (0, 16, 1),
    (0, 32, 1),
    (0, 64, 1),
    (1, 8, 1),
    (1, 16, 1),
    (1, 32, 1),
    (1, 64, 1),
    (2, 16, 1),
    (2, 32, 1),
    (2, 64, 1),
    (5, 64, 1),
    (5, 128, 1),
    (6, 8, 1),
}
KNOWN_DEVICES = {t for t in range(1, 22) if t not in (5, 6)}
KNOWN_FLAGS = 0b111  # READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED
EXTREME_INTS = [
    0,
    1,
    -1,
    2,
    2**31 - 1,
    -(2**31),
    2**32,
    2**40,
    2**62,
    2**62 - 1,
    INT64_MAX,
    INT64_MIN,
    INT64_MAX - 1,
    -(2**62),
    3,
    7,
]
FOREIGN_NAMES = [
    "used_dltensor",
    "used_dltensor_versioned",
    "",
    "dltensor_",
    "DLTENSOR",
    "datetime.datetime_CAPI",
    "dlpack_exchange_api",
    "numpy_array",
    "dltensor_versioned\x01",
]
ROUTES = [
    "capsule",
    "capsule-copy",
    "producer",
    "producer-copy",
    "producer-stream",
    "capsule-device",
    "producer-device",
]


class ByteReader:
    """Decodes the fuzzer's bytes into choices; past the end every read is 0, so any input
    is valid and short inputs mean the first (most ordinary) choices."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def uint(self, nbytes):
        chunk = self.data[self.pos : self.pos + nbytes]
        self.pos += nbytes
        return int.from_bytes(chunk.ljust(nbytes, b"\0"), "little")

    def sint(self, nbytes):
        value = self.uint(nbytes)
        return value - (1 << (8 * nbytes)) if value >> (8 * nbytes - 1) else value

    def below(self, n):
        return self.uint(1) % n

    def pick(self, options):
        return options[self.below(len(options))]

    def chance(self, sixteenths):
        """True with probability sixteenths/16."""
        return self.uint(1) % 16 >= 16 - sixteenths


def _int64(r, small_low, small_high):
    kind = r.below(8)
    if kind < 5:
        return small_low + r.below(small_high - small_low + 1)
    if kind < 7:
        return r.pick(EXTREME_INTS)
    return r.sint(8)


def decode(data):
    """The forge() arguments, the route and the follow-up choices an input stands for."""
    r = ByteReader(data)
    spec = {}
    versioned = not r.chance(5)
    spec["versioned"] = versioned
    if r.chance(1):
        spec["name"] = r.pick(FOREIGN_NAMES)
    kind = r.below(16)
    if kind < 13:
        spec["version"] = (1, r.below(6))
    elif kind < 15:
        spec["version"] = (r.pick([0, 2, 3, 255]), r.pick([0, 3, 99]))
    else:
        spec["version"] = (r.uint(4), r.uint(4))
    spec["flags"] = r.pick([0, 0, 0, 1, 2, 3, 4, 1 << 40, UINT64_MAX]) if versioned else None

    kind = r.below(16)
    ndim = r.below(7) if kind < 13 else r.pick([64, 65, -1, 100, 2**31 - 1, -(2**31)])
    spec["ndim"] = ndim
    entries = min(max(ndim, 0), 70)
    spec["shape"] = tuple(_int64(r, 0, 5) for _ in range(entries))
    spec["null_shape"] = r.chance(1)
    if r.chance(6):
        spec["strides"] = None
    else:
        spec["strides"] = tuple(_int64(r, -6, 6) for _ in range(entries))

    kind = r.below(16)
    if kind < 13:
        spec["dtype"] = r.pick(VALID_DTYPES)
    elif kind < 15:
        code = r.pick(VALID_DTYPES)[0]
        spec["dtype"] = (code, r.uint(1), r.pick([1, 1, 0, 2, 3, 65535]))
    else:
        spec["dtype"] = (r.uint(1), r.uint(1), r.uint(2))
    kind = r.below(16)
    if kind < 12:
        spec["device"] = (1, 0)
    elif kind < 15:
        spec["device"] = (r.below(24) - 1, r.below(4) - 1)
    else:
        spec["device"] = (r.sint(4), r.sint(4))
    kind = r.below(16)
    spec["byte_offset"] = (
        0
        if kind < 8
        else r.below(65)
        if kind < 13
        else r.pick([2**62, INT64_MAX, 2**63, UINT64_MAX])
    )
    spec["null_data"] = r.chance(1)
    spec["null_deleter"] = r.chance(1)
    spec["route"] = r.pick(ROUTES)
    spec["max_version"] = r.pick([None, (1, 0), (1, 3), (2, 0)])
    return spec


# --------------------------------------------------------------------------------------
# The model: what from_dlpack must do with this capsule (validate before consuming)
# --------------------------------------------------------------------------------------


def expected_error(spec):
    """None if the capsule must be imported, else the exception class it must raise."""
    name = spec.get("name", "dltensor_versioned" if spec["versioned"] else "dltensor")
    if name not in ("dltensor", "dltensor_versioned"):
        return ValueError
    if spec["versioned"] and spec["version"][0] != 1:
        return BufferError
    ndim = spec["ndim"]
    if not 0 <= ndim <= 64:
        return BufferError
    if ndim > 0 and spec["null_shape"]:
        return BufferError
    if tuple(spec["dtype"]) not in VALID_DTYPES:
        return BufferError
    device_type, device_id = spec["device"]
    if device_type not in KNOWN_DEVICES or device_id < 0:
        return BufferError
    if spec["versioned"] and spec["flags"] & ~KNOWN_FLAGS:
        return BufferError
    shape = spec["shape"][:ndim]
    count = 1
    for d in shape:
        if d < 0:
            return BufferError
        count *= d
        if count > INT64_MAX:
            return BufferError
    if count == 0:
        return None
    if spec["null_data"]:
        return BufferError
    return BufferError if extent_bytes(spec) > INT64_MAX else None


def padded(spec):
    """Whether an accepted capsule holds padded sub-byte data, which the import repacks (a
    copy that reads every element)."""
    dtype = spec["dtype"]
    return bool(spec["versioned"] and spec["flags"] & 4 and dtype[1] * dtype[2] < 8)


def extent_bytes(spec):
    """byte_offset + bytes from element 0 to one past the furthest element, as dlinterop
    bounds it (a stride of INT64_MIN counts as unbounded)."""
    ndim = spec["ndim"]
    shape = spec["shape"][:ndim]
    strides = spec["strides"]
    dtype = spec["dtype"]
    itemsize = (dtype[1] * dtype[2] + 7) // 8
    if strides is None:
        span = math.prod(shape) - 1
    else:
        strides = strides[:ndim] + (0,) * (ndim - len(strides))
        if any(s == INT64_MIN for s in strides):
            return INT64_MAX + 1
        span = sum((d - 1) * abs(s) for d, s in zip(shape, strides))
    return (span + 1) * itemsize + spec["byte_offset"]


def element_bounds(spec):
    """(lowest, highest) byte offset from the data pointer that the elements occupy."""
    ndim = spec["ndim"]
    shape = spec["shape"][:ndim]
    dtype = spec["dtype"]
    bits = 8 if padded(spec) else dtype[1] * dtype[2]
    itemsize = (bits + 7) // 8
    if spec["strides"] is None:
        low, high = 0, (math.prod(shape) * bits + 7) // 8 - 1
        if bits >= 8:
            high = math.prod(shape) * itemsize - 1
    elif bits < 8:
        # Packed: element i of a stride lies i * stride * bits bits from element 0.
        strides = spec["strides"][:ndim] + (0,) * (ndim - len(spec["strides"]))
        low = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0) * bits // 8
        high = (sum((d - 1) * s for d, s in zip(shape, strides) if s > 0) * bits + bits - 1) // 8
    else:
        strides = spec["strides"][:ndim] + (0,) * (ndim - len(spec["strides"]))
        low = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0) * itemsize
        high = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0) * itemsize + itemsize - 1
    return spec["byte_offset"] + low, spec["byte_offset"] + high


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
