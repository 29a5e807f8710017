"""The fuzzer's input and its model (fuzz_from_dlpack.py runs them): one input decoded into the
fields of one DLPack capsule, and what dl.from_dlpack must do with that capsule (DLPack's rules,
validated before the capsule is consumed): accept it, or reject it with which exception."""

import math

from dlinterop import _core

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
# The device types DLPack defines, from the core's table of device kinds (which
# tests/test_dlpack_header.py compares with dlpack.h).
KNOWN_DEVICES = {kind.value for kind in _core._DEVICE_KINDS}
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
