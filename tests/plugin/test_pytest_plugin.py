"""dlinterop.pytest_plugin, through pytest sessions of its own (pytester): its options, its
summary, relay mode, the sanitizer's reports on the tests, and that it does nothing unless
asked (the rules it checks: test_rules_caught.py)."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from dlinterop.testing import _call_rules as call_rules

from plugin_cases import PRODUCERS, exchange_test

np = pytest.importorskip("numpy")
import numpy.ctypeslib  # noqa: E402, F401

try:
    # pytester's in-process runs drop the modules they imported when they end; PyTorch's
    # extension cannot be imported twice, so it is imported here, once, for all of them.
    import torch.utils.dlpack  # noqa: E402, F401
except ImportError:
    pass

PLUGIN = ("-p", "dlinterop.pytest_plugin", "-p", "no:cacheprovider")


def test_report_mode_prints_and_passes_fail_mode_fails(pytester):
    pytester.makepyfile(
        producers=PRODUCERS, test_one=exchange_test("UnknownFlags", "np.from_dlpack(x)")
    )
    failing = pytester.runpytest(*PLUGIN, "--dlpack-violations=fail")
    failing.assert_outcomes(failed=1)
    reported = pytester.runpytest(*PLUGIN, "--dlpack-violations=report")
    reported.assert_outcomes(passed=1)
    out = reported.stdout.str()
    assert "test_one.py::test_exchange" in out
    assert "DLPack violation producer.flags-known" in out
    assert "producer.flags-known: 1 violation" in out


def test_sanitize_option_puts_the_sanitizers_reports_on_the_test(pytester):
    pytester.makepyfile(
        test_lifetimes="""
        import pytest
        import dlinterop as dl
        from dlinterop import sanitizer

        def test_consumes_twice():
            capsule = dl.arange(3).__dlpack__()
            dl.from_dlpack(capsule)
            with pytest.raises(ValueError):
                dl.from_dlpack(capsule)

        def test_clean():
            assert sanitizer.is_enabled()
            dl.from_dlpack(dl.arange(3).__dlpack__())

        kept = []

        def test_keeps_an_export():
            kept.append(dl.arange(3).__dlpack__())

        @pytest.mark.dlpack_sanitizer_expected
        def test_consumes_twice_on_purpose():
            test_consumes_twice()
        """
    )
    # In a process of its own: the inner run keeps an export on purpose.
    result = pytester.runpytest_subprocess(*PLUGIN, "--dlpack-sanitize")
    result.assert_outcomes(failed=1, passed=3)
    out = result.stdout.str()
    assert "dlinterop sanitizer (call)" in out
    assert "a DLPack capsule consumed twice" in out
    assert "in test_consumes_twice" in out
    assert "sanitizer: 2 reports" in out
    assert "dlinterop sanitizer: 1 still live" in out and "in test_keeps_an_export" in out
    # written at once to the terminal's stderr (pytest captures fd 2): only the unexpected
    # report, the expected one kept for the test's report alone
    assert result.stderr.str().count("a DLPack capsule consumed twice") == 1
    reported = pytester.runpytest_subprocess(
        *PLUGIN, "--dlpack-sanitize", "--dlpack-violations=report"
    )
    reported.assert_outcomes(passed=4)


def test_sanitize_alone_replaces_no_consumer(pytester):
    pytester.makepyfile(
        test_alone="""
        import numpy as np

        def test_numpy_untouched():
            assert not hasattr(np.from_dlpack, "__dlpack_checked__")
        """
    )
    alone = pytester.runpytest("-p", "no:cacheprovider", "--dlpack-sanitize")
    alone.assert_outcomes(passed=1)
    assert "exchanges checked" not in alone.stdout.str()
    checking = pytester.runpytest(*PLUGIN, "--dlpack-sanitize")
    checking.assert_outcomes(failed=1)


def test_an_allowed_deviation_is_counted_but_does_not_fail(pytester):
    pytester.makepyfile(
        producers=PRODUCERS, test_one=exchange_test("UnknownFlags", "np.from_dlpack(x)")
    )
    by_rule = pytester.runpytest(*PLUGIN, "--dlpack-allow=producer.flags-known")
    by_rule.assert_outcomes(passed=1)
    assert "producer.flags-known: 1 violation (allowed)" in by_rule.stdout.str()
    by_type = pytester.runpytest(*PLUGIN, "--dlpack-allow=producer.flags-known:producers")
    by_type.assert_outcomes(passed=1)
    other_type = pytester.runpytest(*PLUGIN, "--dlpack-allow=producer.flags-known:torch")
    other_type.assert_outcomes(failed=1)
    unknown = pytester.runpytest(*PLUGIN, "--dlpack-allow=producer.no-such-rule")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    assert "producer.no-such-rule" in unknown.stderr.str()


def test_the_summary_counts_exchanges_and_violations_per_rule(pytester):
    pytester.makepyfile(
        producers=PRODUCERS,
        test_many=textwrap.dedent(
            """\
            import numpy as np
            from producers import NullStrides, UnknownFlags


            def test_good():
                np.from_dlpack(np.arange(3))

            def test_two_bad():
                np.from_dlpack(UnknownFlags())
                np.from_dlpack(UnknownFlags())

            def test_one_bad():
                np.from_dlpack(NullStrides())
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*DLPack exchanges (dlinterop)*",
            "4 exchanges checked",
            "  producer.flags-known: 2 violations",
            "  producer.strides-filled: 1 violation",
        ]
    )


def test_relay_mode_hands_the_consumer_a_tensor_of_dlinterop(pytester):
    pytester.makepyfile(
        recorder=textwrap.dedent(
            """\
            from dlinterop.testing._conformance import consume

            seen = []


            def from_dlpack(x, **kwargs):
                seen.append(type(x._exchange.producer).__qualname__)
                consume(x.__dlpack__(max_version=(1, 3)))
            """
        ),
        test_relay=textwrap.dedent(
            """\
            import numpy as np
            import recorder
            from dlinterop.testing._conformance import Producer


            def test_relayed():
                recorder.from_dlpack(np.arange(3.0))
                assert recorder.seen == ["Tensor"]

            def test_refused_by_dlinterop_goes_directly():
                # two lanes: DLPack has them, dlinterop imports one lane only
                recorder.from_dlpack(
                    Producer(payload=bytes(8), shape=(1,), strides=(1,), code=2, bits=32, lanes=2)
                )
                assert recorder.seen[-1] == "Producer"
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN, "--dlpack-relay", "--dlpack-consumer=recorder:from_dlpack")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["2 exchanges checked, 1 relayed through dlinterop, 1 taken directly"]
    )


def test_relay_mode_fails_a_run_that_relays_nothing(pytester):
    pytester.makepyfile(test_nothing="def test_no_exchange():\n    pass\n")
    result = pytester.runpytest(*PLUGIN, "--dlpack-relay")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    assert "nothing was relayed through dlinterop" in result.stdout.str()


# ---- loading: the entry point, -p, and nothing done unless asked


def fake_distribution(root, name="dlinterop.pytest_plugin"):
    """A distribution on PYTHONPATH whose pytest11 entry point is the plugin's, as the
    installed wheel's is (pyproject.toml), so that pytest autoloads it."""
    info = root / "dlinterop_plugin_entry-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dlinterop-plugin-entry\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(f"[pytest11]\n{name} = dlinterop.pytest_plugin\n")
    return str(root)


PATCHED_CHECK = textwrap.dedent(
    """\
    import numpy as np


    def test_patched():
        print("PATCHED" if hasattr(np.from_dlpack, "__dlpack_checked__") else "UNPATCHED")
        np.from_dlpack(np.arange(3))
    """
)


def run_autoloaded(pytester, *args, entry_name="dlinterop.pytest_plugin"):
    site = pytester.path / f"site-{entry_name}"
    site.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([fake_distribution(site, entry_name)]))
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_autoloaded_and_not_enabled_it_patches_no_consumer(pytester):
    pytester.makepyfile(test_load=PATCHED_CHECK)
    proc = run_autoloaded(pytester)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "UNPATCHED" in proc.stdout
    assert "DLPack exchanges" not in proc.stdout
    # and the plugin was loaded: its options exist
    help_text = run_autoloaded(pytester, "--help").stdout
    assert "--dlpack-check" in help_text


@pytest.mark.parametrize("how", ["--dlpack-check", "ini", "-p"])
def test_autoloaded_it_checks_when_asked(pytester, how):
    pytester.makepyfile(test_load=PATCHED_CHECK)
    args = []
    if how == "ini":
        pytester.makeini("[pytest]\ndlpack_check = true\n")
    elif how == "-p":
        args = ["-p", "dlinterop.pytest_plugin"]
    else:
        args = [how]
    proc = run_autoloaded(pytester, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PATCHED" in proc.stdout and "UNPATCHED" not in proc.stdout
    assert "1 exchanges checked" in proc.stdout


def test_the_entry_point_name_is_what_lets_p_load_it_once(pytester):
    """Under any other entry-point name, -p on top of the autoloaded plugin registers the
    module twice, which pluggy refuses: the name pyproject.toml gives is the module's."""
    pytester.makepyfile(test_load=PATCHED_CHECK)
    proc = run_autoloaded(pytester, "-p", "dlinterop.pytest_plugin", entry_name="dlinterop")
    assert proc.returncode != 0
    assert "already registered" in proc.stdout + proc.stderr
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")) as f:
        pyproject = f.read()
    section = pyproject.split("[project.entry-points.pytest11]")[1]
    assert section.split("\n")[1] == '"dlinterop.pytest_plugin" = "dlinterop.pytest_plugin"'


def test_importing_the_plugin_imports_no_peer_and_no_checker():
    code = (
        "import sys, dlinterop.pytest_plugin; "
        "names = ('numpy', 'torch', 'jax', 'dlinterop.testing'); "
        "print(sorted(m for m in names if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_peer_deviations_ci_allows_each_name_a_rule_and_an_upstream_link():
    """.ci/peer-deviations.txt, the one list of what CI allows in the peers' suites."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", ".ci", "peer-deviations.txt")
    with open(path) as f:
        entries = [line.split() for line in f if line.strip() and not line.startswith("#")]
    assert entries
    for entry in entries:
        assert len(entry) == 2, entry
        allowed, link = entry
        rule_id, _, who = allowed.partition(":")
        assert rule_id in call_rules.known_ids() and who, allowed
        assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/\S+", link), link
