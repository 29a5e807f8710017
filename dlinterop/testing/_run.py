"""Running rules: each framework in a child process (a crash fails one rule, a new child runs
the rest), or in this one for a Framework object."""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterable

from dlinterop.testing._frameworks import FRAMEWORKS, Framework, framework
from dlinterop.testing._model import (
    ROLES,
    RULES,
    NotApplicable,
    Report,
    Result,
    RuleFailure,
    link,
)


def _run_rule(rule, fw):
    try:
        note = rule.function(fw)
    except NotApplicable as e:
        return Result(rule.id, fw.name, rule.role, "n/a", str(e))
    except RuleFailure as e:
        return Result(rule.id, fw.name, rule.role, "fail", str(e))
    except Exception as e:
        text = str(e).splitlines()[0][:160] if str(e) else ""
        return Result(rule.id, fw.name, rule.role, "fail", f"{type(e).__name__}: {text}")
    finally:
        gc.collect()
    return Result(rule.id, fw.name, rule.role, "pass", note or "")


def _selected(role, rules):
    chosen = [r for r in RULES if role in (None, r.role)]
    if rules is not None:
        wanted = set(rules)
        unknown = wanted - {r.id for r in RULES}
        if unknown:
            raise ValueError(f"unknown rules: {', '.join(sorted(unknown))}")
        if not wanted:
            raise ValueError("rules= names no rule: nothing to check")
        chosen = [r for r in chosen if r.id in wanted]
        if not chosen:
            raise ValueError(
                f"none of the rules {', '.join(sorted(wanted))} is a {role} rule: nothing to check"
            )
    return chosen


def _worker(spec, rule_ids):
    """In the child: run the named rules, one JSON line each, flushed as it goes."""
    fw = framework(spec)
    by_id = {r.id: r for r in RULES}
    for rule_id in rule_ids:
        print(json.dumps(dataclasses.asdict(_run_rule(by_id[rule_id], fw))), flush=True)


def _isolated(spec, name, rules, timeout):
    results = []
    pending = [r.id for r in rules]
    role_of = {r.id: r.role for r in rules}
    while pending:
        code = f"import dlinterop.testing as t; t._worker({spec!r}, {pending!r})"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
            )
            stdout, returncode, stderr = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            returncode, stderr = "timeout", ""
        done = []
        for line in stdout.splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("rule") in role_of:
                results.append(Result(**data))
                done.append(data["rule"])
        pending = pending[len(done) :]
        if not pending:
            break
        if returncode == 0:
            raise RuntimeError(f"the checker's child stopped early: {stderr[-400:]}")
        if not done and returncode != "timeout" and _setup_failed(stderr):
            # Nothing was checked: every rule fails (n/a would read as a pass, and a
            # framework that cannot be set up must fail --strict and assert_conforms).
            reason = "cannot be set up: " + _crash_line(stderr)
            results += [Result(rid, name, role_of[rid], "fail", reason) for rid in pending]
            break
        crashed = pending.pop(0)
        how = (
            "timed out"
            if returncode == "timeout"
            else f"crashed (signal {-returncode})"
            if returncode < 0
            else f"exited with status {returncode}"
        )
        results.append(
            Result(
                crashed,
                name,
                role_of[crashed],
                "fail",
                f"the process {how}: {_crash_line(stderr)}".rstrip(": "),
            )
        )
    return results


def _crash_line(text):
    """What a child that crashed, or could not set up, said of it: the message of the C++
    exception that ended it (PyTorch's c10::Error, after "what():"), else its last line that
    is not a native backtrace frame. Frames name addresses and the machine's paths, which a
    report (and docs/conformance.md, made from one) must not carry."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    for line in lines:
        if line.startswith("what():"):
            return line[len("what():") :].strip()[:200]
    plain = [line for line in lines if not line.startswith("frame #")]
    return plain[-1][:200] if plain else ""


def _setup_failed(stderr):
    return "Traceback" in (stderr or "") and "_worker" in stderr and "framework(" in stderr


def check(spec, role=None, rules=None, *, isolate=None, timeout=300):
    """Checks a framework in one role ("producer", "consumer") or both; returns a Report.
    Builtin names and "module:callable" run in a child process (isolate=True); a
    Framework object runs in this one."""
    if role not in (None,) + ROLES:
        raise ValueError(f"role must be 'producer', 'consumer' or None, got {role!r}")
    chosen = _selected(role, rules)
    if isinstance(spec, Framework):
        if isolate:
            raise ValueError(
                "a Framework object is checked in this process; give a name "
                "or 'module:callable' to isolate"
            )
        return Report(spec.name, [_run_rule(r, spec) for r in chosen])
    name = spec if ":" not in spec else spec.partition(":")[2]
    if isolate is False:
        fw = framework(spec)
        return Report(fw.name, [_run_rule(r, fw) for r in chosen])
    _require_checkable(spec)
    return Report(name, _isolated(spec, name, chosen, timeout))


# Builtin names that are not their module's name.
_MODULES = {"cuda_core": "cuda.core", "mlx": "mlx.core"}


def _require_checkable(spec):
    """ValueError for a name the checker does not know; ModuleNotFoundError where the module
    a builtin name or "module:callable" comes from is not installed (nothing could be
    checked: every rule would fail as "cannot be set up")."""
    if ":" not in spec and spec not in FRAMEWORKS:
        raise ValueError(f"unknown framework {spec!r}; builtin ones: {', '.join(FRAMEWORKS)}")
    module = _MODULES.get(spec, spec.partition(":")[0])
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent is missing
        found = False
    if not found:
        raise ModuleNotFoundError(
            f"{module} is not installed here: {spec} cannot be checked", name=module
        )


def check_producer(spec, rules=None, **kwargs):
    """check(spec, "producer", ...)."""
    return check(spec, "producer", rules, **kwargs)


def check_consumer(spec, rules=None, **kwargs):
    """check(spec, "consumer", ...)."""
    return check(spec, "consumer", rules, **kwargs)


def assert_conforms(report, allow: Iterable[str] = ()):
    """Raises AssertionError naming every failing rule (pytest shows the list), except the
    rule ids in `allow`."""
    allowed = set(allow)
    failing = [r for r in report.failures() if r.rule not in allowed]
    if failing:
        lines = "\n".join(
            f"  {r.rule} [{r.role}]: {r.reason}\n    docs: {link(r.rule)}" for r in failing
        )
        raise AssertionError(
            f"{report.framework} fails {len(failing)} DLPack rule"
            f"{'' if len(failing) == 1 else 's'}:\n{lines}"
        )
