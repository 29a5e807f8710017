"""The conformance rules applied to one exchange at a time: what a consumer asked of a producer's
__dlpack__, what the producer answered, and what the consumer did with the capsule, checked
under the checker's rule ids (dlinterop.testing.RULES) as the exchange happens. The pytest
plugin (dlinterop.pytest_plugin) wraps each argument of a consumer's from_dlpack in a
CheckingProxy and calls check_consumer once the consumer returns; with --dlpack-probe it
also makes the checker's calls that consumers never make (probe). The checks of each part of
an exchange are in dlinterop.testing._call_checks.

The watched exchange is never changed by the checking: what the proxy hands the consumer is
what the producer answered, and what the producer raised is raised; a check that cannot read
what it checks reports a violation of its rule instead of raising. Once the consumer has
returned, the capsule is read by name only (a consumer may have freed its struct).

Nothing here imports a peer: NumPy and PyTorch are looked up in sys.modules, where the objects
being checked came from."""

from __future__ import annotations

import dataclasses
import os
import traceback

from dlinterop import _core
from dlinterop.testing._call_checks import (
    _check_capsule,
    _check_consumer,
    _check_device_answer,
    _check_refusal,
    _device_pair,
    _error_text,
)
from dlinterop.testing._model import RULES, link

# Checked per call only: no checker rule exports something malformed or hands out a capsule
# twice on purpose, but a producer in a real suite may. docs/conformance.md lists them with
# the checker's rules.
CALL_ONLY_RULES = {
    "producer.well-formed": (
        "__dlpack__ returns a DLPack capsule whose tensor an importer can take (ndim, shape, "
        "extents, data pointer, dtype and device make sense)"
    ),
    "producer.fresh-capsule": (
        "each __dlpack__ call returns a new capsule, never one a consumer already consumed"
    ),
    "producer.is-copied-fresh": (
        "a capsule flagged IS_COPIED holds memory the producer does not share"
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
    "producer.is-copied-fresh",
    "producer.read-only",
    "producer.unexportable-buffer-error",
    "producer.well-formed",
    "producer.fresh-capsule",
    "consumer.renames-capsule",
    "consumer.passes-max-version",
    "consumer.stream-cpu",
    "consumer.read-only",
    "consumer.copy-true",
    "consumer.consume-once",
    "consumer.deleter-once",
)

# The calls a probe makes (--dlpack-probe), once per producer type: those of the checker's
# rules a consumer may never make; dl_device= its own device is added where it has one.
PROBE_CALLS: tuple[dict[str, object], ...] = (
    {},
    {"max_version": (1, 3)},
    {"max_version": (1, 3), "copy": True},
    {"max_version": (1, 3), "copy": False},
)

# The checker's own files, whose frames a violation's stack leaves out.
_OWN_FILES = frozenset(
    os.path.normcase(os.path.abspath(os.path.join(os.path.dirname(__file__), f)))
    for f in (
        "_call_rules.py",
        "_call_checks.py",
        "_plugin_checker.py",
        os.path.join("..", "pytest_plugin.py"),
    )
)
# The title the sanitizer gives a watched deleter's second call (src/sanitizer.c).
DELETER_TWICE = "dlinterop sanitizer: a DLPack deleter called twice"


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
    detail: str = ""  # the sanitizer's report, where it saw the violation (its stacks)

    def text(self):
        lines = [
            f"DLPack violation {self.rule}: {self.seen}",
            f"  producer {self.producer}, consumer {self.consumer}",
            f"  rule: {description(self.rule)}",
            f"  docs: {link(self.rule)}",
        ]
        if self.detail:
            lines += ["  " + line for line in self.detail.rstrip("\n").splitlines()]
            return "\n".join(lines)
        lines.append("  exchange made at (most recent call last):")
        lines += ["  " + line for line in "".join(traceback.format_list(self.stack)).splitlines()]
        return "\n".join(lines)


def deleter_violation(report_text):
    """The consumer.deleter-once violation of a sanitizer report of a watched deleter called
    twice (DELETER_TWICE), its producer and consumer read from what the watch was named."""
    title = report_text.splitlines()[0]
    producer, consumer = "?", "?"
    if title.endswith(")") and " -> " in title:
        what = title[title.rindex("(") + 1 : -1]
        producer, _, consumer = what.partition(" -> ")
    return Violation(
        "consumer.deleter-once",
        producer,
        consumer,
        "the deleter of a managed tensor called twice (the second call was not passed on)",
        [],
        detail=report_text,
    )


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


class Call:
    """One __dlpack__ call: what was asked, and the capsule answered (until the exchange
    ends), its name then, and what it held (info, read before any consumer had it). What
    it raised is not kept: its traceback would hold the frames, and through them the
    producer, past the exchange (NumPy's suite counts the producer's references)."""

    __slots__ = ("args", "kwargs", "capsule", "name", "info")

    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs
        self.capsule = self.name = self.info = None


class Exchange:
    """One consumer call: what passed between it and the producer, and what broke a rule.
    `report(violation)` is the plugin's: it attributes the violation to the running test.
    `watch`: each capsule's deleter is watched (a second call reported, not passed on)."""

    __slots__ = ("consumer", "producer", "calls", "device", "report", "consumer_kwargs", "watch")

    def __init__(self, consumer, producer, report, consumer_kwargs, watch=False):
        self.consumer = consumer
        self.producer = producer
        self.calls = []  # Call objects, in call order
        self.device = None  # what __dlpack_device__ last answered
        self.report = report
        self.consumer_kwargs = consumer_kwargs
        self.watch = watch

    def violation(self, rule_id, seen):
        self.report(
            Violation(rule_id, qualified_name(type(self.producer)), self.consumer, seen, _stack())
        )

    def guarded(self, rule_id, check, *args):
        """check(*args); where it fails to read what it checks, a violation of rule_id."""
        try:
            check(*args)
        except Exception as e:
            self.violation(rule_id, f"the checker could not read the answer: {_error_text(e)}")

    def end(self):
        """The capsules are let go: the exchange keeps no capsule alive past its consumer."""
        for call in self.calls:
            call.capsule = None


class CheckingProxy:
    """Stands for a producer in front of a consumer: forwards __dlpack__ and
    __dlpack_device__, records what was asked and answered, and checks the answers. It
    has no __dlpack_c_exchange_api__, so that the exchange goes through __dlpack__, where
    it can be seen."""

    __slots__ = ("_exchange",)

    def __init__(self, exchange):
        self._exchange = exchange

    def __dlpack_device__(self):
        exchange = self._exchange
        device = exchange.producer.__dlpack_device__()
        exchange.device = device
        exchange.guarded("producer.device", _check_device_answer, exchange, device)
        return device

    def __dlpack__(self, *args, **kwargs):
        exchange = self._exchange
        call = Call(args, kwargs)
        exchange.calls.append(call)
        try:
            capsule = exchange.producer.__dlpack__(*args, **kwargs)
        except BaseException as e:
            try:
                exchange.guarded(
                    "producer.unexportable-buffer-error", _check_refusal, exchange, call, e
                )
            finally:
                del e  # (as an except clause does on its own, but not for frames above)
            raise
        call.capsule = capsule
        exchange.guarded("producer.well-formed", _check_capsule, exchange, call)
        if exchange.watch and call.info is not None:
            what = f"{qualified_name(type(exchange.producer))} -> {exchange.consumer}"
            try:
                _core._sanitizer_watch(capsule, what)
            except Exception:  # out of memory for the record: the exchange goes on unwatched
                pass
        return capsule

    def __repr__(self):
        return f"<checking proxy for {self._exchange.producer!r}>"


def check_consumer(exchange, result, raised=False):
    """The consumer rules, once the consumer returned `result` from the exchange (or raised:
    only what a refusal can show). Never raises; lets the exchange's capsules go."""
    try:
        _check_consumer(exchange, result, raised)
    except Exception as e:
        exchange.violation(
            "consumer.renames-capsule", f"the checker could not read the capsule: {_error_text(e)}"
        )
    finally:
        exchange.end()


def probe(producer, consumer, report, watch=False):
    """The checker's calls a consumer never makes (PROBE_CALLS, and dl_device= the
    producer's own device), made on `producer` and checked as a consumer's would be; the
    capsules are dropped unconsumed. Never raises."""
    exchange = Exchange(f"dlinterop probe (after {consumer})", producer, report, {}, watch)
    proxy = CheckingProxy(exchange)
    calls = list(PROBE_CALLS)
    try:
        device = _device_pair(proxy.__dlpack_device__())
    except Exception:
        device = None
    if device is not None:
        calls.append({"max_version": (1, 3), "dl_device": device})
    for kwargs in calls:
        try:
            proxy.__dlpack__(**kwargs)
        except Exception:
            pass  # a refusal is checked by the proxy
    exchange.end()
