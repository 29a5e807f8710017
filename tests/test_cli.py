"""The command line, python -m dlinterop: the report by default, the info, check and bench
commands, --help and --version, and argparse's usage errors (exit 2) for anything else."""
import json
import subprocess
import sys

import pytest

import dlinterop as dl


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "dlinterop", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_help_lists_every_command():
    out = cli("--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: python -m dlinterop")
    for command in ("info", "check", "bench"):
        assert f"    {command} " in out.stdout


def test_version_is_the_package_version():
    out = cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"dlinterop {dl.__version__}"


@pytest.mark.parametrize("args", [["chek"], ["report"], ["--bogus"], ["info", "extra"],
                                  ["bench", "--repeats", "many"], ["check", "--role", "both"]])
def test_an_unknown_word_or_option_is_a_usage_error(args):
    out = cli(*args)
    assert out.returncode == 2
    assert out.stdout == ""
    assert "usage: python -m dlinterop" in out.stderr and "error:" in out.stderr


@pytest.mark.parametrize("command", ["info", "check", "bench"])
def test_each_command_has_help(command):
    out = cli(command, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: python -m dlinterop {command}")


def test_info_is_the_default_report():
    default, info = cli(), cli("info")
    assert default.returncode == info.returncode == 0, default.stderr + info.stderr
    for out in (default, info):
        assert out.stdout.startswith("dlinterop build")
        assert "zero-copy" in out.stdout


def test_check_needs_a_framework_unless_listing_rules():
    out = cli("check")
    assert out.returncode == 2 and "name at least one framework" in out.stderr
    listed = cli("check", "--list")
    assert listed.returncode == 0
    assert "producer.device" in listed.stdout and "consumer.imports" in listed.stdout


def test_check_of_an_unknown_framework_is_a_usage_error():
    out = cli("check", "no_such_framework")
    assert out.returncode == 2 and "no_such_framework" in out.stderr


def test_bench_times_dlinterop_beside_the_installed_peers(tmp_path):
    path = tmp_path / "bench.json"
    out = cli("bench", "--repeats", "1", "--json", str(path))
    assert out.returncode == 0, out.stderr
    result = json.loads(path.read_text())
    names = [row["name"] for row in result["rows"]]
    assert "import a NumPy array" in names and "__dlpack__()" in names
    for row in result["rows"]:
        assert row["ns"]["dlinterop"] > 0
        assert row["name"] in out.stdout
    if "numpy" in result["versions"]:
        assert all("numpy" in row["ns"] for row in result["rows"])


def test_bench_refuses_an_unknown_peer_and_a_repeat_count_below_one():
    out = cli("bench", "--peers", "numpy,tensorflow")
    assert out.returncode == 2 and "tensorflow" in out.stderr
    out = cli("bench", "--repeats", "0")
    assert out.returncode == 2 and "--repeats" in out.stderr
