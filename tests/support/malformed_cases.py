"""What the malformed-input tests share: the routes a capsule reaches the importer by, the
check that a capsule was rejected untouched, and the cyclic collector kept off."""

import gc
import os

import pytest

import dlinterop as dl

from forge import CountingProducer, capsule_name

# Where forge lives, for the scripts run in a child process.
SUPPORT = os.path.dirname(os.path.abspath(__file__))


INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)


# How a malformed capsule reaches the importer: directly, or returned by a producer.
ROUTES = ["capsule", "capsule-copy", "producer", "producer-copy"]


def _import(route, forged):
    if route == "capsule":
        return dl.from_dlpack(forged.capsule)
    if route == "capsule-copy":
        return dl.from_dlpack(forged.capsule, copy=True)
    producer = CountingProducer(forged)
    if route == "producer":
        return dl.from_dlpack(producer)
    return dl.from_dlpack(producer, copy=True)


@pytest.fixture(autouse=True)
def _no_automatic_gc():
    """Nothing here makes reference cycles, so refcounting frees everything at once;
    turning the cyclic collector off keeps an unrelated collection (another test's
    garbage) from changing memory_stats() mid-test, and is much cheaper than collecting."""
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


def _stats():
    return dl.memory_stats()


def assert_rejected(forged, exc=BufferError, *, route="capsule", match=None, deleter_calls=1):
    """Import must raise `exc` and leave the capsule untouched; releasing the capsule must
    then call the deleter `deleter_calls` times (1, or 0 for a forged used_* capsule)."""
    before = _stats()
    name = capsule_name(forged.capsule)
    with pytest.raises(exc, match=match) as info:
        _import(route, forged)
    assert type(info.value) is not SystemError
    assert capsule_name(forged.capsule) == name, "a rejected capsule must not be consumed"
    assert forged.deleter_calls == 0, "the deleter ran before the capsule was released"
    forged.release()
    assert forged.deleter_calls == deleter_calls
    assert dl.memory_stats() == before
