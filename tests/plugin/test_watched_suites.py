"""The plugin in front of a suite it watches: every exchange seen (names bound by
`from ... import from_dlpack` included), the consumers' signatures kept, put back at the end,
a real peer that frees the tensor at once checked without a crash, relay mode's first hop
asked what the consumer asked, and the probe calls."""

import inspect
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")

try:
    # pytester's in-process runs drop the modules they imported when they end; PyTorch's
    # extension cannot be imported twice, so it is imported here, once, for all of them.
    import torch
    import torch.utils.dlpack
except ImportError:
    torch = None

PLUGIN = ("-p", "dlinterop.pytest_plugin", "-p", "no:cacheprovider")

# Broken in one way each (dlinterop.testing._conformance.Producer builds them to order).
PRODUCERS = """
from dlinterop.testing._conformance import Producer


class UnknownFlags(Producer):
    def __init__(self):
        super().__init__(payload=bytes(4), shape=(4,), strides=(1,), flags=0x80)


class CopyIgnored(Producer):
    def __init__(self):
        super().__init__(payload=bytes(4), shape=(4,), strides=(1,))

    def __dlpack__(self, copy=None, **kwargs):
        return super().__dlpack__(**kwargs)


class VersionedWhenAskedLegacy(Producer):
    def __init__(self):
        super().__init__(payload=bytes(4), shape=(4,), strides=(1,))

    def __dlpack__(self, **kwargs):
        self.force_versioned = "max_version" not in kwargs
        return super().__dlpack__(**kwargs)
"""


def test_names_bound_by_from_import_are_the_checked_ones(pytester):
    pytester.makepyfile(
        producers=PRODUCERS,
        test_bound=textwrap.dedent(
            """\
            from numpy import from_dlpack
            from producers import UnknownFlags


            def test_bound_by_name():
                assert hasattr(from_dlpack, "__dlpack_checked__")
                from_dlpack(UnknownFlags())
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    assert "DLPack violation producer.flags-known" in result.stdout.str()
    assert "consumer numpy.from_dlpack" in result.stdout.str()


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_torchs_consumer_bound_by_name_and_called_by_keyword_is_checked(pytester):
    pytester.makepyfile(
        producers=PRODUCERS,
        test_torch=textwrap.dedent(
            """\
            import numpy as np
            import torch
            from torch.utils.dlpack import from_dlpack
            from producers import UnknownFlags


            def test_keyword_argument_works_as_without_the_plugin():
                assert torch.from_dlpack(ext_tensor=np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]

            def test_bound_by_name():
                from_dlpack(UnknownFlags())
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    assert "consumer torch.utils.dlpack.from_dlpack" in result.stdout.str()
    assert "2 exchanges checked" in result.stdout.str()


def test_a_consumer_imported_after_the_run_began_is_checked_when_imported(pytester):
    # In a process of its own: the consumer's module must not have been imported before.
    pytester.makepyfile(
        late_consumer=textwrap.dedent(
            """\
            from dlinterop.testing._conformance import consume


            def from_dlpack(x):
                consume(x.__dlpack__(max_version=(1, 3)))
            """
        ),
        producers=PRODUCERS,
        test_late=textwrap.dedent(
            """\
            import sys
            from producers import UnknownFlags


            def test_imported_late():
                assert "late_consumer" not in sys.modules
                from late_consumer import from_dlpack
                from_dlpack(UnknownFlags())
            """
        ),
    )
    result = pytester.runpytest_subprocess(*PLUGIN, "--dlpack-consumer=late_consumer:from_dlpack")
    result.assert_outcomes(failed=1)
    assert "producer producers.UnknownFlags, consumer late_consumer.from_dlpack" in (
        result.stdout.str()
    )


def test_the_consumers_are_put_back_when_the_run_ends(pytester):
    before = {"numpy": np.from_dlpack}
    if torch is not None:
        before["torch"] = torch.from_dlpack
        before["torch.utils.dlpack"] = torch.utils.dlpack.from_dlpack
    pytester.makepyfile(
        test_put_back=textwrap.dedent(
            """\
            import numpy as np

            kept = []


            def test_checked():
                assert hasattr(np.from_dlpack, "__dlpack_checked__")
                kept.append(np.from_dlpack)
            """
        )
    )
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
    for module, consumer in before.items():
        assert sys.modules[module].from_dlpack is consumer, module
    # a wrapper a module kept passes through, unchecked, once the run has ended
    kept = sys.modules["test_put_back"].kept[0] if "test_put_back" in sys.modules else None
    if kept is not None:
        assert kept(np.arange(2.0)).tolist() == [0.0, 1.0]


def consumers_present():
    from dlinterop.testing._plugin_checker import CONSUMERS

    found = []
    for module_name, attribute in CONSUMERS:
        try:
            module = __import__(module_name, fromlist=[attribute])
        except ImportError:
            continue
        found.append(pytest.param(getattr(module, attribute), id=f"{module_name}.{attribute}"))
    return found


@pytest.mark.parametrize("consumer", consumers_present())
def test_a_wrapper_has_its_consumers_signature(consumer):
    from dlinterop.testing._plugin_checker import Checker

    checker = Checker(False, "fail", [], ())
    try:
        wrapper = checker.wrap(consumer, "a consumer")
        try:
            expected = inspect.signature(consumer)
        except (TypeError, ValueError):
            with pytest.raises((TypeError, ValueError)):
                inspect.signature(wrapper)
        else:
            assert inspect.signature(wrapper) == expected
        assert wrapper.__name__ == consumer.__name__ and wrapper.__doc__ == consumer.__doc__
    finally:
        checker.uninstall()


def test_mlx_consuming_numpy_is_checked_without_a_crash(pytester):
    """MLX calls the deleter at once and leaves the capsule named dltensor (its destructor
    made a no-op): the plugin reads nothing but the name after MLX returns. In a process of
    its own, as a crash would end it."""
    pytest.importorskip("mlx.core")
    pytester.makepyfile(
        test_mlx=textwrap.dedent(
            """\
            import gc

            import mlx.core as mx
            import numpy as np


            def test_many_imports():
                for n in range(200):
                    a = mx.from_dlpack(np.arange(n + 1.0))
                    assert a.size == n + 1
                    gc.collect() if n % 50 == 0 else None
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--dlpack-check")
    assert result.ret in (0, 1), result.stderr.str()
    out = result.stdout.str()
    assert "200 exchanges checked" in out
    assert "consumer.renames-capsule: 200 violations" in out
    assert "consumer.deleter-once" not in out


def test_relay_passes_the_consumers_copy_to_the_first_hop(pytester):
    pytester.makepyfile(
        producers=PRODUCERS,
        test_relay=textwrap.dedent(
            """\
            import numpy as np
            from producers import CopyIgnored


            def test_copy():
                np.from_dlpack(CopyIgnored(), copy=True)
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN, "--dlpack-relay")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "DLPack violation producer.copy-true" in out
    assert "consumer dlinterop.from_dlpack (relay to numpy.from_dlpack)" in out


def test_a_relay_run_whose_every_test_was_skipped_does_not_fail(pytester):
    pytester.makepyfile(
        test_skipped="import pytest\n\n\n@pytest.mark.skip\ndef test_skipped():\n    pass\n"
    )
    result = pytester.runpytest(*PLUGIN, "--dlpack-relay")
    result.assert_outcomes(skipped=1)
    assert result.ret == 0
    assert "nothing was relayed through dlinterop (no test passed)" in result.stdout.str()


def test_probe_calls_find_what_the_consumer_never_asked(pytester):
    pytester.makepyfile(
        producers=PRODUCERS,
        test_probe=textwrap.dedent(
            """\
            import numpy as np
            from producers import VersionedWhenAskedLegacy


            def test_numpy_asks_for_a_versioned_capsule():
                np.from_dlpack(VersionedWhenAskedLegacy())
                np.from_dlpack(VersionedWhenAskedLegacy())
            """
        ),
    )
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
    probed = pytester.runpytest(*PLUGIN, "--dlpack-probe")
    probed.assert_outcomes(failed=1)
    out = probed.stdout.str()
    assert "DLPack violation producer.default-legacy" in out
    assert "consumer dlinterop probe (after numpy.from_dlpack)" in out
    assert "2 exchanges checked, 1 producer types probed" in out


CONSUMER = """
import ctypes

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def releases_twice(x):
    capsule = x.__dlpack__(max_version=(1, 3))
    pointer = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
    deleter = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(
        ctypes.c_void_p.from_address(pointer + 16).value
    )
    deleter(pointer)
    deleter(pointer)
"""


def test_a_consumer_calling_the_deleter_twice_fails_its_test(pytester):
    pytester.makepyfile(
        consumer=CONSUMER,
        test_twice=textwrap.dedent(
            """\
            import numpy as np
            from consumer import releases_twice


            def test_releases_twice():
                releases_twice(np.arange(4.0))
            """
        ),
    )
    result = pytester.runpytest(*PLUGIN, "--dlpack-consumer=consumer:releases_twice")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "DLPack violation consumer.deleter-once" in out
    assert "producer numpy.ndarray, consumer consumer.releases_twice" in out
    assert "first released at:" in out and "in releases_twice" in out
