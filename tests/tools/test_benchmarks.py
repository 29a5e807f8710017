"""The benchmarks run: the side-by-side runner prints its table, and every asv benchmark's
setup and one call work for every parameter combination. No timing is judged here."""

import importlib
import importlib.util
import inspect
import itertools
import json
import os
import re
import subprocess
import sys

import pytest

# Slow (the benchmark runners, end to end): deselected unless --run-slow (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.tooling]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = os.path.join(REPO, "benchmarks", "benchmarks")
MODULES = sorted(
    name[:-3] for name in os.listdir(SUITE) if name.startswith("bench_") and name.endswith(".py")
)
PREFIXES = ("time_", "peakmem_", "track_", "timeraw_", "mem_")


def run(args, timeout=300):
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


def test_runner_smoke_prints_every_section_and_writes_json(tmp_path):
    path = tmp_path / "results.json"
    out = run(["-m", "benchmarks", "--smoke", "--json", str(path)])
    assert out.returncode == 0, out.stdout + out.stderr
    for heading in (
        "Export:",
        "Import:",
        "Consumers:",
        "Round trips:",
        "Allocation:",
        "Copies:",
        "Size scaling:",
        "Import time",
        "Across processes",
    ):
        assert heading in out.stdout
    assert "ratio" in out.stdout
    assert "targets met:" in out.stdout
    document = json.loads(path.read_text())
    assert document["versions"]["dlinterop"]
    rows = document["rows"]
    assert len(rows) > 30
    for row in rows:
        # A dlinterop statement that raised is a bug in the runner or the library.
        assert "dlinterop" not in row["errors"], (row["name"], row["errors"])
        if "dlinterop" in row["statements"]:
            assert row["values"]["dlinterop"] > 0
    exchange = [row for row in rows if row["section"] == "exchange"]
    if importlib.util.find_spec("torch") is not None:
        assert "C exchange API:" in out.stdout
        assert [row["target"]["reference"] for row in exchange] == ["tvm_ffi", "torch"]
        for row in exchange:
            for column in ("exchange API", "__dlpack__"):
                assert column not in row["errors"], (row["name"], row["errors"])
                assert row["values"][column] > 0
    targets = [row for row in rows if row["target"]]
    assert len(targets) >= 13
    assert all(row["target"]["met"] in (True, False) for row in targets)


def test_runner_quick_mode_runs_as_a_script():
    out = run(["benchmarks/compare.py", "--quick", "--peers", "numpy", "-k", "__dlpack_device__"])
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("__dlpack_device__"))
    assert "≤0.80×numpy" in line
    assert line.split()[-1] in ("yes", "MISSED")


def test_runner_rejects_an_unknown_peer():
    out = run(["-m", "benchmarks", "--peers", "tensorflow,numpy", "--list"])
    assert out.returncode == 2
    assert "unknown peer" in out.stderr


def test_runner_times_every_installed_framework_beside_its_own_import(tmp_path):
    from dlinterop._cli.bench import FRAMEWORKS, framework_namespace

    # a framework without a column of its own; the import of one of each that is installed
    others = [name for name in FRAMEWORKS if name not in ("jax", "tvm_ffi")]
    installed = [name for name in others if framework_namespace(name) is not None]
    if not installed:
        pytest.skip("none of the frameworks timed in their own table is installed")
    path = tmp_path / "frameworks.json"
    peers = ",".join(["numpy"] + others)
    out = run(
        [
            "-m",
            "benchmarks",
            "--smoke",
            "--section",
            "frameworks",
            "--peers",
            peers,
            "--json",
            str(path),
        ]
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {row["name"]: row for row in json.loads(path.read_text())["rows"]}
    for name in installed:
        timed = rows[f"import a {name} array"]
        assert timed["target"] is not None and set(timed["values"]) == {"dlinterop", "own"}
        assert f"{name} imports a dl.Tensor (own: its own array)" in rows


@pytest.fixture(scope="module")
def suite():
    """The asv suite imported as the package benchmarks.benchmarks."""
    sys.path.insert(0, REPO)
    try:
        yield {name: importlib.import_module(f"benchmarks.benchmarks.{name}") for name in MODULES}
    finally:
        sys.path.remove(REPO)


def benchmark_classes(module):
    return [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__ and any(name.startswith(PREFIXES) for name in dir(cls))
    ]


def test_suite_has_the_areas_of_the_issue():
    assert {
        "bench_export",
        "bench_import",
        "bench_roundtrip",
        "bench_alloc",
        "bench_copy",
        "bench_startup",
    } <= set(MODULES)


# Attributes asv reads as benchmark settings from a benchmark's function, class or module:
# a module-level import under one of these names (the child-process helpers imported as
# "processes") stops asv's discovery of the whole suite with a TypeError.
ASV_SETTINGS = (
    "processes",
    "rounds",
    "repeat",
    "number",
    "timeout",
    "warmup_time",
    "sample_time",
    "min_run_count",
    "timer",
    "pretty_name",
    "version",
    "unit",
    "params",
    "param_names",
    "setup",
    "teardown",
    "setup_cache",
)


@pytest.mark.parametrize("module_name", MODULES)
def test_no_module_attribute_shadows_an_asv_setting(suite, module_name):
    module = suite[module_name]
    assert not [name for name in ASV_SETTINGS if hasattr(module, name)]


@pytest.mark.parametrize("module_name", MODULES)
def test_every_benchmark_sets_up_and_runs_once(suite, module_name, monkeypatch):
    module = suite[module_name]
    if hasattr(module, "ROUND_TRIPS"):
        monkeypatch.setattr(module, "ROUND_TRIPS", 1000)
    if hasattr(module, "ELEMENTS"):
        monkeypatch.setattr(module, "ELEMENTS", 1 << 14)  # not 256 MiB, to prove it runs
    classes = benchmark_classes(module)
    assert classes, f"{module_name} holds no benchmarks"
    ran = 0
    failures = []
    for cls in classes:
        params = getattr(cls, "params", [])
        if params and not isinstance(params[0], list):
            params = [params]
        names = getattr(cls, "param_names", [])
        assert len(names) == len(params), f"{cls.__name__}: param_names do not match params"
        methods = [name for name in dir(cls) if name.startswith(PREFIXES)]
        for combination in itertools.product(*params):
            instance = cls()
            try:
                if hasattr(instance, "setup"):
                    instance.setup(*combination)
            except NotImplementedError:
                # asv skips it (a peer missing, or something it cannot do), and still runs
                # the teardown, which must cope with a setup that stopped early.
                try:
                    if hasattr(instance, "teardown"):
                        instance.teardown(*combination)
                except Exception as exc:
                    failures.append(
                        f"{cls.__name__}{combination}.teardown after a skipped setup: {exc!r}"
                    )
                continue
            except Exception as exc:
                failures.append(f"{cls.__name__}{combination}.setup: {exc!r}")
                continue
            for name in methods:
                try:
                    result = getattr(instance, name)(*combination)
                    if name.startswith("timeraw_"):
                        out = subprocess.run(
                            [sys.executable, "-c", result],
                            capture_output=True,
                            text=True,
                            timeout=120,
                        )
                        assert out.returncode == 0, out.stderr
                    ran += 1
                except Exception as exc:
                    failures.append(f"{cls.__name__}.{name}{combination}: {exc!r}")
            if hasattr(instance, "teardown"):
                instance.teardown(*combination)
    assert not failures, "\n".join(failures[:20])
    assert ran > 0


def test_runner_skips_and_names_rows_whose_peer_is_missing(tmp_path):
    # A peer left out (as an uninstalled one is) skips its rows and says so, never errors.
    path = tmp_path / "results.json"
    out = run(["-m", "benchmarks", "--smoke", "--peers", "numpy", "--json", str(path)])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "from_dlpack(torch tensor) (needs torch)" in out.stdout
    document = json.loads(path.read_text())
    assert "from_dlpack(jax array) (needs jax)" in document["skipped"]
    for row in document["rows"]:
        assert "dlinterop" not in row["errors"], (row["name"], row["errors"])


def test_calibration_does_not_count_a_first_call_set_up():
    # A statement whose first call pays a one-time set-up (here 50 ms) and is cheap after:
    # calibrated on that first call, every repeat would be one call plus timer overhead.
    import timeit

    sys.path.insert(0, REPO)
    try:
        from benchmarks import timing
    finally:
        sys.path.pop(0)
    state = {"ready": False}

    def statement():
        if not state["ready"]:
            import time

            time.sleep(0.05)
            state["ready"] = True

    number = timing.calibrate(timeit.Timer(statement), 0.001)
    assert number > 10


def test_runner_draws_its_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="--plot draws with matplotlib (the docs extra)")
    path = tmp_path / "benchmarks.svg"
    out = run(["-m", "benchmarks", "--smoke", "-k", "from_dlpack", "--plot", str(path)])
    assert out.returncode == 0, out.stdout + out.stderr
    svg = path.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    for label in ("from_dlpack(NumPy array)", "dlinterop", "numpy"):
        assert label in svg


def test_runner_plot_of_nothing_plottable_is_an_error(tmp_path):
    pytest.importorskip("matplotlib", reason="--plot draws with matplotlib (the docs extra)")
    out = run(
        ["-m", "benchmarks", "--smoke", "-k", "zeros((1024", "--plot", str(tmp_path / "p.svg")]
    )
    assert out.returncode != 0 and "none of the plotted rows" in out.stderr


def test_plugin_overhead_prints_each_exchange_plain_checked_and_relayed():
    pytest.importorskip("numpy")
    out = run(["benchmarks/plugin_overhead.py", "--repeats", "1", "--number", "5"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "np.from_dlpack(a)" in out.stdout
    for variant in ("plain", "checked", "relayed"):
        assert re.search(rf"^  {variant} +[\d.]+ us +[\d.]+x plain$", out.stdout, re.M), variant
    assert "violations" not in out.stdout


def test_exchange_tables_prints_each_way_beside_dlpack():
    pytest.importorskip("numpy")
    out = run(["benchmarks/exchange_tables.py", "--repeats", "1", "--number", "5"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "numpy: 16 float32" in out.stdout
    for way in ("view (table)", "owning (table)", "__dlpack__"):
        line = rf"^  {re.escape(way)} +[\d.]+ ns +[\d.]+x __dlpack__$"
        assert re.search(line, out.stdout, re.M), way
    for module in ("torch", "pyarrow", "warp"):
        if importlib.util.find_spec(module):
            assert f"{module}: 16 float32" in out.stdout, module
    if importlib.util.find_spec("torch"):
        assert "torch: 16 float32, torch's own table" in out.stdout


def test_the_dlinterop_kernel_builds_here():
    # The way-out benchmark turns a kernel that does not build into asv's "n/a" (a peer
    # missing looks the same): that hid the dlinterop kernel failing to compile.
    pytest.importorskip("Cython")
    sys.path.insert(0, REPO)
    try:
        from benchmarks import kernels

        module = kernels.build_cython_kernels()
    finally:
        sys.path.remove(REPO)
    assert module.__name__ == "dl_kernels"
