"""dlinterop.pytest_plugin, through pytest sessions of its own (pytester): each rule it checks
per call caught on a broken producer or consumer and reported on the test that made the
exchange (its rule, the producer's type, the consumer, the stack), and no false alarm on
good producers and consumers."""

import re
import textwrap

import pytest

from dlinterop.testing import RULES
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

# (rule, producer class, the exchange the test makes, or None: it must succeed)
PRODUCER_CASES = [
    ("producer.flags-known", "UnknownFlags", "np.from_dlpack(x)"),
    ("producer.strides-filled", "NullStrides", "np.from_dlpack(x)"),
    ("producer.device", "DeviceList", "np.from_dlpack(x)"),
    ("producer.default-legacy", "VersionedForLegacy", "raises: np.from_dlpack(x)"),
    ("producer.max-version-1.", "MajorTwo", "raises: np.from_dlpack(x)"),
    ("producer.copy-true", "CopyIgnored", "np.from_dlpack(x, copy=True)"),
    ("producer.copy-false", "CopiedAnyway", "np.from_dlpack(x, copy=False)"),
    ("producer.read-only", "ReadOnlyWrapper", "np.from_dlpack(x)"),
    ("producer.unexportable-buffer-error", "RuntimeErrorRefusal", "raises: np.from_dlpack(x)"),
    ("producer.unexportable-buffer-error", "TypeErrorRefusal", "raises: np.from_dlpack(x)"),
    ("producer.well-formed", "NullData", "np.from_dlpack(x)"),
]


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
