"""dlinterop.testing and `python -m dlinterop check`: the DLPack conformance checker."""

import json
import os
import subprocess
import sys

import pytest

import dlinterop.testing as dt

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")


def run_cli(*args, **kwargs):
    env = {**os.environ, "PYTHONPATH": SUPPORT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "dlinterop", "check", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        **kwargs,
    )


@pytest.fixture(autouse=True)
def child_finds_test_frameworks(monkeypatch):
    # The checker's child process imports "conformance_frameworks" from tests/support/.
    monkeypatch.setenv("PYTHONPATH", SUPPORT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_at_least_thirty_rules_per_role_each_described():
    ids = [r.id for r in dt.RULES]
    assert len(ids) == len(set(ids))
    for role in dt.ROLES:
        rules = [r for r in dt.RULES if r.role == role]
        assert len(rules) >= 30, role
        assert all(r.id.startswith(role + ".") and r.description for r in rules)


def test_dlinterop_passes_every_rule_it_is_checked_on():
    report = dt.check("dlinterop")
    dt.assert_conforms(report)
    counts = report.counts()
    assert counts["fail"] == 0
    assert counts["pass"] >= 50  # fewer where ml_dtypes is missing (its rules are n/a)
    assert {r.rule for r in report.results} == {r.id for r in dt.RULES}
    # Where a rule does not apply, it says why.
    assert all(r.reason for r in report.results if r.result == "n/a")


# The frameworks added to the checker with their interop tests (tests/interop/), and the
# module each needs.
NEWER_FRAMEWORKS = {
    "pyarrow": "pyarrow",
    "cuda_core": "cuda.core.utils",
    "mlx": "mlx.core",
    "warp": "warp",
    "nanobind": "nanobind",
}


@pytest.mark.slow
@pytest.mark.tooling
@pytest.mark.parametrize("name", sorted(NEWER_FRAMEWORKS))
def test_each_framework_is_set_up_and_checked_both_ways(name):
    pytest.importorskip(NEWER_FRAMEWORKS[name])
    rules = [
        "producer.default-legacy",
        "producer.deleter-consumed",
        "consumer.imports",
        "consumer.zero-size",
        "consumer.malformed-name",
    ]
    report = dt.check(name, rules=rules)
    results = {r.rule: r for r in report.results}
    assert set(results) == set(rules)
    # every peer exports a legacy capsule when asked nothing, imports a well-formed capsule
    # and a zero-size one, and refuses a capsule of the wrong name
    for rule in (
        "producer.default-legacy",
        "consumer.imports",
        "consumer.zero-size",
        "consumer.malformed-name",
    ):
        assert results[rule].result == "pass", (rule, results[rule].reason)
    # set up, not "cannot be set up": a rule that does not apply says why
    assert all("cannot be set up" not in (r.reason or "") for r in report.results)


def test_numpy_is_checked_both_ways():
    report = dt.check("numpy")
    assert {r.role for r in report.results} == {"producer", "consumer"}
    results = {r.rule: r for r in report.results}
    # What NumPy certainly does (any NumPy 2.x).
    for rule in (
        "producer.default-legacy",
        "producer.max-version-1.3",
        "producer.values",
        "producer.negative-strides",
        "consumer.imports",
        "consumer.deleter-once",
        "consumer.malformed-name",
        "consumer.malformed-major-2",
    ):
        assert results[rule].result == "pass", results[rule]
    assert results["producer.exchange-api"].result == "n/a"


def test_a_crash_fails_its_rule_and_the_run_goes_on():
    report = dt.check_consumer("conformance_frameworks:crashing")
    results = {r.rule: r for r in report.results}
    crashed = results["consumer.malformed-null-shape"]
    assert crashed.result == "fail" and "crashed (signal 11)" in crashed.reason
    # The rules after it ran in a new child process.
    assert results["consumer.malformed-overflow"].result == "pass"
    assert len(report.results) == len([r for r in dt.RULES if r.role == "consumer"])


@pytest.mark.slow
@pytest.mark.tooling
def test_a_careless_framework_fails_with_reasons():
    fw = dt.framework("conformance_frameworks:careless")
    report = dt.check(fw)  # a Framework object: checked in this process
    results = {r.rule: r for r in report.results}
    assert results["producer.versioned-recommended"].result == "fail"
    assert results["producer.keyword-only"].result == "fail"
    assert results["producer.unknown-keyword"].result == "fail"
    assert results["consumer.renames-capsule"].result == "fail"
    assert "renamed used_" in results["consumer.renames-capsule"].reason
    assert results["consumer.imports"].result == "fail"
    with pytest.raises(AssertionError) as info:
        dt.assert_conforms(report)
    message = str(info.value)
    assert "careless fails" in message and "consumer.renames-capsule" in message
    dt.assert_conforms(report, allow=[r.rule for r in report.failures()])


@pytest.mark.slow
@pytest.mark.tooling
def test_bit_pattern_rules_catch_a_framework_that_misreads_bits():
    pytest.importorskip("ml_dtypes")  # (the sub-byte values are ml_dtypes')
    report = dt.check(dt.framework("conformance_frameworks:bit_careless"))
    results = {r.rule: r for r in report.results}
    assert results["producer.flags-known"].result == "fail"
    assert "0x200" in results["producer.flags-known"].reason
    for rule in ("producer.dtype-float6-float4", "producer.dtype-subbyte-integers"):
        assert results[rule].result == "fail" and "read as packed" in results[rule].reason
    unexportable = results["producer.unexportable-buffer-error"]
    assert unexportable.result == "fail" and "TypeError" in unexportable.reason
    padded = results["consumer.subbyte-padded"]
    assert padded.result == "fail" and "flag was ignored" in padded.reason


def test_dlinterop_reads_every_sub_byte_export_exactly():
    pytest.importorskip("ml_dtypes")
    report = dt.check_producer(
        "dlinterop",
        rules=[
            "producer.dtype-float6-float4",
            "producer.dtype-subbyte-integers",
            "producer.flags-known",
        ],
    )
    assert report.counts() == {"pass": 3, "fail": 0, "n/a": 0}, report.results
    assert "int4" in {r.rule: r for r in report.results}["producer.dtype-subbyte-integers"].reason


def test_api_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown framework"):
        dt.check("no_such_framework")
    with pytest.raises(ValueError, match="role"):
        dt.check("numpy", role="both")
    with pytest.raises(ValueError, match="unknown rules"):
        dt.check("numpy", rules=["no.such.rule"])
    with pytest.raises(TypeError, match="not a dlinterop.testing.Framework"):
        dt.framework("conformance_frameworks:not_a_framework")
    with pytest.raises(TypeError):
        dt.framework(3)


def test_api_refuses_what_would_check_nothing():
    # Regressions: each of these gave a Report with no failure, which assert_conforms
    # passed: every rule n/a (not installed), or no rule at all.
    with pytest.raises(ModuleNotFoundError, match="no_such_module is not installed"):
        dt.check("no_such_module:framework")
    with pytest.raises(ValueError, match="nothing to check"):
        dt.check("numpy", role="consumer", rules=["producer.device"])
    with pytest.raises(ValueError, match="nothing to check"):
        dt.check("numpy", rules=[])


def test_a_framework_that_cannot_be_set_up_fails_every_rule():
    report = dt.check_producer(
        "conformance_frameworks:not_a_framework", rules=["producer.device", "producer.values"]
    )
    assert [r.result for r in report.results] == ["fail", "fail"]
    assert all(r.reason.startswith("cannot be set up: TypeError") for r in report.results)
    with pytest.raises(AssertionError, match="fails 2 DLPack rules"):
        dt.assert_conforms(report)


def test_cli_table_json_and_markdown(tmp_path):
    path = tmp_path / "out.json"
    out = run_cli("dlinterop", "numpy", "--json", str(path), "--strict", "dlinterop")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PRODUCERS" in out.stdout and "CONSUMERS" in out.stdout
    assert "dlinterop: " in out.stdout and " failed" in out.stdout
    document = json.loads(path.read_text())
    rows = document["results"]
    assert {"rule", "framework", "role", "result", "reason"} == set(rows[0])
    assert {r["framework"] for r in rows} == {"dlinterop", "numpy"}
    assert {r["result"] for r in rows} <= {"pass", "fail", "n/a"}
    md = run_cli("dlinterop", "--role", "producer", "--rule", "producer.values", "--markdown")
    assert md.returncode == 0, md.stderr
    assert "| `producer.values` | pass |" in md.stdout


def test_cli_strict_fails_for_a_failing_framework_and_lists_rules():
    out = run_cli("conformance_frameworks:careless", "--role", "producer", "--strict", "careless")
    assert out.returncode == 1
    assert "careless producer.keyword-only" in out.stdout
    listing = run_cli("numpy", "--list")
    assert listing.returncode == 0
    assert len(listing.stdout.splitlines()) == len(dt.RULES)
    bad = run_cli("no_such_framework")
    assert bad.returncode == 2 and "unknown framework" in bad.stderr


def test_malformed_producers_count_their_deleter_calls():
    import gc

    import dlinterop as dl
    from dlinterop.testing import _conformance

    for fields in (
        {"major": 2},
        {"code": 99},
        {"device_type": 99},
        {"shape": (-1,)},
        {"name": "not_a_dltensor"},
    ):
        p = _conformance.Producer(**fields)
        with pytest.raises((BufferError, ValueError)):
            dl.from_dlpack(p)
        p.capsule = None
        gc.collect()
        assert p.deleter_calls == 1, fields
    # And a consumed capsule's destructor leaves the deleter to the consumer.
    p = _conformance.Producer(payload=b"\1\2\3\4", shape=(4,))
    t = dl.from_dlpack(p)
    assert bytes(memoryview(t)) == b"\1\2\3\4" and t.data_ptr == p.data_address
    p.capsule = None
    gc.collect()
    assert p.deleter_calls == 0
    del t
    gc.collect()
    assert p.deleter_calls == 1


def test_a_crash_is_reported_by_its_message_not_its_backtrace():
    from dlinterop.testing._run import _crash_line

    stderr = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  Storage size calculation overflowed with sizes=[4] and strides=[-1]\n"
        "Exception raised from computeStorageNbytes at aten/src/ATen/EmptyTensor.cpp:61\n"
        "frame #0: c10::Error::Error(...) + 0x9d (0x7f00 in /some/where/libc10.so)\n"
        "frame #17: _start + 0x21 (0x5555 in /some/where/bin/python)\n"
    )
    assert _crash_line(stderr) == (
        "Storage size calculation overflowed with sizes=[4] and strides=[-1]"
    )
    assert _crash_line("Fatal Python error: Segmentation fault\nframe #3: f (0x1 in /x)\n") == (
        "Fatal Python error: Segmentation fault"
    )
    assert _crash_line("") == ""


def test_a_consumer_that_ignores_byte_offset_reads_a_pattern_not_the_payload():
    """consumer.byte-offset once passed for Warp now and then: the bytes before byte_offset
    were whatever an earlier producer's block had left there, at times the same payload.
    They hold a pattern now, so a consumer reading from `data` alone fails every time."""
    import ctypes

    from dlinterop.testing import _conformance

    payload = bytes(range(16))
    p = _conformance.Producer(payload, shape=(4,), code=0, bits=32, strides=(1,))
    p.byte_offset = 16
    capsule = p.make_capsule()
    info = _conformance.inspect(capsule)
    assert ctypes.string_at(info["data"] + info["byte_offset"], 16) == payload
    assert ctypes.string_at(info["data"], 16) == b"\xa5" * 16
    del capsule
    assert p.deleter_calls == 1
