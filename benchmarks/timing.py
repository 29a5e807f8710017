"""How the side-by-side runner measures: its modes, a row's candidates timed in interleaved
timeit loops, and the measures that are not loops of calls (RSS growth, import time in a
fresh interpreter, round trips to a child process)."""

import dataclasses
import gc
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

from benchmarks.rows.table import MIB, Row, Target

# Loops per repeat, after untimed warm-up calls: the rule `python -m dlinterop bench` uses.
from dlinterop._cli.bench import calibrate


@dataclasses.dataclass(frozen=True)
class Mode:
    repeats: int  # interleaved repeats per candidate; the median is reported
    repeat_seconds: float  # wall time one repeat aims at
    rss_round_trips: int  # round trips for the RSS-growth measure
    import_runs: int  # subprocess imports of dlinterop (and of the `pass` baseline)
    peer_import_runs: int  # subprocess imports of each peer


MODES = {
    # smoke: every row once, for the tests; the numbers mean nothing.
    "smoke": Mode(
        repeats=1, repeat_seconds=0.0, rss_round_trips=2_000, import_runs=1, peer_import_runs=0
    ),
    # Many short repeats: on a shared machine noise comes in bursts, which a median of many
    # samples shrugs off better than one of a few long ones.
    "quick": Mode(
        repeats=15, repeat_seconds=0.001, rss_round_trips=100_000, import_runs=5, peer_import_runs=1
    ),
    "full": Mode(
        repeats=41,
        repeat_seconds=0.008,
        rss_round_trips=1_000_000,
        import_runs=15,
        peer_import_runs=3,
    ),
}


def time_row(row, ns, mode):
    if row.values_from is not None:
        row.values, row.errors = row.values_from.values, row.values_from.errors
        row.statements = row.values_from.statements
        return
    timers = {}
    for column, statement in row.statements.items():
        timer = timeit.Timer(statement, globals=ns)
        try:
            timers[column] = (timer, calibrate(timer, mode.repeat_seconds))
        except Exception as exc:  # a peer without the feature, or not installed
            row.errors[column] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    columns = list(timers)
    samples = {column: [] for column in columns}
    for repeat in range(mode.repeats):
        k = repeat % len(columns) if columns else 0
        for column in columns[k:] + columns[:k]:
            timer, number = timers[column]
            samples[column].append(timer.timeit(number) / number)
    row.values = {column: statistics.median(samples[column]) * 1e9 for column in columns}
    row.extra["min_ns"] = {column: min(samples[column]) * 1e9 for column in columns}


# ------------------------------------------------------------------------------ memory, imports


def current_rss():
    """Resident set size in bytes (Linux /proc; elsewhere the peak, which is what there is)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def peak_rss():
    import resource

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def rss_growth_kib(function, argument, count):
    """RSS growth over `count` calls, after a warm-up of a tenth as many."""
    for _ in range(max(1, count // 10)):
        function(argument)
    gc.collect()
    before, peak_before = current_rss(), peak_rss()
    for _ in range(count):
        function(argument)
    gc.collect()
    return (current_rss() - before) / 1024, (peak_rss() - peak_before) / 1024


def memory_rows(ns, mode):
    dl, np = ns["dl"], ns["np"]
    count = mode.rss_round_trips
    label = f"{count:,}"
    rows = []
    # Export and import in one call each; the first is dlinterop on both ends.
    loops = [
        (
            f"RSS growth, {label}× X.from_dlpack(X's tensor)",
            {
                "dlinterop": (dl.from_dlpack, ns["t"]),
                "numpy": (np.from_dlpack, ns["a"]),
                **({"tvm_ffi": (ns["tvm_ffi"].from_dlpack, ns["tv"])} if "tvm_ffi" in ns else {}),
            },
        ),
        (f"RSS growth, {label}× np.from_dlpack(t)", {"dlinterop": (np.from_dlpack, ns["t"])}),
        (f"RSS growth, {label}× dl.from_dlpack(a)", {"dlinterop": (dl.from_dlpack, ns["a"])}),
        (
            f"RSS growth, {label}× dl.from_dlpack(t's capsule)",
            {"dlinterop": (lambda t: dl.from_dlpack(t.__dlpack__()), ns["t"])},
        ),
    ]
    stats_before = dl.memory_stats()
    for name, candidates in loops:
        row = Row("memory", name, {}, Target(1024, strict=True), unit="KiB")
        peaks = {}
        for column, (function, argument) in candidates.items():
            row.values[column], peaks[column] = rss_growth_kib(function, argument, count)
        row.extra["peak_rss_growth_kib"] = peaks
        rows.append(row)
    stats_after = dl.memory_stats()
    live_exports = stats_after.get("live_exports", 0) - stats_before.get("live_exports", 0)
    return rows, live_exports


def subprocess_env():
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def importtime_ms(module, env):
    """Cumulative import time of `module` from one `python -X importtime` subprocess."""
    # Run outside the repository so that a source checkout cannot shadow the installation.
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=300,
        check=True,
    )
    cumulative = None
    for line in out.stderr.splitlines():
        match = re.match(r"import time:\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(.*)$", line)
        if match and match.group(3).strip() == module:
            cumulative = int(match.group(2)) / 1000
    if cumulative is None:
        raise RuntimeError(f"no importtime line for {module}")
    return cumulative


def wall_ms(code, env):
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=300,
        check=True,
        capture_output=True,
    )
    return (time.perf_counter() - start) * 1000


def import_rows(libraries, mode):
    env = subprocess_env()
    modules = {
        "dlinterop": "dlinterop",
        "numpy": "numpy",
        "torch": "torch",
        "jax": "jax",
        "tvm_ffi": "tvm_ffi",
    }
    importtime = Row(
        "import",
        f"import X  (-X importtime, median of {mode.import_runs})",
        {},
        Target(20),
        unit="ms",
    )
    samples = {column: [] for column in libraries}
    wall = {"dlinterop": [], "baseline": []}
    for run in range(max(mode.import_runs, mode.peer_import_runs)):
        for column in libraries:
            runs = mode.import_runs if column == "dlinterop" else mode.peer_import_runs
            if run < runs:
                samples[column].append(importtime_ms(modules[column], env))
        if run < mode.import_runs:
            wall["baseline"].append(wall_ms("pass", env))
            wall["dlinterop"].append(wall_ms("import dlinterop", env))
    importtime.values = {
        column: statistics.median(values) for column, values in samples.items() if values
    }
    delta = Row("import", "import dlinterop, wall − `python -c pass`", {}, unit="ms")
    delta.values = {
        "dlinterop": statistics.median(wall["dlinterop"]) - statistics.median(wall["baseline"])
    }
    return [importtime, delta]


def process_rows(libraries, mode_name):
    """256 MiB of float32 to a child and back (benchmarks/processes.py): a shared dl.Tensor
    beside a torch tensor in shared memory and a NumPy array pickled by value."""
    try:
        from benchmarks import processes
    except ImportError:  # run as a script: this file's folder is on sys.path
        import processes
    repeats = {"smoke": 1, "quick": 3, "full": 7}[mode_name]
    elements = processes.ELEMENTS if mode_name != "smoke" else 1 << 16
    size = f"{elements * 4 // MIB} MiB" if elements * 4 >= MIB else f"{elements * 4 // 1024} KiB"
    kinds = [k for k in ("dlinterop", "torch", "numpy") if k == "dlinterop" or k in libraries]
    rows = []
    measures = [
        (
            f"ProcessPoolExecutor (fork), {size} there and back",
            lambda kind: processes.executor_round_trip_ms(kind, "fork", repeats, elements),
        ),
        (
            f"ProcessPoolExecutor (spawn), {size} there and back",
            lambda kind: processes.executor_round_trip_ms(kind, "spawn", repeats, elements),
        ),
        (
            f"multiprocessing.Queue (fork), {size} there and back",
            lambda kind: processes.queue_round_trip_ms(kind, repeats, elements),
        ),
    ]

    # A target is set only where its reference was measured (a Python without torch, say).
    def target(limit, reference):
        return Target(limit, reference=reference) if reference in kinds else None

    for name, measure in measures:
        row = Row(
            "processes", name, {k: f"{k}: {name}" for k in kinds}, target(1.0, "torch"), unit="ms"
        )
        for kind in kinds:
            try:
                row.values[kind] = measure(kind)
            except Exception as e:  # a peer that cannot do it: reported, not fatal
                row.errors[kind] = f"{type(e).__name__}: {e}"
        rows.append(row)
        rows.append(
            Row(
                "processes",
                "  same, against NumPy by value",
                dict(row.statements),
                target(0.05, "numpy"),
                unit="ms",
                values=row.values,
                values_from=row,
            )
        )
    loaded = [k for k in ("dlinterop", "numpy") if k in kinds]
    loads = Row(
        "processes",
        f"pickle.loads of a protocol-4 pickle, {size}",
        {k: f"pickle.loads({k})" for k in loaded},
        target(1.0, "numpy"),
        unit="ms",
    )
    for kind in loaded:
        loads.values[kind] = processes.pickle_loads_ms(kind, repeats, elements)
    rows.append(loads)
    return rows
