"""What the pytest plugin's tests hand their inner pytest sessions (tests/plugin): producers
that break one rule each, as a module's source, and the test module making one exchange."""

# Producers that break one rule each, for NumPy's from_dlpack: a Python class delegating
# to a native producer built to order (dlinterop.testing._conformance.Producer).
PRODUCERS = """
import ctypes

import numpy as np
from dlinterop.testing._conformance import Producer

IS_COPIED = 2


def native(**fields):
    fields.setdefault("strides", (1,))
    return Producer(payload=bytes(range(4)), shape=(4,), **fields)


class Broken:
    def __init__(self, **fields):
        self.native = native(**fields)

    def __dlpack_device__(self):
        return self.native.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.native.__dlpack__(**kwargs)


class UnknownFlags(Broken):
    def __init__(self):
        super().__init__(flags=0x80)


class NullStrides(Broken):
    def __init__(self):
        super().__init__(strides=None)


class DeviceList(Broken):
    def __dlpack_device__(self):
        return [1, 0]


class VersionedForLegacy(Broken):
    def __init__(self):
        super().__init__(old_signature=True, force_versioned=True)


class MajorTwo(Broken):
    def __init__(self):
        super().__init__(major=2)


class CopyIgnored(Broken):
    def __dlpack__(self, copy=None, **kwargs):
        return self.native.__dlpack__(**kwargs)


class CopiedAnyway(Broken):
    def __init__(self):
        super().__init__(flags=IS_COPIED)


class ReadOnlyWrapper:
    # holds a read-only array, and exports its memory through a writable view

    def __init__(self):
        self.array = np.arange(4, dtype=np.uint8)
        self.array.flags.writeable = False
        raw = (ctypes.c_uint8 * 4).from_address(self.array.ctypes.data)
        self.view = np.ctypeslib.as_array(raw)

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.view.__dlpack__(**kwargs)


class RuntimeErrorRefusal(Broken):
    def __dlpack__(self, **kwargs):
        raise RuntimeError("cannot export this")


class TypeErrorRefusal(Broken):
    def __dlpack__(self, **kwargs):
        raise TypeError("cannot export this dtype")


class NullData(Broken):
    def __init__(self):
        super().__init__(null_data=True)
"""


def exchange_test(producer, exchange):
    if exchange.startswith("raises: "):
        body = f"with pytest.raises(Exception):\n        {exchange[len('raises: ') :]}"
    else:
        body = exchange
    return (
        f"import pytest\nfrom producers import {producer}\nimport numpy as np\n\n\n"
        f"def test_exchange():\n    x = {producer}()\n    {body}\n"
    )
