"""The command line, python -m dlinterop: the report by default, the info, check and bench
commands, --help and --version, and argparse's usage errors (exit 2) for anything else."""

import importlib.util
import io
import json
import os
import subprocess
import sys

import pytest

import dlinterop as dl
import dlinterop.testing


def cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "dlinterop", *args], capture_output=True, text=True, timeout=timeout
    )


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


@pytest.mark.parametrize(
    "args",
    [
        ["chek"],
        ["report"],
        ["--bogus"],
        ["info", "extra"],
        ["bench", "--repeats", "many"],
        ["check", "--role", "both"],
    ],
)
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


@pytest.mark.slow
@pytest.mark.tooling
def test_info_is_the_default_report():
    default, info = cli(), cli("info")
    assert default.returncode == info.returncode == 0, default.stderr + info.stderr
    for out in (default, info):
        assert out.stdout.startswith("dlinterop build")
        assert "zero-copy" in out.stdout


def test_the_report_exchanges_with_every_installed_framework():
    import importlib.util

    from dlinterop._cli import report

    rows = report.round_trips()
    for name in report.FRAMEWORKS:
        try:
            installed = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            installed = False
        assert any(row[0] == name for row in rows) == installed, name
    failed = [row for row in rows if not row[2]]
    assert not failed, failed  # every direction shown shares the memory


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
    # The C exchange tables: dlinterop's own always, NumPy's and torch's where installed.
    tables = {row["name"]: row for row in result["tables"]}
    expected = {"dl.Tensor, its own table"}
    if "numpy" in result["versions"]:
        expected.add("numpy.ndarray, dl.exchange_api_for")
    if "torch" in result["versions"]:
        expected.add("torch.Tensor, dl.exchange_api_for")
    for module, row in (("pyarrow", "pyarrow.Array"), ("warp", "warp.array")):
        if "numpy" in result["versions"] and importlib.util.find_spec(module):
            expected.add(f"{row}, dl.exchange_api_for")
    assert expected <= set(tables)
    for name in expected:
        row = tables[name]
        assert set(row["ns"]) == {"view", "owned", "__dlpack__"}
        assert all(value > 0 for value in row["ns"].values()) and 0 < row["ratio"]
        assert name in out.stdout


@pytest.mark.slow
@pytest.mark.tooling
def test_bench_takes_every_framework_the_checker_knows(tmp_path):
    from dlinterop._cli.bench import framework_namespace
    from dlinterop.testing import FRAMEWORKS

    names = [name for name in FRAMEWORKS if name != "dlinterop"]
    path = tmp_path / "bench.json"
    out = cli("bench", "--peers", ",".join(names), "--repeats", "1", "--json", str(path))
    assert out.returncode == 0, out.stderr
    result = json.loads(path.read_text())
    timed = {row["name"] for row in result["frameworks"]}
    for name in names:
        if name in ("numpy", "torch"):
            continue  # columns of the main table
        installed = framework_namespace(name) is not None
        assert (f"import a {name} array" in timed) == installed, name
        assert (name in result["versions"]) == installed
    for row in result["frameworks"]:
        assert row["ns"]["dlinterop"] > 0 and row["ns"]["own"] > 0
        assert row["name"] in out.stdout


def test_bench_refuses_an_unknown_peer_and_a_repeat_count_below_one():
    out = cli("bench", "--peers", "numpy,tensorflow")
    assert out.returncode == 2 and "tensorflow" in out.stderr
    out = cli("bench", "--repeats", "0")
    assert out.returncode == 2 and "--repeats" in out.stderr


# -- what cannot be done is an error, never a quiet success or a traceback -----------------


def test_check_of_a_framework_that_is_not_installed_is_an_error():
    # Regression: without CuPy, check cupy printed 65 "n/a" and exited 0, --strict too.
    out = cli("check", "no_such_module:framework", "--strict", "framework")
    assert out.returncode == 2 and out.stdout == ""
    assert "no_such_module is not installed" in out.stderr


def test_check_cupy_without_cupy_is_an_error():
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: this is the machine without it")
    out = cli("check", "cupy", "--strict", "cupy")
    assert out.returncode == 2 and "cupy is not installed" in out.stderr


def test_every_name_is_checked_before_anything_runs():
    out = cli("check", "dlinterop", "no_such_module:framework", timeout=60)
    assert out.returncode == 2 and out.stdout == ""


@pytest.mark.parametrize(
    "command", [["check", "dlinterop", "--rule", "producer.device"], ["bench", "--repeats", "1"]]
)
def test_json_into_a_directory_is_a_usage_error(command, tmp_path):
    # Regression: --json DIR ran everything, then ended in IsADirectoryError's traceback.
    for path, error in (
        (tmp_path, "is a directory"),
        (tmp_path / "missing" / "out.json", "no directory"),
    ):
        out = cli(*command, "--json", str(path))
        assert out.returncode == 2 and out.stdout == ""
        assert "argument --json" in out.stderr and error in out.stderr
        assert "Traceback" not in out.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "command", [["check", "dlinterop", "--rule", "producer.device"], ["bench", "--repeats", "1"]]
)
def test_json_that_cannot_be_written_is_an_error_after_the_table(command):
    out = cli(*command, "--json", "/dev/full")
    assert out.returncode == 1 and out.stdout  # the table is there
    assert "cannot write '/dev/full'" in out.stderr and "Traceback" not in out.stderr


def test_strict_names_a_framework_checked():
    # Regression: --strict numpy beside check dlinterop could never fail.
    out = cli("check", "dlinterop", "--rule", "producer.device", "--strict", "numpy")
    assert out.returncode == 2 and "--strict numpy: not among the frameworks checked" in out.stderr


def test_a_rule_outside_the_role_is_a_usage_error():
    # Regression: --role consumer --rule producer.device checked nothing and exited 0.
    out = cli("check", "dlinterop", "--role", "consumer", "--rule", "producer.device")
    assert out.returncode == 2 and "nothing to check" in out.stderr


def test_a_framework_that_cannot_be_set_up_fails_strict():
    support = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")
    env = dict(os.environ, PYTHONPATH=support)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlinterop",
            "check",
            "conformance_frameworks:not_a_framework",
            "--strict",
            "not_a_framework",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    rules = len(dlinterop.testing.RULES)
    assert out.returncode == 1, out.stderr
    assert f"not_a_framework: 0 passed, {rules} failed, 0 n/a" in out.stdout
    assert f"all {rules} rules: cannot be set up: TypeError" in out.stdout


def test_bench_says_which_peers_are_not_installed(monkeypatch):
    from dlinterop._cli import bench as _bench

    real = _bench.importlib.import_module

    def without_torch(name):
        if name == "torch":
            raise ModuleNotFoundError("No module named 'torch'")
        return real(name)

    monkeypatch.setattr(_bench.importlib, "import_module", without_torch)
    out = io.StringIO()
    _bench.main(("numpy", "torch"), 1, out=out)
    assert "(not installed: torch)" in out.getvalue().splitlines()[0]


def test_a_reader_that_goes_away_is_not_a_traceback():
    proc = subprocess.Popen(
        [sys.executable, "-m", "dlinterop", "check", "--list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # before the child writes: its writes hit EPIPE
    _out, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"Exception ignored" not in err
    assert proc.returncode == 1
