"""dlinterop.pytest_plugin, through pytest sessions of its own (pytester): each rule it checks
per call caught on a broken producer or consumer and reported on the test that made the
exchange, its options, its summary, relay mode, and that it does nothing unless asked."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from dlinterop.testing import RULES
from dlinterop.testing import _call_rules as call_rules

np = pytest.importorskip("numpy")
import numpy.ctypeslib  # noqa: E402, F401

try:
    # pytester's in-process runs drop the modules they imported when they end; PyTorch's
    # extension cannot be imported twice, so it is imported here, once, for all of them.
    import torch.utils.dlpack  # noqa: E402, F401
except ImportError:
    pass

PLUGIN = ("-p", "dlinterop.pytest_plugin", "-p", "no:cacheprovider")

# Producers that break one rule each, for NumPy's from_dlpack: a Python class delegating
# to a native producer built to order (dlinterop.testing._conformance.Producer).
PRODUCERS = """
import numpy as np
from dlinterop.testing._conformance import Producer

IS_COPIED = 2


def native(**fields):
    fields.setdefault("strides", (1,))
    return Producer(payload=bytes(range(4)), shape=(4,), **fields)


class Broken:
    def __init__(self, **fields):
        self.native = native(**fields)

    def __dlpack_device__(self):
        return self.native.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.native.__dlpack__(**kwargs)


class UnknownFlags(Broken):
    def __init__(self):
        super().__init__(flags=0x80)


class NullStrides(Broken):
    def __init__(self):
        super().__init__(strides=None)


class DeviceList(Broken):
    def __dlpack_device__(self):
        return [1, 0]


class VersionedForLegacy(Broken):
    def __init__(self):
        super().__init__(old_signature=True, force_versioned=True)


class MajorTwo(Broken):
    def __init__(self):
        super().__init__(major=2)


class CopyIgnored(Broken):
    def __dlpack__(self, copy=None, **kwargs):
        return self.native.__dlpack__(**kwargs)


class CopiedAnyway(Broken):
    def __init__(self):
        super().__init__(flags=IS_COPIED)


class ReadOnlyBuffer(bytes):
    def __new__(cls):
        made = super().__new__(cls, bytes(range(4)))
        made.native = native()
        return made

    def __dlpack_device__(self):
        return self.native.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.native.__dlpack__(**kwargs)


class RuntimeErrorRefusal(Broken):
    def __dlpack__(self, **kwargs):
        raise RuntimeError("cannot export this")


class TypeErrorRefusal(Broken):
    def __dlpack__(self, **kwargs):
        raise TypeError("cannot export this dtype")


class NullData(Broken):
    def __init__(self):
        super().__init__(null_data=True)
"""

# (rule, producer class, the exchange the test makes, or None: it must succeed)
PRODUCER_CASES = [
    ("producer.flags-known", "UnknownFlags", "np.from_dlpack(x)"),
    ("producer.strides-filled", "NullStrides", "np.from_dlpack(x)"),
    ("producer.device", "DeviceList", "np.from_dlpack(x)"),
    ("producer.default-legacy", "VersionedForLegacy", "raises: np.from_dlpack(x)"),
    ("producer.max-version-1.", "MajorTwo", "raises: np.from_dlpack(x)"),
    ("producer.copy-true", "CopyIgnored", "np.from_dlpack(x, copy=True)"),
    ("producer.copy-false", "CopiedAnyway", "np.from_dlpack(x, copy=False)"),
    ("producer.read-only", "ReadOnlyBuffer", "np.from_dlpack(x)"),
    ("producer.unexportable-buffer-error", "RuntimeErrorRefusal", "raises: np.from_dlpack(x)"),
    ("producer.unexportable-buffer-error", "TypeErrorRefusal", "raises: np.from_dlpack(x)"),
    ("producer.well-formed", "NullData", "np.from_dlpack(x)"),
]


def exchange_test(producer, exchange):
    if exchange.startswith("raises: "):
        body = f"with pytest.raises(Exception):\n        {exchange[len('raises: ') :]}"
    else:
        body = exchange
    return (
        f"import pytest\nfrom producers import {producer}\nimport numpy as np\n\n\n"
        f"def test_exchange():\n    x = {producer}()\n    {body}\n"
    )


@pytest.mark.parametrize(
    "rule,producer,exchange", PRODUCER_CASES, ids=[f"{r}-{p}" for r, p, _ in PRODUCER_CASES]
)
def test_a_broken_producer_fails_the_test_naming_rule_type_and_test(
    pytester, rule, producer, exchange
):
    pytester.makepyfile(producers=PRODUCERS, test_one=exchange_test(producer, exchange))
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert re.search(rf"DLPack violation {re.escape(rule)}[\w.-]*: ", out), out
    assert f"producer producers.{producer}, consumer numpy.from_dlpack" in out
    assert "test_one.py::test_exchange" in out or "test_exchange" in out
    # the traceback ends at the test's own call, without the plugin's frames
    assert re.search(r'test_one.py", line \d+, in test_exchange', out), out
    assert "_call_rules.py" not in out.split("exchange made at")[1].split("\n\n")[0]
    rule_id = re.search(rf"DLPack violation ({re.escape(rule)}[\w.-]*)", out).group(1)
    assert call_rules.link(rule_id) in out


# Consumers that break one rule each, patched in through --dlpack-consumer.
CONSUMERS = """
import ctypes

import numpy as np
from dlinterop.testing._conformance import consume, inspect

_USED = ctypes.c_char_p(b"used_dltensor_versioned")
ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _writable_view(capsule):
    # Marked used but its deleter never run, on purpose: the array views the memory for good.
    info = inspect(capsule)
    address = info["data"] + info["byte_offset"]
    ctypes.pythonapi.PyCapsule_SetName(capsule, _USED)
    return np.ctypeslib.as_array((ctypes.c_uint8 * 4).from_address(address))


def keeps_the_name(x, **kwargs):
    x.__dlpack__(max_version=(1, 3))
    return None


def no_max_version(x, **kwargs):
    consume(x.__dlpack__())
    return None


def stream_for_cpu(x, **kwargs):
    consume(x.__dlpack__(max_version=(1, 3), stream=1))
    return None


def writes_read_only(x, **kwargs):
    return _writable_view(x.__dlpack__(max_version=(1, 3)))


def ignores_copy(x, copy=None, **kwargs):
    return _writable_view(x.__dlpack__(max_version=(1, 3)))
"""

CONSUMER_CASES = [
    ("consumer.renames-capsule", "keeps_the_name", {}),
    ("consumer.passes-max-version", "no_max_version", {}),
    ("consumer.stream-cpu", "stream_for_cpu", {}),
    ("consumer.read-only", "writes_read_only", {"flags": 1}),
    ("consumer.copy-true", "ignores_copy", {"copy": True}),
]


@pytest.mark.parametrize(
    "rule,consumer,settings", CONSUMER_CASES, ids=[r for r, _, _ in CONSUMER_CASES]
)
def test_a_broken_consumer_fails_the_test_naming_rule_and_consumer(
    pytester, rule, consumer, settings
):
    flags = settings.get("flags", 0)
    call = "consumers.{}(x{})".format(consumer, ", copy=True" if settings.get("copy") else "")
    pytester.makepyfile(
        consumers=CONSUMERS,
        test_one=textwrap.dedent(
            f"""\
            import consumers
            from dlinterop.testing._conformance import Producer


            def test_exchange():
                x = Producer(payload=bytes(4), shape=(4,), strides=(1,), flags={flags})
                {call}
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN, f"--dlpack-consumer=consumers:{consumer}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"DLPack violation {rule}: " in out, out
    assert f"consumer consumers.{consumer}" in out
    assert "producer dlinterop.testing._conformance.Producer" in out
    # one rule broken, one reported
    assert len(set(re.findall(r"DLPack violation ([\w.-]+):", out))) == 1, out


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


def test_good_producers_and_consumers_break_no_rule(pytester):
    torch = pytest.importorskip("torch")
    del torch
    pytester.makepyfile(
        test_good=textwrap.dedent(
            """\
            import numpy as np
            import pytest
            import torch
            import torch.utils.dlpack

            import dlinterop as dl


            def producers():
                readonly = np.arange(6.0).reshape(2, 3)
                readonly.flags.writeable = False
                return [
                    np.arange(6.0).reshape(2, 3),
                    np.arange(10)[::2],
                    np.zeros((0, 3), np.float32),
                    np.array(3.0),
                    readonly,
                    torch.arange(6.0).reshape(2, 3),
                    torch.arange(10)[::2],
                    dl.zeros((2, 3), "float32"),
                ]


            @pytest.mark.parametrize("copy", [None, True, False])
            def test_numpy_consumes(copy):
                for x in producers():
                    try:
                        np.from_dlpack(x, copy=copy)
                    except (BufferError, ValueError):
                        pass  # a copy it may not make

            def test_torch_consumes():
                for x in producers()[:4] + producers()[5:]:
                    torch.from_dlpack(x)
                    torch.utils.dlpack.from_dlpack(x)
                    torch.from_dlpack(x, copy=True)
            """
        ),
    )
    # torch's copy=True export lacks IS_COPIED: a known deviation (docs/conformance.md)
    known = "--dlpack-allow=producer.copy-true:torch"
    for options in ((), ("--dlpack-relay",)):
        result = pytester.runpytest(*PLUGIN, known, *options)
        result.assert_outcomes(passed=4)
        out = result.stdout.str()
        counted = re.findall(r"^  ([\w.-]+): \d+ violations?( \(allowed\))?$", out, re.M)
        assert counted in ([], [("producer.copy-true", " (allowed)")]), out
        checked = int(re.search(r"(\d+) exchanges checked", out).group(1))
        assert checked >= 40


def test_torch_writing_a_read_only_array_is_caught(pytester):
    """A real peer's deviation (docs/conformance.md's matrix): torch has no read-only
    tensors, so a read-only NumPy array becomes a writable tensor over its memory."""
    pytest.importorskip("torch")
    pytester.makepyfile(
        test_torch=textwrap.dedent(
            """\
            import numpy as np
            import torch


            def test_read_only():
                a = np.arange(4.0)
                a.flags.writeable = False
                torch.from_dlpack(a)
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    assert "DLPack violation consumer.read-only" in result.stdout.str()
    assert "producer numpy.ndarray, consumer torch.from_dlpack" in result.stdout.str()


def test_every_rule_checked_per_call_is_a_checker_rule_or_documented_as_call_only():
    checker_ids = {r.id for r in RULES}
    for rule_id in call_rules.CALL_RULES:
        assert rule_id in checker_ids or rule_id in call_rules.CALL_ONLY_RULES, rule_id
    assert not set(call_rules.CALL_ONLY_RULES) & checker_ids


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
