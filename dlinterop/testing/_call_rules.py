"""The conformance rules applied to one exchange at a time: what a consumer asked of a producer's
__dlpack__, what the producer answered, and what the consumer did with the capsule, checked
under the checker's rule ids (dlinterop.testing.RULES) as the exchange happens. The pytest
plugin (dlinterop.pytest_plugin) wraps each argument of a consumer's from_dlpack in a
CheckingProxy and calls check_consumer once the consumer returns.

Nothing here imports a peer: NumPy and PyTorch are looked up in sys.modules, where the objects
being checked came from."""

from __future__ import annotations

import dataclasses
import os
import sys
import traceback

from dlinterop import _core
from dlinterop.testing._conformance import inspect
from dlinterop.testing._model import IS_COPIED, KNOWN_FLAGS, READ_ONLY, RULES, link

# Checked per call only: no checker rule exports something malformed on purpose, but a
# producer in a real suite may. docs/conformance.md lists them with the checker's rules.
CALL_ONLY_RULES = {
    "producer.well-formed": (
        "__dlpack__ returns a DLPack capsule whose tensor an importer can take (ndim, shape, "
        "extents, data pointer, dtype and device make sense)"
    ),
}

# The rule ids checked per call, each a checker rule (RULES) or one of CALL_ONLY_RULES.
CALL_RULES = (
    "producer.device",
    "producer.default-legacy",
    "producer.max-version-0.8",
    "producer.max-version-1.0",
    "producer.max-version-1.3",
    "producer.max-version-1.99",
    "producer.max-version-2.0",
    "producer.flags-known",
    "producer.strides-filled",
    "producer.copy-true",
    "producer.copy-false",
    "producer.read-only",
    "producer.unexportable-buffer-error",
    "producer.well-formed",
    "consumer.renames-capsule",
    "consumer.passes-max-version",
    "consumer.stream-cpu",
    "consumer.read-only",
    "consumer.copy-true",
)

_CPU = 1
# Keywords added to __dlpack__ after DLPack 0.8: a producer older than them raises TypeError,
# and a consumer retries without them.
_NEW_KEYWORDS = frozenset({"max_version", "dl_device", "copy"})
_OWN_FILES = frozenset(
    os.path.normcase(os.path.abspath(f))
    for f in (__file__, os.path.join(os.path.dirname(__file__), "..", "pytest_plugin.py"))
)


def description(rule_id):
    """The one-line description of a rule id, the checker's or a per-call one."""
    for rule in RULES:
        if rule.id == rule_id:
            return rule.description
    return CALL_ONLY_RULES[rule_id]


def known_ids():
    return {rule.id for rule in RULES} | set(CALL_ONLY_RULES)


def qualified_name(cls):
    module = getattr(cls, "__module__", None) or ""
    name = getattr(cls, "__qualname__", None) or cls.__name__
    return name if module in ("", "builtins") else f"{module}.{name}"


@dataclasses.dataclass
class Violation:
    rule: str
    producer: str  # the producer type's qualified name
    consumer: str  # the consumer function, "numpy.from_dlpack"
    seen: str  # what was wrong, one line
    stack: list  # traceback.FrameSummary objects, the consumer call last
    allowed: bool = False

    def text(self):
        lines = [
            f"DLPack violation {self.rule}: {self.seen}",
            f"  producer {self.producer}, consumer {self.consumer}",
            f"  rule: {description(self.rule)}",
            f"  docs: {link(self.rule)}",
            "  exchange made at (most recent call last):",
        ]
        lines += ["  " + line for line in "".join(traceback.format_list(self.stack)).splitlines()]
        return "\n".join(lines)


def _stack():
    """The stack at this point, without the checker's own frames and pytest's and pluggy's
    machinery below the test."""
    frames = traceback.extract_stack()
    kept = []
    for frame in frames:
        path = os.path.normcase(os.path.abspath(frame.filename))
        if path in _OWN_FILES:
            continue
        parts = path.replace("\\", "/").split("/")
        if "_pytest" in parts or "pluggy" in parts:
            kept.clear()  # everything above is the test runner calling the test
            continue
        kept.append(frame)
    return kept


class Exchange:
    """One consumer call: what passed between it and the producer, and what broke a rule.
    `report(violation)` is the plugin's: it attributes the violation to the running test."""

    __slots__ = ("consumer", "producer", "calls", "device", "report", "consumer_kwargs")

    def __init__(self, consumer, producer, report, consumer_kwargs):
        self.consumer = consumer
        self.producer = producer
        self.calls = []  # (args, kwargs, capsule or None, info or None), in call order
        self.device = None  # what __dlpack_device__ last answered
        self.report = report
        self.consumer_kwargs = consumer_kwargs

    def violation(self, rule_id, seen):
        self.report(
            Violation(rule_id, qualified_name(type(self.producer)), self.consumer, seen, _stack())
        )


class CheckingProxy:
    """Stands for a producer in front of a consumer: forwards __dlpack__ and
    __dlpack_device__, records what was asked and answered, and checks the answers. It
    has no __dlpack_c_exchange_api__, so that the exchange goes through __dlpack__, where
    it can be seen."""

    __slots__ = ("_exchange",)

    def __init__(self, exchange):
        self._exchange = exchange

    def __dlpack_device__(self):
        device = self._exchange.producer.__dlpack_device__()
        self._exchange.device = device
        return device

    def __dlpack__(self, *args, **kwargs):
        exchange = self._exchange
        try:
            capsule = exchange.producer.__dlpack__(*args, **kwargs)
        except BaseException as e:
            exchange.calls.append((args, kwargs, None, None))
            _check_refusal(exchange, args, kwargs, e)
            raise
        try:
            info = inspect(capsule)
        except ValueError as e:
            exchange.calls.append((args, kwargs, capsule, None))
            exchange.violation("producer.well-formed", f"__dlpack__ returned {e}")
            return capsule
        exchange.calls.append((args, kwargs, capsule, info))
        _check_capsule(exchange, kwargs, capsule, info)
        return capsule

    def __repr__(self):
        return f"<checking proxy for {self._exchange.producer!r}>"


def _check_refusal(exchange, args, kwargs, error):
    if isinstance(error, BufferError) or not isinstance(error, Exception):
        return
    if isinstance(error, TypeError):
        if args or _NEW_KEYWORDS & kwargs.keys():
            return  # an older producer's "unexpected keyword": the consumer retries without
        seen = f"TypeError from __dlpack__({_kwargs_text(kwargs)}), where DLPack says BufferError"
    elif isinstance(error, ValueError) and kwargs.get("stream") is not None:
        return  # a stream it cannot use
    else:
        seen = f"{type(error).__name__} from __dlpack__, where DLPack says BufferError"
    message = str(error).splitlines()[0][:100] if str(error) else ""
    exchange.violation(
        "producer.unexportable-buffer-error", f"{seen}: {message}" if message else seen
    )


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


def _check_capsule(exchange, kwargs, capsule, info):
    name = info["name"]
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
    device = exchange.device
    if device is None:
        try:
            device = exchange.device = exchange.producer.__dlpack_device__()
        except Exception as e:
            device = f"<{type(e).__name__}>"
    wanted = kwargs.get("dl_device") or device
    if not (isinstance(device, tuple) and len(device) == 2):
        exchange.violation(
            "producer.device", f"__dlpack_device__() returned {device!r}, not a (type, index) tuple"
        )
    elif tuple(int(v) for v in wanted) != info["device"]:
        which = "dl_device=" if kwargs.get("dl_device") else "__dlpack_device__() says"
        exchange.violation(
            "producer.device", f"{which} {tuple(wanted)}, the capsule {info['device']}"
        )
    if not versioned:
        return
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
    copy = kwargs.get("copy")
    if copy is True and not flags & IS_COPIED:
        exchange.violation("producer.copy-true", "copy=True export without the IS_COPIED flag")
    elif copy is False and flags & IS_COPIED:
        exchange.violation("producer.copy-false", "copy=False export flagged IS_COPIED")
    if not flags & READ_ONLY and not flags & IS_COPIED and _read_only(exchange.producer):
        exchange.violation(
            "producer.read-only", "a read-only array exported without the READ_ONLY flag"
        )


def _numpy_array_type():
    numpy = sys.modules.get("numpy")
    return None if numpy is None else numpy.ndarray


def _read_only(obj):
    """Whether obj is an array whose memory may not be written: a NumPy array that is not
    writeable, an object whose buffer is read-only. False when it cannot be told."""
    ndarray = _numpy_array_type()
    if ndarray is not None and isinstance(obj, ndarray):
        return not obj.flags.writeable
    try:
        with memoryview(obj) as view:
            return view.readonly
    except Exception:
        return False


def _writable_pointer(obj):
    """(writable, address of the first element) of a consumer's result where that can be told
    (NumPy arrays, PyTorch tensors, buffers), else None."""
    ndarray = _numpy_array_type()
    if ndarray is not None and isinstance(obj, ndarray):
        return bool(obj.flags.writeable), obj.__array_interface__["data"][0]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        # torch has no read-only tensors
        return True, obj.data_ptr()
    return None


def check_consumer(exchange, result):
    """The consumer rules, once the consumer returned `result` from the exchange."""
    calls = exchange.calls
    if not calls:
        return  # it took another route (a buffer, __array__): nothing passed through DLPack
    args, first, _, _ = calls[0]
    if not args and first.get("max_version") is None:
        exchange.violation(
            "consumer.passes-max-version",
            f"__dlpack__({_kwargs_text(first)}) called without max_version",
        )
    device = exchange.device
    taken = calls[-1]
    info = taken[3]
    on_cpu = (device is not None and tuple(device)[0] == _CPU) or (
        info is not None and info.get("device", (0,))[0] == _CPU
    )
    for call_args, kwargs, _, _ in calls:
        stream = kwargs.get("stream", call_args[0] if call_args else None)
        if on_cpu and stream is not None:
            exchange.violation("consumer.stream-cpu", f"stream={stream!r} passed for CPU memory")
            break
    capsule = taken[2]
    if info is None or capsule is None:
        return
    name = inspect(capsule)["name"]
    if not name.startswith("used_"):
        exchange.violation(
            "consumer.renames-capsule",
            f"capsule left named {name!r} after the import (must be renamed used_*)",
        )
    seen = _writable_pointer(result)
    if seen is None:
        return
    writable, pointer = seen
    data = info["data"] + info["byte_offset"]
    if info["flags"] & READ_ONLY and writable and pointer == data:
        exchange.violation(
            "consumer.read-only", "a READ_ONLY capsule became a writable array sharing its memory"
        )
    if (
        exchange.consumer_kwargs.get("copy") is True
        and taken[1].get("copy") is not True
        and not info["flags"] & IS_COPIED
        and pointer == data
    ):
        exchange.violation(
            "consumer.copy-true",
            "copy=True neither passed on nor honoured: the result shares the producer's memory",
        )
