"""Frameworks described for the conformance checker's tests (tests/tools/test_conformance.py),
given to it as "conformance_frameworks:NAME" (tests/support/ is on sys.path there and in the child
process the checker starts)."""

import faulthandler

import numpy as np

from dlinterop.testing import Framework, _conformance, framework


def crashing():
    """NumPy, except that its consumer dies (SIGSEGV) on a capsule with a NULL shape, as
    some real consumers do: the checker must fail that rule and go on."""
    base = framework("numpy")

    def from_dlpack(obj, **kwargs):
        if isinstance(obj, _conformance.Producer) and obj.null_shape:
            faulthandler._sigsegv()
        return base.from_dlpack(obj, **kwargs)

    return Framework(
        "crashing", base.make, from_dlpack, base.dtypes, base.view, base.readonly, base.writable
    )


class Careless:
    """A producer and consumer that breaks rules on purpose: legacy capsules only, no
    keyword checks, and a from_dlpack that never consumes (it copies through NumPy's view of
    the producer and leaves the capsule unrenamed)."""

    def __init__(self, array):
        self.array = np.ascontiguousarray(array)

    def __dlpack__(self, *args, **kwargs):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


def careless():
    def from_dlpack(obj, **kwargs):
        obj.__dlpack__(**kwargs)
        return Careless(np.zeros(1))  # the capsule is dropped unconsumed, the data ignored

    return Framework(
        "careless",
        lambda v, d: Careless(np.asarray(v).astype(d)),
        from_dlpack,
        frozenset({"float32", "float64", "int32"}),
    )


def not_a_framework():
    return 42


class _NoDLPackType:
    """An array of a type its framework cannot export, refused with the wrong exception."""

    def __dlpack__(self, **kwargs):
        raise TypeError("this dtype has no DLPack code")

    def __dlpack_device__(self):
        return (1, 0)


def bit_careless():
    """A framework that gets bit patterns wrong on purpose: its exports set a flag bit
    DLPack does not define, hand out sub-byte data one element per byte without saying it
    is padded, and refuse a type they cannot export with TypeError; its from_dlpack drops the
    padded flag before reading (so padded data reads as packed)."""
    import dlinterop as dl
    from dlinterop.testing._frameworks.dtypes import _numpy_dtype

    def make(values, dtype):
        a = np.ascontiguousarray(np.asarray(values).astype(_numpy_dtype(dtype)))
        d = dl.dtype(dtype)
        return _conformance.Producer(
            payload=a.tobytes(),
            shape=a.shape,
            code=d.code,
            bits=d.bits,
            strides=tuple(s // a.itemsize for s in a.strides),
            flags=1 << 9,
        )

    def from_dlpack(obj, **kwargs):
        if isinstance(obj, _conformance.Producer):
            obj.flags &= ~4
        return dl.from_dlpack(obj, **kwargs)

    return Framework(
        "bit_careless",
        make,
        from_dlpack,
        frozenset({"float32", "float4_e2m1fn", "int4"}),
        unexportable=_NoDLPackType,
    )
