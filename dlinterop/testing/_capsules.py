"""What the per-call checks read besides the capsule (dlinterop.testing._call_checks): the
memory behind a producer (where it is, whether it may be written), asked of the producer or
of the objects it holds, through the buffer protocol or __array_interface__."""

from __future__ import annotations

import gc
import sys
import typing

from dlinterop.testing._conformance import buffer_span

# How deep memory_behind looks, and at how many objects at most: a wrapper's attributes, a
# list or dict of them, and what those hold.
_DEPTH = 2
_MOST = 64


class Memory(typing.NamedTuple):
    start: int
    end: int  # one past the last byte
    readonly: bool
    where: str  # whose memory, as said in a report: "its buffer", "its .array's buffer"


def read_only_behind(producer, address):
    """The read-only memory behind `producer` that contains `address` (memory_behind's
    answer where it says read-only), else None. The producers that say so of themselves at
    once are asked first: a NumPy array (writeable or not), a dl.Tensor, a PyTorch tensor
    (PyTorch has no read-only tensors)."""
    cls = type(producer)
    numpy = sys.modules.get("numpy")
    if numpy is not None and cls is numpy.ndarray and producer.flags.writeable:
        return None
    module = getattr(cls, "__module__", "")
    if module == "torch" or (module == "dlinterop._core" and not producer.readonly):
        return None
    found = memory_behind(producer, address)
    return found if found is not None and found.readonly else None


def memory_behind(producer, address):
    """The memory of `producer`, or of an object it holds, that contains `address`: asked of
    each through __array_interface__ (NumPy arrays, and anything that describes itself so)
    and the buffer protocol, the producer first (what it says of its own memory is final),
    then what it refers to, breadth first, a holder that says it is read-only preferred (a
    writable view over a read-only array's memory is still read-only memory). None where
    none tells (a PyTorch tensor, a JAX array, a C object holding a raw pointer)."""
    seen = {id(producer)}
    level = [(producer, "its")]
    looked = 0
    first = None
    for depth in range(_DEPTH + 1):
        following = []
        for obj, whose in level:
            looked += 1
            found = _memory_of(obj, address, whose)
            if found is not None and (found.readonly or depth == 0):
                return found  # (what the producer says of its own memory is final)
            first = first or found
            if depth == _DEPTH or looked >= _MOST:
                continue
            for child, name in _held(obj):
                if id(child) not in seen and not isinstance(child, (str, bytes, int, float)):
                    seen.add(id(child))
                    following.append((child, f"{whose} {name}" if name else whose))
        if looked >= _MOST:
            break
        level = following
    return first


def _held(obj):
    """(object, how it is named) pairs of what obj holds: its attributes and items by name,
    else what the garbage collector knows it refers to."""
    if isinstance(obj, dict):
        return [(v, f"[{k!r}]") for k, v in list(obj.items())[:_MOST]]
    if isinstance(obj, (list, tuple)):
        return [(v, f"[{i}]") for i, v in enumerate(obj[:_MOST])]
    attributes = getattr(obj, "__dict__", None)
    held = [(v, f".{k}") for k, v in attributes.items()] if isinstance(attributes, dict) else []
    for slot in getattr(type(obj), "__slots__", ()):
        if isinstance(slot, str) and hasattr(obj, slot):
            held.append((getattr(obj, slot), f".{slot}"))
    if not held:
        held = [(v, "") for v in gc.get_referents(obj) if not isinstance(v, type)]
    return held[:_MOST]


def _memory_of(obj, address, whose):
    interface = None
    if not isinstance(obj, type):
        try:
            interface = getattr(obj, "__array_interface__", None)
        except Exception:
            interface = None
    if isinstance(interface, dict):
        found = _from_interface(interface, f"{whose} __array_interface__")
        if found is not None:
            return found if found.start <= address < found.end else None
    found = _from_buffer(obj, f"{whose} buffer")
    return found if found is not None and found.start <= address < found.end else None


def _extent(shape, strides, itemsize):
    """(lowest, one past the highest) byte offset from the first element's address."""
    low = high = 0
    for n, stride in zip(shape, strides):
        if n == 0:
            return 0, 0
        span = (n - 1) * stride
        if span < 0:
            low += span
        else:
            high += span
    return low, high + itemsize


def _from_interface(interface, where):
    try:
        data = interface.get("data")
        if not isinstance(data, tuple) or not data[0]:
            return None
        shape = tuple(interface["shape"])
        itemsize = int(interface["typestr"][2:])
        strides = interface.get("strides")
        if strides is None:
            strides, step = [], itemsize
            for n in reversed(shape):
                strides.insert(0, step)
                step *= n
        low, high = _extent(shape, strides, itemsize)
        return Memory(data[0] + low, data[0] + high, bool(data[1]), where)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def _from_buffer(obj, where):
    span = buffer_span(obj)
    return None if span is None else Memory(span[0], span[1], span[2], where)
