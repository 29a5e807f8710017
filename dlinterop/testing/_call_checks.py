"""The checks of one exchange's parts (dlinterop.testing._call_rules runs them): the device a
producer answered, a refusal, the capsule it returned (its version, device and flags), and
what the consumer made of it. Each reports through the exchange (exchange.violation) and
reads NumPy and PyTorch from sys.modules only."""

from __future__ import annotations

import sys

from dlinterop import _core
from dlinterop.testing._capsules import memory_behind, read_only_behind
from dlinterop.testing._conformance import capsule_name, inspect
from dlinterop.testing._model import IS_COPIED, KNOWN_FLAGS, READ_ONLY

# Keywords added to __dlpack__ after DLPack 0.8: a producer older than them raises TypeError,
# and a consumer retries without them.
_NEW_KEYWORDS = frozenset({"max_version", "dl_device", "copy"})


def _error_text(error):
    message = str(error).splitlines()[0][:100] if str(error) else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _host(device_type):
    """Whether the core's table of device kinds calls memory on `device_type` (an int) plain
    host memory: CPU memory, for which a consumer passes no stream."""
    kind = _core._device_kind(device_type)
    return kind is not None and kind.host


def _host_readable(device_type):
    """Whether the table says the host reads memory on `device_type` (an int) directly."""
    kind = _core._device_kind(device_type)
    return kind is not None and kind.host_readable


def _device_pair(device):
    """(type, index) as ints, or None where `device` is not such a pair."""
    if not isinstance(device, tuple) or len(device) != 2:
        return None
    try:
        return int(device[0]), int(device[1])
    except (TypeError, ValueError):
        return None


def _check_device_answer(exchange, device):
    pair = _device_pair(device)
    if pair is None:
        exchange.violation(
            "producer.device",
            f"__dlpack_device__() returned {device!r}, not a (type, index) tuple of integers",
        )
    elif _core._device_kind(pair[0]) is None:
        exchange.violation(
            "producer.device",
            f"__dlpack_device__() returned device type {pair[0]}, which DLPack does not define",
        )


def _check_refusal(exchange, call, error):
    args, kwargs = call.args, call.kwargs
    if isinstance(error, BufferError) or not isinstance(error, Exception):
        return
    if isinstance(error, TypeError):
        newer = sorted(_NEW_KEYWORDS & kwargs.keys())
        if args or newer:
            # An older producer's "unexpected keyword", which a consumer answers by asking
            # again without: unless asking so raises TypeError too (a data problem).
            if not _type_error_without(exchange.producer, args, kwargs):
                return
            seen = (
                f"TypeError from __dlpack__({_kwargs_text(kwargs)}), and again without "
                f"{', '.join(newer) or 'its arguments'}: a problem with the data, where DLPack "
                "says BufferError"
            )
        else:
            seen = (
                f"TypeError from __dlpack__({_kwargs_text(kwargs)}), where DLPack says BufferError"
            )
    elif isinstance(error, ValueError) and kwargs.get("stream") is not None:
        return  # a stream it cannot use
    else:
        seen = f"{type(error).__name__} from __dlpack__, where DLPack says BufferError"
    message = str(error).splitlines()[0][:100] if str(error) else ""
    exchange.violation(
        "producer.unexportable-buffer-error", f"{seen}: {message}" if message else seen
    )


def _type_error_without(producer, args, kwargs):
    """Whether producer.__dlpack__ raises TypeError asked without the keywords DLPack 0.8
    lacked (and without positional arguments): the capsule it may give is dropped."""
    older = {k: v for k, v in kwargs.items() if k not in _NEW_KEYWORDS}
    try:
        producer.__dlpack__(**older)
    except TypeError:
        return True
    except Exception:
        return False
    return False


def _kwargs_text(kwargs):
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _version_rule(max_version):
    """The checker's rule id for the version a call asked for."""
    if max_version is None:
        return "producer.default-legacy"
    major, minor = max_version
    if major < 1:
        return "producer.max-version-0.8"
    if major > 1:
        return "producer.max-version-2.0"
    if minor < 3:
        return "producer.max-version-1.0"
    return "producer.max-version-1.3" if minor == 3 else "producer.max-version-1.99"


def _check_capsule(exchange, call):
    kwargs, capsule = call.kwargs, call.capsule
    name = call.name = capsule_name(capsule)
    if name is None:
        exchange.violation(
            "producer.well-formed", f"__dlpack__ returned {type(capsule).__name__}, not a capsule"
        )
        return
    if name.startswith("used_"):
        # Its struct belongs to the consumer that consumed it, and may be freed: not read.
        exchange.violation(
            "producer.fresh-capsule", f"__dlpack__ returned a capsule already consumed ({name!r})"
        )
        return
    max_version = kwargs.get("max_version")
    try:
        asked = None if max_version is None else (int(max_version[0]), int(max_version[1]))
    except (TypeError, ValueError, IndexError):
        asked = None
    rule_id = _version_rule(asked)
    modern = asked is not None and asked[0] >= 1
    if name not in ("dltensor", "dltensor_versioned"):
        exchange.violation(rule_id, f"capsule named {name!r} for max_version={max_version}")
        return
    info = call.info = inspect(capsule)
    versioned = name == "dltensor_versioned"
    if versioned and not modern:
        exchange.violation(
            rule_id,
            f"a versioned capsule for max_version={max_version}: this consumer reads only "
            "the legacy struct",
        )
        return
    if versioned and info["version"][0] != 1:
        exchange.violation(
            rule_id, f"capsule of version {info['version']} for max_version={max_version}"
        )
        return
    # dlinterop's importer's own checks, the same code that guards every import.
    malformed = _core._layout_problem(capsule)
    if malformed:
        exchange.violation("producer.well-formed", malformed)
        return
    _check_device(exchange, kwargs, info)
    if versioned:
        _check_flags(exchange, kwargs, info)


def _check_device(exchange, kwargs, info):
    device = exchange.device
    if device is None:
        try:
            device = exchange.device = exchange.producer.__dlpack_device__()
        except Exception as e:
            exchange.violation("producer.device", f"__dlpack_device__() raised {_error_text(e)}")
            return
        _check_device_answer(exchange, device)
    asked = kwargs.get("dl_device")
    wanted = _device_pair(asked) if asked is not None else _device_pair(device)
    if wanted is not None and wanted != info["device"]:
        which = "dl_device=" if asked is not None else "__dlpack_device__() says"
        exchange.violation("producer.device", f"{which} {wanted}, the capsule {info['device']}")


def _check_flags(exchange, kwargs, info):
    flags = info["flags"]
    if flags & ~KNOWN_FLAGS:
        exchange.violation(
            "producer.flags-known",
            f"flags {flags:#x} set bits DLPack does not define ({flags & ~KNOWN_FLAGS:#x})",
        )
    if info["ndim"] > 0 and info["strides"] is None and info["version"] >= (1, 2):
        exchange.violation(
            "producer.strides-filled",
            f"NULL strides for ndim {info['ndim']} in a version {info['version']} capsule "
            "(DLPack 1.2+ requires them)",
        )
    address = info["data"] + info["byte_offset"]
    # Host-readable memory with elements: whether it is shared or read-only can be asked.
    memory = _host_readable(info["device"][0]) and all(n != 0 for n in info["shape"] or ())
    copy = kwargs.get("copy")
    copied = bool(flags & IS_COPIED)
    if copy is True and not copied:
        exchange.violation("producer.copy-true", "copy=True export without the IS_COPIED flag")
    elif copy is False and copied:
        exchange.violation("producer.copy-false", "copy=False export flagged IS_COPIED")
    elif copied and memory and _shares(exchange.producer, address):
        rule_id = "producer.copy-true" if copy is True else "producer.is-copied-fresh"
        exchange.violation(
            rule_id,
            f"{'copy=True' if copy is True else 'an'} export flagged IS_COPIED whose data is the "
            "producer's own memory",
        )
    if not flags & READ_ONLY and not copied and memory:
        found = read_only_behind(exchange.producer, address)
        if found is not None:
            exchange.violation(
                "producer.read-only",
                f"memory that is read-only ({found.where}) exported without the READ_ONLY flag",
            )


def _shares(producer, address):
    """Whether `address` lies in the producer's own memory: the memory behind it (its buffer,
    its __array_interface__, or theirs of what it holds), else what a second export with
    copy=False points at. False where neither tells."""
    if memory_behind(producer, address) is not None:
        return True
    try:
        shared = producer.__dlpack__(max_version=(1, 3), copy=False)
        info = inspect(shared)
    except Exception:
        return False
    return "data" in info and info["data"] + info["byte_offset"] == address


def _check_consumer(exchange, result, raised):
    calls = exchange.calls
    if not calls:
        return  # it took another route (a buffer, __array__): nothing passed through DLPack
    first = calls[0]
    if not first.args and first.kwargs.get("max_version") is None:
        exchange.violation(
            "consumer.passes-max-version",
            f"__dlpack__({_kwargs_text(first.kwargs)}) called without max_version",
        )
    device = _device_pair(exchange.device)
    taken = calls[-1]
    info = taken.info
    on_cpu = (device is not None and _host(device[0])) or (
        info is not None and _host(info["device"][0])
    )
    for call in calls:
        stream = call.kwargs.get("stream", call.args[0] if call.args else None)
        if on_cpu and stream is not None:
            exchange.violation("consumer.stream-cpu", f"stream={stream!r} passed for CPU memory")
            break
    if raised:
        return
    if taken.name is not None and taken.name.startswith("used_"):
        exchange.violation(
            "consumer.consume-once", f"a capsule already consumed ({taken.name!r}) was taken"
        )
        return
    if info is None or taken.capsule is None:
        return
    # The capsule's name only: the consumer may have freed its struct already.
    name = capsule_name(taken.capsule)
    if name is not None and not name.startswith("used_"):
        exchange.violation(
            "consumer.renames-capsule",
            f"capsule left named {name!r} after the import (must be renamed used_*)",
        )
    seen = _writable_pointer(result)
    if seen is None:
        return
    writable, pointer = seen
    data = info["data"] + info["byte_offset"]
    if info.get("flags", 0) & READ_ONLY and writable and pointer == data:
        exchange.violation(
            "consumer.read-only", "a READ_ONLY capsule became a writable array sharing its memory"
        )
    if (
        exchange.consumer_kwargs.get("copy") is True
        and taken.kwargs.get("copy") is not True
        and not info.get("flags", 0) & IS_COPIED
        and pointer == data
    ):
        exchange.violation(
            "consumer.copy-true",
            "copy=True neither passed on nor honoured: the result shares the producer's memory",
        )


def _writable_pointer(obj):
    """(writable, address of the first element) of a consumer's result where that can be told
    (NumPy arrays, PyTorch tensors), else None."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        pointer, readonly = obj.__array_interface__["data"]
        return not readonly, pointer
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        # torch has no read-only tensors
        return True, obj.data_ptr()
    return None
