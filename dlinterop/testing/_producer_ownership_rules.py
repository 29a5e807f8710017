"""The producer rules on ownership: what keeps an exported array's memory alive and what
releases it (the capsule, its deleter), and the C exchange table where a framework
publishes one. Registered after dlinterop.testing._producer_rules, in the order they print."""

import gc
import weakref

from dlinterop.testing._helpers import (
    _capsule_bytes,
    _expected_bytes,
    _native,
    _values,
    _versioned,
)
from dlinterop.testing._model import NotApplicable, _fail, rule


@rule(
    "producer.capsule-keeps-source", "the capsule keeps the memory alive after the array is dropped"
)
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


@rule("producer.deleter-unconsumed", "an unconsumed capsule's death releases the array")
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


@rule("producer.deleter-consumed", "a consumed capsule's deleter releases the array, once")
def p_deleter_consumed(fw):
    x = fw.make(_values(), "float32")
    capsule, _ = _versioned(x)
    ref = _weak(fw, x)
    del x
    if not _native().consume(capsule):
        _fail("capsule could not be consumed")
    del capsule  # renamed used_*: its destructor must not call the deleter again
    gc.collect()
    if ref() is not None:
        _fail("the deleter did not release the array")


@rule("producer.exchange-api", "the C exchange table, where published: name, version, functions")
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


@rule("producer.exchange-api-round-trip", "each exchange function on an array shares its memory")
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
