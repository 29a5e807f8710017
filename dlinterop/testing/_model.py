"""What a conformance rule is and what checking one gives: Rule and its registry (RULES,
filled by rule() and register() beside each rule's function), Result, Report, and the two
outcomes a rule raises besides passing (NotApplicable, RuleFailure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from dlinterop._core import _DLPACK_FLAGS

# DLPack's flags, as the core knows them (dlpack.h's DLPACK_FLAG_BITMASK_*).
READ_ONLY = _DLPACK_FLAGS["DLPACK_FLAG_BITMASK_READ_ONLY"]
IS_COPIED = _DLPACK_FLAGS["DLPACK_FLAG_BITMASK_IS_COPIED"]
IS_SUBBYTE_TYPE_PADDED = _DLPACK_FLAGS["DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED"]
KNOWN_FLAGS = sum(_DLPACK_FLAGS.values())
ROLES = ("producer", "consumer")

# Each rule's entry: docs/conformance.md, one heading per rule id ("The rules"), linked from
# the checker's failures and from the pytest plugin's reports alike.
DOCS = "https://github.com/dlinterop/dlinterop/blob/main/docs/conformance.md"


def anchor(rule_id):
    """The anchor docs/conformance.md gives the heading of `rule_id` (GitHub's and MyST's)."""
    return rule_id.replace(".", "")


def link(rule_id):
    """The URL of a rule's entry in docs/conformance.md."""
    return f"{DOCS}#{anchor(rule_id)}"


class NotApplicable(Exception):
    """Raised by a rule that does not apply to the framework; the message says why."""


class RuleFailure(AssertionError):
    """Raised by a rule that the framework breaks; the message says how."""


def _fail(reason):
    raise RuleFailure(reason)


@dataclasses.dataclass(frozen=True)
class Result:
    rule: str
    framework: str
    role: str
    result: str  # "pass", "fail" or "n/a"
    reason: str = ""


@dataclasses.dataclass
class Report:
    """The results of checking one framework (in one or both roles)."""

    framework: str
    results: list

    def counts(self):
        out = {"pass": 0, "fail": 0, "n/a": 0}
        for r in self.results:
            out[r.result] += 1
        return out

    def failures(self):
        return [r for r in self.results if r.result == "fail"]

    def as_dict(self):
        return {"results": [dataclasses.asdict(r) for r in self.results]}

    def __bool__(self):
        return not self.failures()


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    role: str
    function: Callable
    description: str


RULES: list[Rule] = []  # in the order rules are registered, which is the order they print


def register(rule_id: str, function: Callable, description: str) -> Callable:
    """Adds a rule (its role is the prefix of its id: "producer." or "consumer.")."""
    role = rule_id.partition(".")[0]
    if role not in ROLES:
        raise ValueError(f"a rule id starts with 'producer.' or 'consumer.', got {rule_id!r}")
    if any(r.id == rule_id for r in RULES):
        raise ValueError(f"rule {rule_id!r} is registered twice")
    RULES.append(Rule(rule_id, role, function, description))
    return function


def rule(rule_id: str, description: str) -> Callable[[Callable], Callable]:
    """Decorator: the function below is the rule `rule_id`."""
    return lambda function: register(rule_id, function, description)
