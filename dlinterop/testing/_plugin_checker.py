"""The enabled pytest plugin (dlinterop.pytest_plugin makes one when a run asks for it): the
consumers it replaces, the checked wrapper each is replaced by, the relay through dlinterop,
the violations attributed to the running test, and the summary at the end."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from typing import Any

import pytest

# The consumers patched while checking: (module, attribute). pyarrow's Tensor.from_dlpack and
# Array.from_dlpack are methods of extension types, which cannot be patched: pyarrow is
# checked as a producer only.
CONSUMERS = (
    ("numpy", "from_dlpack"),
    ("torch", "from_dlpack"),
    ("torch.utils.dlpack", "from_dlpack"),
    ("jax.dlpack", "from_dlpack"),
    ("jax.numpy", "from_dlpack"),
    ("warp", "from_dlpack"),
    ("mlx.core", "from_dlpack"),
    ("array_api_strict", "from_dlpack"),
)


def _producer_parameter(consumer):
    """The name of a consumer's first parameter where it may be passed by keyword
    (torch.from_dlpack(ext_tensor=x)), else None."""
    try:
        parameters = list(inspect.signature(consumer).parameters.values())
    except (TypeError, ValueError):
        return None
    if parameters and parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
        return parameters[0].name
    return None


class Checker:
    """The enabled plugin: replaces the consumers, attributes violations to the running test,
    reports them, and puts the consumers back at the end."""

    # Modules imported only once the plugin is enabled: dlinterop.testing._call_rules (the
    # checking), dlinterop.sanitizer and dlinterop._core.
    rules: Any
    sanitizer: Any
    sanitizer_core: Any

    def __init__(
        self,
        relay,
        violations,
        allow,
        consumers=CONSUMERS,
        sanitize=False,
        check=True,
        probe=False,
        stderr=None,
    ):
        from dlinterop import _core, sanitizer
        from dlinterop.testing import _call_rules

        self.rules = _call_rules
        unknown = sorted({a.partition(":")[0] for a in allow} - _call_rules.known_ids())
        if unknown:
            raise pytest.UsageError(f"--dlpack-allow: unknown rule ids {', '.join(unknown)}")
        self.allow = [(a.partition(":")[0], a.partition(":")[2]) for a in allow]
        self.relay = relay
        self.check = check  # False: --dlpack-sanitize alone, no consumer is replaced
        self.probe = probe
        self.consumers = tuple(consumers)
        self.fail = violations == "fail"
        self.active = True  # False once the run ended: wrappers still bound pass through
        self.registers = []  # (module name, register) waiting in after_import
        self.patched = []  # (module, attribute, what was there)
        self.probed = set()  # producer types probed
        self.pending = []  # violations of the test phase running now
        self.reported = []  # (nodeid, violation), in order
        self.exchanges = 0
        self.relayed = 0
        self.taken_directly = 0
        self.passed = 0  # tests that passed (a run of skips relays nothing and fails not)
        self.sanitizer = sanitizer
        self.sanitizer_core = _core
        self.sanitizing = sanitize
        self.sanitizer_reports = 0
        self.sanitizer_was_on = sanitizer.is_enabled()
        if stderr is not None:
            sanitizer._report_to(stderr, notes=False)  # the summary lists them
            os.close(stderr)
        if sanitize and not self.sanitizer_was_on:
            sanitizer.enable()
        self.sanitizer_mark = sanitizer.report_count()

    # ---- the consumers

    def install(self):
        """Each consumer replaced now where its module has run, else once it has."""
        if not self.check:
            return
        from dlinterop._integrations import after_import

        attributes = {}
        for module_name, attribute in self.consumers:
            attributes.setdefault(module_name, []).append(attribute)
        for module_name, names in attributes.items():
            register = functools.partial(self.patch_module, module_name, tuple(names))
            self.registers.append((module_name, register))
            after_import.when_imported(module_name, register)

    def patch_module(self, module_name, attributes, module):
        if not self.active:
            return
        for attribute in attributes:
            current = getattr(module, attribute, None)
            if not callable(current) or getattr(current, "__dlpack_checked__", None) is self:
                continue
            wrapper = self.wrap(current, f"{module_name}.{attribute}")
            setattr(module, attribute, wrapper)
            self.patched.append((module, attribute, current))

    def uninstall(self):
        from dlinterop._integrations import after_import

        self.active = False
        for module_name, register in self.registers:
            after_import.forget(module_name, register)
        self.registers.clear()
        while self.patched:
            module, attribute, consumer = self.patched.pop()
            setattr(module, attribute, consumer)
        # A module that bound a replaced consumer while it was replaced (torch's
        # `from torch.utils.dlpack import from_dlpack`, run while torch imports) gets the
        # consumer back too; names bound in tests keep a wrapper that now passes through.
        for module_name, attribute in self.consumers:
            module = sys.modules.get(module_name)
            current = getattr(module, attribute, None) if module is not None else None
            if getattr(current, "__dlpack_checked__", None) is self:
                setattr(module, attribute, current.__wrapped__)

    def wrap(self, consumer, name):
        """`consumer` with each exchange checked: the same signature (inspect.signature
        follows __wrapped__), its producer argument replaced by a checking proxy wherever it
        was passed, positionally or by keyword."""
        checker = self
        proxy_type = self.rules.CheckingProxy
        keyword = _producer_parameter(consumer)

        @functools.wraps(consumer)
        def from_dlpack(*args, **kwargs):
            if not checker.active:
                return consumer(*args, **kwargs)
            if args:
                x = args[0]
            elif keyword is not None and keyword in kwargs:
                x = kwargs[keyword]
            else:
                return consumer(*args, **kwargs)
            # A proxy already is a checked exchange (one consumer calling another).
            if type(x) is proxy_type or getattr(x, "__dlpack__", None) is None:
                return consumer(*args, **kwargs)
            options = {k: v for k, v in kwargs.items() if k != keyword}
            exchange = checker.begin(x, name, options)
            proxy = proxy_type(exchange)
            if args:
                args = (proxy, *args[1:])
            else:
                kwargs = {**kwargs, keyword: proxy}
            try:
                result = consumer(*args, **kwargs)
            except BaseException:
                checker.end(exchange, None, raised=True)
                raise
            checker.end(exchange, result)
            return result

        from_dlpack.__dlpack_checked__ = self
        return from_dlpack

    def begin(self, x, name, options):
        """The exchange of x with consumer `name`, called with `options` (its keywords)."""
        self.exchanges += 1
        source = self.through_dlinterop(x, name, options) if self.relay else x
        if self.sanitizing:
            self.note_producer(source)
        return self.rules.Exchange(name, source, self.report, options, watch=True)

    def end(self, exchange, result, raised=False):
        self.rules.check_consumer(exchange, result, raised)
        if self.probe and type(exchange.producer) not in self.probed:
            self.probed.add(type(exchange.producer))
            self.rules.probe(exchange.producer, exchange.consumer, self.report, watch=True)

    def note_producer(self, x):
        self.sanitizer_core._sanitizer_note_producer(type(x))

    def through_dlinterop(self, x, name, options):
        """dl.from_dlpack(x), itself a checked exchange, asked for the consumer's copy= and
        device= (dlinterop's device where it knows the consumer's); x itself where dlinterop
        refuses it, and where it is a dl.Tensor already (another hop would turn a Tensor of
        a legacy capsule, which may go out as one, into a Tensor READ_ONLY by flag, which
        may not)."""
        import dlinterop as dl

        if type(x) is dl.Tensor:
            self.taken_directly += 1
            return x
        asked = {}
        if options.get("copy") is not None:
            asked["copy"] = options["copy"]
        if options.get("device") is not None:
            try:
                asked["device"] = dl.Device(options["device"])
            except Exception:
                pass  # a device object dlinterop does not know: the consumer places it
        exchange = self.rules.Exchange(
            f"dlinterop.from_dlpack (relay to {name})", x, self.report, asked, watch=True
        )
        if self.sanitizing:
            self.note_producer(x)
        try:
            tensor = dl.from_dlpack(self.rules.CheckingProxy(exchange), **asked)
        except Exception:
            self.rules.check_consumer(exchange, None, raised=True)
            self.taken_directly += 1
            return x
        self.rules.check_consumer(exchange, tensor)
        self.relayed += 1
        return tensor

    def report(self, violation):
        for rule_id, who in self.allow:
            if rule_id == violation.rule and (
                not who
                or any(
                    name == who or name.startswith(who + ".")
                    for name in (violation.producer, violation.consumer)
                )
            ):
                violation.allowed = True
        self.pending.append(violation)

    # ---- pytest's hooks

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        # A test that makes reports on purpose: kept for its report, not written at once.
        quiet = self.sanitizing and item.get_closest_marker("dlpack_sanitizer_expected")
        if quiet:
            self.sanitizer_core._sanitizer_write_reports(False)
        try:
            return (yield)
        finally:
            if quiet:
                self.sanitizer_core._sanitizer_write_reports(True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        texts = self.sanitizer.reports(since=self.sanitizer_mark)
        self.sanitizer_mark = self.sanitizer.report_count()
        twice = [t for t in texts if t.startswith(self.rules.DELETER_TWICE)]
        for text in twice:
            self.report(self.rules.deleter_violation(text))
        found, self.pending = self.pending, []
        if self.sanitizing:
            expected = item.get_closest_marker("dlpack_sanitizer_expected") is not None
            self.sanitized(report, [t for t in texts if t not in twice], expected)
        if report.when == "call" and report.passed:
            self.passed += 1
        if not found:
            return report
        self.reported += [(item.nodeid, v) for v in found]
        failing = [v for v in found if not v.allowed]
        text = "\n\n".join(v.text() for v in found)
        report.sections.append((f"DLPack violations ({call.when})", text))
        if failing and self.fail and report.passed:
            report.outcome = "failed"
            report.longrepr = "\n\n".join(v.text() for v in failing)
        return report

    def sanitized(self, report, texts, expected):
        """The sanitizer's reports made during this test phase: on the test, failing it
        where violations fail, unless the test is marked to expect them."""
        if not texts:
            return
        self.sanitizer_reports += len(texts)
        text = "\n".join(texts)
        report.sections.append((f"dlinterop sanitizer ({report.when})", text))
        if self.fail and report.passed and not expected:
            report.outcome = "failed"
            report.longrepr = text

    def relayed_nothing(self):
        """A relay run that relayed nothing although tests passed proved nothing."""
        return self.relay and self.relayed == 0 and self.passed > 0

    def pytest_sessionfinish(self, session, exitstatus):
        if self.relayed_nothing() and exitstatus == 0:
            session.exitstatus = 1

    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter.write_line
        terminalreporter.section("DLPack exchanges (dlinterop)")
        relayed = (
            f", {self.relayed} relayed through dlinterop, {self.taken_directly} taken directly"
            if self.relay
            else ""
        )
        if self.check:
            probed = f", {len(self.probed)} producer types probed" if self.probe else ""
            write(f"{self.exchanges} exchanges checked{relayed}{probed}")
        if self.relayed_nothing():
            write("nothing was relayed through dlinterop: this run fails")
        elif self.relay and not self.relayed:
            write("nothing was relayed through dlinterop (no test passed)")
        counts = {}
        for _, v in self.reported:
            key = (v.rule, v.allowed)
            counts[key] = counts.get(key, 0) + 1
        for (rule_id, allowed), n in sorted(counts.items()):
            plural = "s" if n != 1 else ""
            write(f"  {rule_id}: {n} violation{plural}{' (allowed)' if allowed else ''}")
        if not counts and self.check:
            write("no violations")
        if self.sanitizing:
            notes = self.sanitizer.notes()
            write(f"sanitizer: {self.sanitizer_reports} reports, {len(notes)} notes")
            for text in notes:
                write("  " + text.rstrip("\n").removeprefix("dlinterop sanitizer: "))
            live = self.sanitizer.format_live()
            if live:
                write(live.rstrip("\n"))
        if not self.fail:
            for nodeid, v in self.reported:
                write(f"\n{nodeid}\n{v.text()}")

    def pytest_unconfigure(self, config):
        if not self.sanitizer_was_on:
            # Also frees the records of the watched deleters already called once.
            self.sanitizer.disable()
        self.uninstall()
