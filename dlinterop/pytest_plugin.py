"""A pytest plugin that checks every DLPack exchange a test suite makes, call by call, against
the conformance checker's rules (docs/finding-bugs.md):

    pytest -p dlinterop.pytest_plugin                    # check
    pytest -p dlinterop.pytest_plugin --dlpack-relay     # and route each tensor through dlinterop

Installed, it is also loaded through its pytest11 entry point, and then does nothing unless
asked (--dlpack-check, or `dlpack_check = true` in the ini file). This module imports only
the standard library; the checking machinery (dlinterop.testing._call_rules) is imported once
the plugin is enabled, and the peers' consumers are patched only where already imported."""

from __future__ import annotations

import functools
import sys

import pytest

NAME = "dlinterop.pytest_plugin"

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
)


def pytest_addoption(parser):
    group = parser.getgroup("dlpack", "DLPack exchanges checked (dlinterop)")
    group.addoption(
        "--dlpack-check",
        action="store_true",
        default=None,
        help="check every DLPack exchange through a known consumer against the conformance "
        "rules (on already when the plugin is loaded with -p dlinterop.pytest_plugin)",
    )
    group.addoption(
        "--dlpack-relay",
        action="store_true",
        default=False,
        help="route each exchange producer -> dlinterop -> consumer (implies --dlpack-check); "
        "a run that relays nothing fails",
    )
    group.addoption(
        "--dlpack-violations",
        choices=("fail", "report"),
        default="fail",
        help="fail: a test that breaks a rule fails; report: violations are only printed",
    )
    group.addoption(
        "--dlpack-allow",
        action="append",
        default=[],
        metavar="RULE[:TYPE][,...]",
        help="known deviations that do not fail the run: a rule id, optionally only for a "
        "producer type or consumer (a qualified name or its module prefix)",
    )
    group.addoption(
        "--dlpack-consumer",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="another consumer to check, beside NumPy's, PyTorch's, JAX's, Warp's and MLX's "
        "from_dlpack (repeat)",
    )
    group.addoption(
        "--dlpack-sanitize",
        action="store_true",
        default=False,
        help="run the tests under dlinterop's lifetime sanitizer (dlinterop.sanitizer): its "
        "reports (a deleter called twice, a capsule consumed twice, ...) fail the test that "
        "made them, unless it is marked dlpack_sanitizer_expected",
    )
    parser.addini("dlpack_check", "check DLPack exchanges (as --dlpack-check)", type="bool")
    parser.addini(
        "dlpack_allow", "known deviations, one RULE[:TYPE] a line (as --dlpack-allow)", "linelist"
    )


def _requested_explicitly(config):
    """-p dlinterop.pytest_plugin (or a conftest's pytest_plugins), not the entry point."""
    if NAME in (getattr(config.known_args_namespace, "plugins", None) or []):
        return True
    module = sys.modules[__name__]
    return not any(plugin is module for plugin, _ in config.pluginmanager.list_plugin_distinfo())


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "dlpack_sanitizer_expected: the sanitizer's reports of this test (a deliberate double "
        "consume, say) are shown, not failing it (--dlpack-sanitize)",
    )
    relay = config.getoption("dlpack_relay")
    sanitize = config.getoption("dlpack_sanitize")
    enabled = config.getoption("dlpack_check")
    if enabled is None:
        enabled = bool(config.getini("dlpack_check")) or _requested_explicitly(config)
    if not (enabled or relay or sanitize):
        return
    allow = [
        item.strip()
        for entry in list(config.getini("dlpack_allow")) + config.getoption("dlpack_allow")
        for item in entry.split(",")
        if item.strip()
    ]
    consumers = list(CONSUMERS)
    for spec in config.getoption("dlpack_consumer"):
        module, _, attribute = spec.partition(":")
        if not module or not attribute:
            raise pytest.UsageError(f"--dlpack-consumer {spec!r}: expected MODULE:FUNCTION")
        consumers.append((module, attribute))
    checker = Checker(
        relay,
        config.getoption("dlpack_violations"),
        allow,
        consumers,
        sanitize=sanitize,
        check=bool(enabled or relay),
    )
    config.pluginmanager.register(checker, "dlinterop-dlpack-checker")


class Checker:
    """The enabled plugin: patches the consumers, attributes violations to the running test,
    reports them, and restores the consumers at the end."""

    def __init__(self, relay, violations, allow, consumers=CONSUMERS, sanitize=False, check=True):
        from dlinterop.testing import _call_rules

        # what the checking takes from _call_rules (imported only now that it is enabled)
        self.Exchange = _call_rules.Exchange
        self.CheckingProxy = _call_rules.CheckingProxy
        self.check_consumer = _call_rules.check_consumer
        unknown = sorted({a.partition(":")[0] for a in allow} - _call_rules.known_ids())
        if unknown:
            raise pytest.UsageError(f"--dlpack-allow: unknown rule ids {', '.join(unknown)}")
        self.allow = [(a.partition(":")[0], a.partition(":")[2]) for a in allow]
        self.relay = relay
        self.check = check  # False: --dlpack-sanitize alone, no consumer is replaced
        self.consumers = tuple(consumers)
        self.fail = violations == "fail"
        self.patched = []
        self.pending = []  # violations of the test phase running now
        self.reported = []  # (nodeid, violation), in order
        self.exchanges = 0
        self.relayed = 0
        self.taken_directly = 0
        self.sanitizer = None
        self.sanitizer_reports = 0
        if sanitize:
            from dlinterop import sanitizer

            self.sanitizer = sanitizer
            self.sanitizer_was_on = sanitizer.is_enabled()
            if not self.sanitizer_was_on:
                sanitizer.enable()
            self.sanitizer_mark = sanitizer.report_count()

    # ---- the consumers

    def patch_present(self):
        if not self.check:
            return
        for module_name, attribute in self.consumers:
            module = sys.modules.get(module_name)
            consumer = getattr(module, attribute, None) if module is not None else None
            if consumer is None or getattr(consumer, "__dlpack_checked__", None) is self:
                continue
            setattr(module, attribute, self.wrap(consumer, f"{module_name}.{attribute}"))
            self.patched.append((module, attribute, consumer))

    def wrap(self, consumer, name):
        proxy, exchange_of, check_consumer = self.CheckingProxy, self.Exchange, self.check_consumer
        checker = self

        @functools.wraps(consumer)
        def from_dlpack(x, *args, **kwargs):
            # A proxy already is a checked exchange (one consumer calling another).
            if type(x) is proxy or getattr(x, "__dlpack__", None) is None:
                return consumer(x, *args, **kwargs)
            checker.exchanges += 1
            source = checker.through_dlinterop(x, name) if checker.relay else x
            exchange = exchange_of(name, source, checker.report, kwargs)
            result = consumer(proxy(exchange), *args, **kwargs)
            check_consumer(exchange, result)
            return result

        from_dlpack.__dlpack_checked__ = self
        return from_dlpack

    def through_dlinterop(self, x, name):
        """dl.from_dlpack(x), itself a checked exchange; x itself where dlinterop refuses it,
        and where it is a dl.Tensor already (another hop would turn a Tensor of a legacy
        capsule, which may go out as one, into a Tensor READ_ONLY by flag, which may not)."""
        import dlinterop as dl

        if type(x) is dl.Tensor:
            self.taken_directly += 1
            return x
        exchange = self.Exchange(f"dlinterop.from_dlpack (relay to {name})", x, self.report, {})
        try:
            tensor = dl.from_dlpack(self.CheckingProxy(exchange))
        except Exception:
            self.taken_directly += 1
            return x
        self.check_consumer(exchange, tensor)
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

    def pytest_collection_finish(self, session):
        self.patch_present()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.patch_present()  # consumers a test module imported since

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        found, self.pending = self.pending, []
        if self.sanitizer is not None:
            texts = self.sanitizer.reports(since=self.sanitizer_mark)
            self.sanitizer_mark = self.sanitizer.report_count()
            expected = item.get_closest_marker("dlpack_sanitizer_expected") is not None
            self.sanitized(report, texts, expected)
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

    def pytest_sessionfinish(self, session, exitstatus):
        if self.relay and self.relayed == 0 and exitstatus == 0:
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
            write(f"{self.exchanges} exchanges checked{relayed}")
        if self.relay and not self.relayed:
            write("nothing was relayed through dlinterop: this run fails")
        counts = {}
        for _, v in self.reported:
            key = (v.rule, v.allowed)
            counts[key] = counts.get(key, 0) + 1
        for (rule_id, allowed), n in sorted(counts.items()):
            plural = "s" if n != 1 else ""
            write(f"  {rule_id}: {n} violation{plural}{' (allowed)' if allowed else ''}")
        if not counts and self.check:
            write("no violations")
        if self.sanitizer is not None:
            write(f"sanitizer: {self.sanitizer_reports} reports")
            live = self.sanitizer.format_live()
            if live:
                write(live.rstrip("\n"))
        if not self.fail:
            for nodeid, v in self.reported:
                write(f"\n{nodeid}\n{v.text()}")

    def pytest_unconfigure(self, config):
        if self.sanitizer is not None and not self.sanitizer_was_on:
            self.sanitizer.disable()
        while self.patched:
            module, attribute, consumer = self.patched.pop()
            setattr(module, attribute, consumer)
