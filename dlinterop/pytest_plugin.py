"""A pytest plugin that checks every DLPack exchange a test suite makes, call by call, against
the conformance checker's rules (docs/finding-bugs.md):

    pytest -p dlinterop.pytest_plugin                    # check
    pytest -p dlinterop.pytest_plugin --dlpack-relay     # and route each tensor through dlinterop

Installed, it is also loaded through its pytest11 entry point, and then does nothing unless
asked (--dlpack-check, or `dlpack_check = true` in the ini file). This module imports only
the standard library; the checker it registers (dlinterop.testing._plugin_checker) and the
checking machinery (dlinterop.testing._call_rules) are imported once the plugin is enabled.
The peers' consumers are replaced when the run is configured, before any test module is
imported (so that `from numpy import from_dlpack` binds the checked one), and those imported
later as soon as they are (dlinterop._integrations.after_import); each keeps its signature,
and all are put back when the run ends."""

from __future__ import annotations

import os
import sys

import pytest

NAME = "dlinterop.pytest_plugin"

# A duplicate of fd 2 taken before pytest's capture redirects it (--dlpack-sanitize): where
# the sanitizer writes its reports, so that they are seen even when a fault ends the process.
_STDERR = pytest.StashKey[int]()


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
        "--dlpack-probe",
        action="store_true",
        default=False,
        help="once per producer type, also make the checker's calls consumers never make "
        "(no max_version, copy=True, copy=False, dl_device=) and check the answers",
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


def _sanitizer_asked(config):
    return getattr(config.known_args_namespace, "dlpack_sanitize", False) or os.environ.get(
        "DLINTEROP_SANITIZE", ""
    ) not in ("", "0")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # Before the capture manager's own wrapper starts redirecting fd 2.
    if _sanitizer_asked(early_config):
        early_config.stash[_STDERR] = os.dup(2)
    return (yield)


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
        stderr = config.stash.get(_STDERR, None)
        if stderr is not None:  # DLINTEROP_SANITIZE=1: its reports where they are seen too
            from dlinterop import sanitizer

            sanitizer._report_to(stderr)
            os.close(stderr)
        return
    allow = [
        item.strip()
        for entry in list(config.getini("dlpack_allow")) + config.getoption("dlpack_allow")
        for item in entry.split(",")
        if item.strip()
    ]
    from dlinterop.testing._plugin_checker import CONSUMERS, Checker

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
        probe=config.getoption("dlpack_probe"),
        stderr=config.stash.get(_STDERR, None),
    )
    config.pluginmanager.register(checker, "dlinterop-dlpack-checker")
    checker.install()
