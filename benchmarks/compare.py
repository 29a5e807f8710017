"""Side-by-side runner: dlinterop beside every installed peer, on the same work, in one process.

    python -m benchmarks [--quick] [--json PATH]       # from the repository root
    python benchmarks/compare.py [--quick] [--json PATH]

Each row is one piece of work and each column the library doing it; what a column stands for
depends on the section (the producer for exports, the consumer for imports), as each section's
heading says. The candidates of a row are timed with timeit loops whose repeats are interleaved
(the order rotates each repeat), so noise hits all alike; cells are medians in ns per call and
include timeit's loop (about 10 ns). "ratio" is dlinterop / the fastest installed peer.

Rows that carry one of the issue's targets show the target, the measured value against the
target's own reference (not always the fastest peer) and whether it is met. Nothing here fails
on a missed target: CI runs --quick to prove that the runner works, not to judge timings on a
shared machine.

This file imports nothing from its own folder, so it runs as a script as well as a module.
"""
import argparse
import dataclasses
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

# Loops per repeat, after untimed warm-up calls: the rule `python -m dlinterop bench` uses.
from dlinterop._cli.bench import calibrate

# Peers in column order; dlinterop is always the first column.
PEERS = ("numpy", "torch", "jax", "tvm_ffi")
COLUMNS = ("dlinterop",) + PEERS
HEADINGS = {"dlinterop": "dlinterop", "numpy": "numpy", "torch": "torch", "jax": "jax",
            "nanobind": "nanobind",
            "tvm_ffi": "tvm-ffi", "exchange API": "dl+table", "__dlpack__": "dl+dlpack"}

# Per library: the name its small (16 float32 elements) tensor has in the timing namespace,
# and the call that imports a DLPack object.
OBJECT = {"dlinterop": "t", "numpy": "a", "torch": "x", "jax": "j", "tvm_ffi": "tv"}
FROM_DLPACK = {"dlinterop": "dl.from_dlpack", "numpy": "np.from_dlpack",
               "torch": "torch.from_dlpack", "jax": "jnp.from_dlpack",
               "tvm_ffi": "tvm_ffi.from_dlpack"}

SMALL = 16                       # elements of the small tensors
MIB = 1 << 20
BIG = 64 * MIB // 4              # float32 elements in 64 MiB


@dataclasses.dataclass(frozen=True)
class Mode:
    repeats: int            # interleaved repeats per candidate; the median is reported
    repeat_seconds: float   # wall time one repeat aims at
    rss_round_trips: int    # round trips for the RSS-growth measure
    import_runs: int        # subprocess imports of dlinterop (and of the `pass` baseline)
    peer_import_runs: int   # subprocess imports of each peer


MODES = {
    # smoke: every row once, for the tests; the numbers mean nothing.
    "smoke": Mode(repeats=1, repeat_seconds=0.0, rss_round_trips=2_000, import_runs=1,
                  peer_import_runs=0),
    # Many short repeats: on a shared machine noise comes in bursts, which a median of many
    # samples shrugs off better than one of a few long ones.
    "quick": Mode(repeats=15, repeat_seconds=0.001, rss_round_trips=100_000, import_runs=5,
                  peer_import_runs=1),
    "full": Mode(repeats=41, repeat_seconds=0.008, rss_round_trips=1_000_000, import_runs=15,
                 peer_import_runs=3),
}


@dataclasses.dataclass(frozen=True)
class Target:
    """A bound from the issue: value(subject) [/ value(reference)] <= limit (< when strict)."""
    limit: float
    reference: str | None = None     # column the subject is divided by; None: absolute
    subject: str = "dlinterop"
    strict: bool = False

    def describe(self):
        op = "<" if self.strict else "≤"
        if self.reference is None:
            return f"{op}{self.limit:g}"
        return f"{op}{self.limit:.2f}×{HEADINGS.get(self.reference, self.reference)}"

    def evaluate(self, values):
        subject = values.get(self.subject)
        if subject is None:
            return None, None
        if self.reference is None:
            measured = subject
        else:
            reference = values.get(self.reference)
            if not reference:
                return None, None
            measured = subject / reference
        met = measured < self.limit if self.strict else measured <= self.limit
        return measured, met


@dataclasses.dataclass
class Row:
    section: str
    name: str
    statements: dict             # column -> statement, timed in the namespace
    target: Target | None = None
    unit: str = "ns"
    needs: tuple = ()            # modules the whole row needs (a consumer, a go-between)
    values: dict = dataclasses.field(default_factory=dict)   # column -> median
    errors: dict = dataclasses.field(default_factory=dict)   # column -> why it did not run
    extra: dict = dataclasses.field(default_factory=dict)    # more numbers, for the JSON
    values_from: "Row | None" = None   # not timed: shows that row's values (another target)


# ------------------------------------------------------------------------------ the inputs

def load_libraries(wanted):
    """Import dlinterop, NumPy and each wanted peer that is installed; return name -> version."""
    versions = {}
    namespace = {}
    import dlinterop as dl
    import numpy as np
    namespace.update(dl=dl, np=np)
    versions["dlinterop"] = dl.__version__
    versions["numpy"] = np.__version__
    if "torch" in wanted:
        try:
            import torch
            import torch.utils.dlpack
        except ImportError:
            pass
        else:
            namespace["torch"] = torch
            versions["torch"] = torch.__version__
    if "jax" in wanted:
        # CPU work only: keep JAX from probing for accelerators (and warning about them).
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            pass
        else:
            namespace.update(jax=jax, jnp=jnp)
            versions["jax"] = jax.__version__
    if "tvm_ffi" in wanted:
        try:
            import tvm_ffi
        except ImportError:
            pass
        else:
            namespace["tvm_ffi"] = tvm_ffi
            versions["tvm_ffi"] = getattr(tvm_ffi, "__version__", "?")
    return namespace, versions


def build_inputs(ns):
    """Every tensor the statements name. Each library allocates its own where it can."""
    dl, np = ns["dl"], ns["np"]
    f32 = np.float32

    def numpy_layouts(prefix, make):
        ns[prefix] = make((SMALL,))
        ns[prefix + "_strided"] = make((8, 32))[:, ::2]        # (8, 16), every other column
        ns[prefix + "_transposed"] = make((16, 8)).T           # (8, 16), Fortran order
        ns[prefix + "_1"] = make((1,))
        ns[prefix + "_64m"] = make((BIG,))

    numpy_layouts("a", lambda shape: np.zeros(shape, f32))
    ns["t"] = dl.zeros((SMALL,), dl.float32)
    # dlinterop tensors cannot be sliced; strided ones view NumPy memory.
    ns["t_strided"] = dl.from_dlpack(np.zeros((8, 32), f32)[:, ::2])
    ns["t_transposed"] = dl.from_dlpack(np.zeros((16, 8), f32).T)
    ns["t_1"] = dl.zeros((1,), dl.float32)
    ns["t_64m"] = dl.zeros((BIG,), dl.float32)
    # Copies must read real pages, not the shared zero page.
    ns["t_4m"] = dl.full((1024, 1024), 1.0, dl.float32)
    ns["a_4m"] = np.full((1024, 1024), 1.0, f32)
    ns["a_4m_strided"] = np.full((1024, 2048), 1.0, f32)[:, ::2]
    ns["t_4m_strided"] = dl.from_dlpack(ns["a_4m_strided"])

    if "torch" in ns:
        torch = ns["torch"]
        ns["x"] = torch.zeros((SMALL,), dtype=torch.float32)
        ns["x_strided"] = torch.zeros((8, 32), dtype=torch.float32)[:, ::2]
        ns["x_transposed"] = torch.zeros((16, 8), dtype=torch.float32).T
        ns["x_1"] = torch.zeros((1,), dtype=torch.float32)
        ns["x_64m"] = torch.zeros((BIG,), dtype=torch.float32)
        ns["x_4m"] = torch.full((1024, 1024), 1.0, dtype=torch.float32)
        ns["x_4m_strided"] = torch.full((1024, 2048), 1.0, dtype=torch.float32)[:, ::2]
    if "jnp" in ns:
        jnp = ns["jnp"]
        # JAX arrays are always compact: no strided or transposed ones to export.
        ns["j"] = jnp.zeros((SMALL,), jnp.float32)
        ns["j_1"] = jnp.zeros((1,), jnp.float32)
        ns["j_64m"] = jnp.zeros((BIG,), jnp.float32)
        ns["j_4m"] = jnp.full((1024, 1024), 1.0, jnp.float32)
        for value in (ns["j"], ns["j_1"], ns["j_64m"], ns["j_4m"]):
            value.block_until_ready()
    if "tvm_ffi" in ns:
        tvm_ffi = ns["tvm_ffi"]
        # tvm-ffi has no allocator of its own in Python: its tensors view NumPy memory.
        for suffix in ("", "_strided", "_transposed", "_1", "_64m"):
            ns["tv" + suffix] = tvm_ffi.from_dlpack(ns["a" + suffix])


# ------------------------------------------------------------------------------ the rows

def per_library(template, libraries=COLUMNS, **fixed):
    """{column: template formatted with the column's object name and from_dlpack}."""
    return {lib: template.format(obj=OBJECT[lib], from_dlpack=FROM_DLPACK[lib], **fixed)
            for lib in libraries}


def define_rows():
    rows = []
    add = rows.append
    export = "export"
    add(Row(export, "__dlpack__()", per_library("{obj}.__dlpack__()"),
            Target(0.8, "numpy")))
    versioned = per_library("{obj}.__dlpack__(max_version=(1, 0))")
    versioned["dlinterop"] = "t.__dlpack__(max_version=(1, 3))"
    add(Row(export, "__dlpack__(max_version=(1,3); peers (1,0))", versioned,
            Target(0.8, "numpy")))
    add(Row(export, "__dlpack_device__()", per_library("{obj}.__dlpack_device__()"),
            Target(0.8, "numpy")))
    add(Row(export, "to_dlpack(tensor)",
            {"dlinterop": "dl.to_dlpack(t)", "torch": "torch.utils.dlpack.to_dlpack(x)"}))
    no_jax = [lib for lib in COLUMNS if lib != "jax"]
    for layout in ("strided", "transposed"):
        add(Row(export, f"__dlpack__(), {layout} (8, 16)",
                per_library("{obj}_%s.__dlpack__()" % layout, no_jax)))
        add(Row(export, f"__dlpack__(max_version=(1, 0)), {layout}",
                per_library("{obj}_%s.__dlpack__(max_version=(1, 0))" % layout, no_jax)))

    imports = "import"
    for producer, label in (("numpy", "NumPy array"), ("torch", "torch tensor"),
                            ("jax", "jax array"), ("tvm_ffi", "tvm-ffi tensor")):
        target = Target(0.5, "numpy") if producer == "numpy" else None
        add(Row(imports, f"from_dlpack({label})",
                per_library("{from_dlpack}(%s)" % OBJECT[producer]), target,
                needs=() if producer == "numpy" else (producer,)))
    for layout in ("strided", "transposed"):
        add(Row(imports, f"from_dlpack(NumPy array, {layout})",
                per_library("{from_dlpack}(a_%s)" % layout, no_jax)))

    consume = "consume"
    for consumer, label in (("numpy", "np.from_dlpack"), ("torch", "torch.from_dlpack"),
                            ("jax", "jnp.from_dlpack"), ("tvm_ffi", "tvm_ffi.from_dlpack")):
        # Issue 14: NumPy takes a dl.Tensor in at most 0.9x the time of its own array.
        target = (Target(0.9, "numpy") if consumer == "numpy" else
                  Target(1.0, "numpy") if consumer == "torch" else None)
        add(Row(consume, f"{label}(·)",
                per_library("%s({obj})" % FROM_DLPACK[consumer]), target,
                needs=(FROM_DLPACK[consumer].split(".")[0],)))

    round_trip = "round trip"
    add(Row(round_trip, "X.from_dlpack(X's tensor)", per_library("{from_dlpack}({obj})")))
    add(Row(round_trip, "X.from_dlpack(np.from_dlpack(X's))",
            per_library("{from_dlpack}(np.from_dlpack({obj}))")))
    add(Row(round_trip, "X.from_dlpack(torch.from_dlpack(X's))",
            per_library("{from_dlpack}(torch.from_dlpack({obj}))"), needs=("torch",)))
    add(Row(round_trip, "X.from_dlpack(X's.__dlpack__())  [capsule]",
            {"dlinterop": "dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))",
             "torch": "torch.utils.dlpack.from_dlpack(x.__dlpack__())"}))

    alloc = "allocation"
    lib_calls = {"dlinterop": "dl", "numpy": "np", "torch": "torch", "jax": "jnp"}
    add(Row(alloc, "empty((1024, 1024))  [np f64, others f32]",
            {lib: f"{mod}.empty((1024, 1024))" for lib, mod in lib_calls.items()},
            Target(1.2, "numpy")))
    for func in ("empty", "zeros"):
        for shape in ("(1024, 1024)", f"({SMALL},)"):
            add(Row(alloc, f"{func}({shape}, float32)",
                    {lib: f"{mod}.{func}({shape}, dtype={mod}.float32)"
                     for lib, mod in lib_calls.items()}))
        if func == "empty":
            add(Row(alloc, "empty((1024, 1024), float64)",
                    {lib: f"{mod}.empty((1024, 1024), dtype={mod}.float64)"
                     for lib, mod in lib_calls.items() if lib != "jax"}))

    copy = "copy"
    add(Row(copy, f"copy, {SMALL} float32",
            {"dlinterop": "t.copy()", "numpy": "a.copy()", "torch": "x.clone()",
             "jax": "j.copy()"}))
    add(Row(copy, "copy, 4 MiB",
            {"dlinterop": "t_4m.copy()", "numpy": "a_4m.copy()", "torch": "x_4m.clone()",
             "jax": "j_4m.copy()"}))
    add(Row(copy, "copy to contiguous, 4 MiB strided",
            {"dlinterop": "t_4m_strided.copy()", "numpy": "a_4m_strided.copy()",
             "torch": "x_4m_strided.contiguous()"}))
    add(Row(copy, f"from_dlpack(NumPy array, copy=True), {SMALL}",
            per_library("{from_dlpack}(a, copy=True)", ("dlinterop", "numpy", "torch", "jax"))))
    return rows


EXCHANGE_COLUMNS = ("exchange API", "__dlpack__", "torch", "tvm_ffi")


def define_exchange_rows():
    """Issue 8: dlinterop importing a torch tensor through torch's C exchange table, and
    through torch's __dlpack__ (the route without the table, which copy=False takes), beside
    torch's and tvm-ffi's own imports of the same tensor. One timing; two targets, so the
    second row shows the first row's values against the other reference."""
    statements = {"exchange API": "dl.from_dlpack(x)",
                  "__dlpack__": "dl.from_dlpack(x, copy=False)",
                  "torch": "torch.from_dlpack(x)",
                  "tvm_ffi": "tvm_ffi.from_dlpack(x)"}
    timed = Row("exchange", "dl.from_dlpack(torch tensor) vs tvm-ffi", statements,
                Target(1.0, "tvm_ffi", subject="exchange API"), needs=("torch",))
    again = Row("exchange", "dl.from_dlpack(torch tensor) vs torch", {},
                Target(0.1, "torch", subject="exchange API"), needs=("torch",),
                values_from=timed)
    return [timed, again]


WAY_OUT_COLUMNS = ("dlinterop", "nanobind", "numpy", "torch")


def define_way_out_rows():
    """Issue 15: handing a tensor back as the caller's type (dl.to_framework beside that
    framework's own from_dlpack), and a trivial kernel (one tensor in, a new one of the
    caller's type out) written with dlinterop's Cython API beside the same with nanobind."""
    return [
        Row("way out", "to_framework(t, like=torch) vs torch.from_dlpack(t)",
            {"dlinterop": "dl.to_framework(t, like=x)", "torch": "torch.from_dlpack(t)"},
            Target(0.25, "torch"), needs=("torch",)),
        Row("way out", "to_framework(t, like=NumPy) vs np.from_dlpack(t)",
            {"dlinterop": "dl.to_framework(t, like=a)", "numpy": "np.from_dlpack(t)"}),
        Row("way out", "kernel(NumPy array) -> NumPy array",
            {"dlinterop": "dl_kernels.identity(a)", "nanobind": "nb_kernels.identity(a)"},
            Target(1.0, "nanobind"), needs=("dl_kernels", "nb_kernels")),
        Row("way out", "kernel(torch tensor) -> torch tensor",
            {"dlinterop": "dl_kernels.identity(x)", "nanobind": "nb_kernels.identity_torch(x)"},
            Target(1.0, "nanobind"), needs=("torch", "dl_kernels", "nb_kernels")),
    ]


def load_kernels(ns, notes):
    """The compiled kernels of benchmarks/kernels.py, where they build here."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import kernels
    finally:
        sys.path.pop(0)
    for name, build in (("dl_kernels", kernels.build_cython_kernels),
                        ("nb_kernels", kernels.build_nanobind_kernels)):
        try:
            module = build()
        except (OSError, subprocess.CalledProcessError) as exc:
            stderr = getattr(exc, "stderr", b"") or b""
            notes.append(f"{name} did not build: {exc} {stderr[-300:]!r}")
            continue
        if module is not None:
            ns[name] = module


def define_scaling_rows():
    """Every exchange at 1 element beside the same at 64 MiB: cost must not grow with size."""
    exchanges = [
        ("t.__dlpack__()", "t{s}.__dlpack__()", ()),
        ("t.__dlpack__(max_version=(1, 3))", "t{s}.__dlpack__(max_version=(1, 3))", ()),
        ("dl.from_dlpack(t)", "dl.from_dlpack(t{s})", ()),
        ("dl.from_dlpack(a)  [NumPy]", "dl.from_dlpack(a{s})", ()),
        ("dl.from_dlpack(x)  [torch]", "dl.from_dlpack(x{s})", ("torch",)),
        ("dl.from_dlpack(j)  [jax]", "dl.from_dlpack(j{s})", ("jnp",)),
        ("dl.from_dlpack(tv)  [tvm-ffi]", "dl.from_dlpack(tv{s})", ("tvm_ffi",)),
        ("np.from_dlpack(t)", "np.from_dlpack(t{s})", ()),
        ("torch.from_dlpack(t)", "torch.from_dlpack(t{s})", ("torch",)),
        ("jnp.from_dlpack(t)", "jnp.from_dlpack(t{s})", ("jnp",)),
        ("tvm_ffi.from_dlpack(t)", "tvm_ffi.from_dlpack(t{s})", ("tvm_ffi",)),
    ]
    return [Row("scaling", name, {"1 element": stmt.format(s="_1"),
                                  "64 MiB": stmt.format(s="_64m")},
                Target(1.1, "1 element", subject="64 MiB"), needs=needs)
            for name, stmt, needs in exchanges]


# ------------------------------------------------------------------------------ timing

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
        except Exception as exc:   # a peer without the feature, or not installed
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
        (f"RSS growth, {label}× X.from_dlpack(X's tensor)",
         {"dlinterop": (dl.from_dlpack, ns["t"]), "numpy": (np.from_dlpack, ns["a"]),
          **({"tvm_ffi": (ns["tvm_ffi"].from_dlpack, ns["tv"])} if "tvm_ffi" in ns else {})}),
        (f"RSS growth, {label}× np.from_dlpack(t)", {"dlinterop": (np.from_dlpack, ns["t"])}),
        (f"RSS growth, {label}× dl.from_dlpack(a)", {"dlinterop": (dl.from_dlpack, ns["a"])}),
        (f"RSS growth, {label}× dl.from_dlpack(t's capsule)",
         {"dlinterop": (lambda t: dl.from_dlpack(t.__dlpack__()), ns["t"])}),
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
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                         capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(),
                         timeout=300, check=True)
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
    subprocess.run([sys.executable, "-c", code], env=env, cwd=tempfile.gettempdir(),
                   timeout=300, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def import_rows(libraries, mode):
    env = subprocess_env()
    modules = {"dlinterop": "dlinterop", "numpy": "numpy", "torch": "torch", "jax": "jax",
               "tvm_ffi": "tvm_ffi"}
    importtime = Row("import", f"import X  (-X importtime, median of {mode.import_runs})", {},
                     Target(20), unit="ms")
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
    importtime.values = {column: statistics.median(values)
                         for column, values in samples.items() if values}
    delta = Row("import", "import dlinterop, wall − `python -c pass`", {}, unit="ms")
    delta.values = {"dlinterop": statistics.median(wall["dlinterop"])
                    - statistics.median(wall["baseline"])}
    return [importtime, delta]


def process_rows(libraries, mode_name):
    """256 MiB of float32 to a child and back (benchmarks/processes.py): a shared dl.Tensor
    beside a torch tensor in shared memory and a NumPy array pickled by value."""
    try:
        from benchmarks import processes
    except ImportError:       # run as a script: this file's folder is on sys.path
        import processes
    repeats = {"smoke": 1, "quick": 3, "full": 7}[mode_name]
    elements = processes.ELEMENTS if mode_name != "smoke" else 1 << 16
    size = f"{elements * 4 // MIB} MiB" if elements * 4 >= MIB else f"{elements * 4 // 1024} KiB"
    kinds = [k for k in ("dlinterop", "torch", "numpy") if k == "dlinterop" or k in libraries]
    rows = []
    measures = [
        (f"ProcessPoolExecutor (fork), {size} there and back",
         lambda kind: processes.executor_round_trip_ms(kind, "fork", repeats, elements)),
        (f"ProcessPoolExecutor (spawn), {size} there and back",
         lambda kind: processes.executor_round_trip_ms(kind, "spawn", repeats, elements)),
        (f"multiprocessing.Queue (fork), {size} there and back",
         lambda kind: processes.queue_round_trip_ms(kind, repeats, elements)),
    ]
    # A target is set only where its reference was measured (a Python without torch, say).
    def target(limit, reference):
        return Target(limit, reference=reference) if reference in kinds else None

    for name, measure in measures:
        row = Row("processes", name, {k: f"{k}: {name}" for k in kinds},
                  target(1.0, "torch"), unit="ms")
        for kind in kinds:
            try:
                row.values[kind] = measure(kind)
            except Exception as e:          # a peer that cannot do it: reported, not fatal
                row.errors[kind] = f"{type(e).__name__}: {e}"
        rows.append(row)
        rows.append(Row("processes", "  same, against NumPy by value", dict(row.statements),
                        target(0.05, "numpy"), unit="ms", values=row.values,
                        values_from=row))
    loaded = [k for k in ("dlinterop", "numpy") if k in kinds]
    loads = Row("processes", f"pickle.loads of a protocol-4 pickle, {size}",
                {k: f"pickle.loads({k})" for k in loaded}, target(1.0, "numpy"), unit="ms")
    for kind in loaded:
        loads.values[kind] = processes.pickle_loads_ms(kind, repeats, elements)
    rows.append(loads)
    return rows


# ------------------------------------------------------------------------------ report

SECTION_TITLES = {
    "export": f"Export: column = whose tensor is exported ({SMALL} float32 elements unless said)",
    "import": "Import: column = whose from_dlpack takes the row's input",
    "consume": "Consumers: row = consumer, column = whose tensor it takes",
    "round trip": "Round trips: column = library X whose tensor goes out and comes back",
    "allocation": "Allocation: column = library",
    "copy": "Copies: column = library",
    "exchange": "C exchange API: dlinterop importing a torch tensor through torch's table and "
                "through its __dlpack__, beside torch and tvm-ffi",
    "way out": "The way out: a tensor handed back as the caller's type, and a trivial kernel "
               "(one float32 tensor in, a new one of the caller's type out)",
    "scaling": "Size scaling: dlinterop exchanges at 1 element and at 64 MiB (float32)",
    "import time": "Import time (ms, fresh subprocess) and RSS growth (KiB) over round trips",
    "processes": "Across processes (ms per round trip, median): column = what is sent",
}


def format_value(value, unit):
    if value is None:
        return "—"
    if unit == "ns":
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def best_peer(row):
    peers = {c: v for c, v in row.values.items() if c in PEERS}
    if not peers:
        return None, None
    column = min(peers, key=peers.get)
    return column, peers[column]


def summarise(row):
    """The row as data: values, ratio to the best peer, target verdict."""
    peer, peer_value = best_peer(row)
    mine = row.values.get("dlinterop")
    ratio = mine / peer_value if mine is not None and peer_value else None
    measured, met = row.target.evaluate(row.values) if row.target else (None, None)
    return {
        "section": row.section, "name": row.name, "unit": row.unit,
        "statements": row.statements, "values": row.values,
        "errors": row.errors, **row.extra,
        "best_peer": peer, "ratio_to_best_peer": ratio,
        "target": None if row.target is None else {
            "limit": row.target.limit, "reference": row.target.reference,
            "subject": row.target.subject, "strict": row.target.strict,
            "describe": row.target.describe(), "measured": measured, "met": met},
    }


NAME_WIDTH = 50


def print_table(rows, columns, title, out, with_ratio=True):
    name_width = NAME_WIDTH
    header = f"{'':<{name_width}}" + "".join(f"{HEADINGS.get(c, c):>11}" for c in columns)
    if with_ratio:
        header += f"{'ratio':>8}"
    header += f"  {'target':<16}{'value':>7}  met"
    print(f"\n{title}", file=out)
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in rows:
        line = f"{row.name:<{name_width}}"
        for column in columns:
            if column in row.values:
                line += f"{format_value(row.values[column], row.unit):>11}"
            elif column in row.statements:
                line += f"{'n/a':>11}"      # it raised: see "errors" in the JSON
            else:
                line += f"{'—':>11}"        # nothing comparable
        summary = summarise(row)
        if with_ratio:
            ratio = summary["ratio_to_best_peer"]
            line += f"{'' if ratio is None else f'{ratio:.2f}':>8}"
        target = summary["target"]
        if target:
            measured = target["measured"]
            verdict = {True: "yes", False: "MISSED", None: "n/a"}[target["met"]]
            if measured is None:
                shown = ""
            elif target["reference"] is None:
                shown = format_value(measured, row.unit)
            else:
                shown = f"{measured:.2f}"
            line += f"  {target['describe']:<16}{shown:>7}  {verdict}"
        print(line.rstrip(), file=out)


# The rows the plot shows: the everyday exchanges, one or two per section.
PLOTTED_ROWS = (
    "__dlpack__()", "from_dlpack(NumPy array)", "from_dlpack(torch tensor)",
    "np.from_dlpack(·)", "torch.from_dlpack(·)", "X.from_dlpack(X's tensor)",
    f"empty(({SMALL},), float32)", f"copy, {SMALL} float32",
)


def plot(rows, libraries, path, title):
    """A bar chart of the PLOTTED_ROWS found in `rows`, ns per call for every library that
    ran, on a log scale; written to `path` in the format its extension names (.svg, .png,
    .pdf). Needs matplotlib (the "docs" extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for name in PLOTTED_ROWS for row in rows if row.name == name and row.values]
    if not shown:
        raise SystemExit("--plot: none of the plotted rows was timed (see PLOTTED_ROWS)")
    columns = [c for c in libraries if any(c in row.values for row in shown)]
    height = 0.8 / len(columns)
    figure, axes = plt.subplots(figsize=(8, 0.5 + 0.42 * len(shown) * max(2, len(columns)) / 2))
    for k, column in enumerate(columns):
        positions = [i + (k - (len(columns) - 1) / 2) * height for i in range(len(shown))]
        values = [row.values.get(column, 0) for row in shown]
        bars = axes.barh(positions, values, height, label=HEADINGS.get(column, column))
        for bar, value in zip(bars, values):
            if value:
                axes.text(value * 1.05, bar.get_y() + bar.get_height() / 2, f"{value:,.0f}",
                          va="center", fontsize=6)
    axes.set_yticks(range(len(shown)), [row.name for row in shown], fontsize=8)
    axes.invert_yaxis()
    axes.set_xscale("log")
    largest = max(value for row in shown for value in row.values.values())
    axes.set_xlim(right=largest * 4)      # room for the labels of the longest bars
    axes.set_xlabel("ns per call (median; log scale; shorter is faster)")
    axes.set_title(title, fontsize=8, pad=22)
    axes.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                ncol=len(columns), frameon=False)
    figure.tight_layout()
    figure.savefig(path, metadata={"Date": None} if path.endswith(".svg") else None)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time dlinterop beside NumPy, PyTorch, JAX and tvm-ffi on the same work.")
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_const", dest="mode", const="quick",
                       help="fewer, shorter repeats (about 30 s); numbers are rougher")
    speed.add_argument("--smoke", action="store_const", dest="mode", const="smoke",
                       help="run every row once (for tests); the numbers mean nothing")
    parser.set_defaults(mode="full")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--plot", metavar="PATH",
                        help="also draw the main rows as a bar chart (.svg, .png or .pdf; "
                             "needs matplotlib)")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help="comma-separated peers to compare against (default: all "
                             "installed of %(default)s)")
    parser.add_argument("-k", dest="pattern", default=None,
                        help="only rows whose name or statements contain this text")
    parser.add_argument("--list", action="store_true",
                        help="print each row's statements instead of timing them")
    args = parser.parse_args(argv)
    mode = MODES[args.mode]
    started = time.perf_counter()

    wanted = {p.strip() for p in args.peers.split(",") if p.strip()}
    unknown = wanted - set(PEERS)
    if unknown:
        parser.error(f"unknown peer(s) {sorted(unknown)}; choose from {', '.join(PEERS)}")
    ns, versions = load_libraries(wanted)
    build_notes = []
    if not args.list:
        load_kernels(ns, build_notes)
    libraries = [c for c in COLUMNS if c in versions and (c == "dlinterop" or c in wanted)]
    skipped = []

    def runnable(row):
        missing = [name for name in row.needs if name not in ns]
        if missing:
            skipped.append(f"{row.name} (needs {', '.join(missing)})")
        return not missing

    rows = [row for row in define_rows() if runnable(row)]
    scaling = [row for row in define_scaling_rows() if runnable(row)]
    exchange = [row for row in define_exchange_rows() if runnable(row)]
    way_out = [row for row in define_way_out_rows() if runnable(row)]
    for row in exchange:
        row.statements = {c: s for c, s in row.statements.items()
                          if c not in PEERS or c in libraries}
    for row in rows:
        row.statements = {c: s for c, s in row.statements.items() if c in libraries}
    if args.pattern:
        def keep(row):
            return args.pattern in row.name or any(args.pattern in s
                                                   for s in row.statements.values())
        rows, scaling = [r for r in rows if keep(r)], [r for r in scaling if keep(r)]
        way_out = [r for r in way_out if keep(r)]
        kept = [r for r in exchange if r.values_from is None and keep(r)]
        exchange = [r for r in exchange if r in kept or r.values_from in kept]
    if args.list:
        for row in rows + exchange + way_out + scaling:
            print(f"[{row.section}] {row.name}")
            for column, statement in row.statements.items():
                print(f"    {HEADINGS.get(column, column):>10}: {statement}")
        return 0

    build_inputs(ns)
    # The peers leave large heaps behind; frozen, they make each gc.collect() cheap.
    gc.collect()
    gc.freeze()
    for row in rows + exchange + way_out + scaling:
        time_row(row, ns, mode)
    other = []
    processes = []
    live_exports = None
    if not args.pattern:
        processes = process_rows(libraries, args.mode)
        other = import_rows(libraries, mode)
        memory, live_exports = memory_rows(ns, mode)
        other += memory

    out = sys.stdout
    peers_text = ", ".join(f"{HEADINGS[c]} {versions[c]}" for c in libraries if c != "dlinterop")
    print(f"dlinterop {versions['dlinterop']} beside {peers_text or 'no peers'}; "
          f"Python {platform.python_version()}, {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPUs", file=out)
    print(f"mode {args.mode}: {mode.repeats} interleaved repeats of ~{mode.repeat_seconds * 1e3:g}"
          f" ms per candidate; medians in ns per call; ratio = dlinterop / best peer; "
          f"value = the target's own measure", file=out)
    for line in skipped:
        print(f"skipped, a peer not installed or not asked for: {line}", file=out)
    for line in build_notes:
        print(f"not built: {line}", file=out)
    for section in ("export", "import", "consume", "round trip", "allocation", "copy"):
        section_rows = [r for r in rows if r.section == section]
        if section_rows:
            print_table(section_rows, libraries, SECTION_TITLES[section], out)
    if exchange:
        print_table(exchange, [c for c in EXCHANGE_COLUMNS
                               if any(c in r.statements for r in exchange)],
                    SECTION_TITLES["exchange"], out, with_ratio=False)
    if way_out:
        print_table(way_out, [c for c in WAY_OUT_COLUMNS
                              if any(c in r.statements for r in way_out)],
                    SECTION_TITLES["way out"], out, with_ratio=False)
    if scaling:
        print_table(scaling, ["1 element", "64 MiB"], SECTION_TITLES["scaling"], out,
                    with_ratio=False)
    if processes:
        print_table(processes, [c for c in ("dlinterop", "torch", "numpy")
                                if any(c in r.values for r in processes)],
                    SECTION_TITLES["processes"], out, with_ratio=False)
    if other:
        print_table(other, libraries, SECTION_TITLES["import time"], out, with_ratio=False)
        if live_exports is not None:
            print(f"dl.memory_stats()['live_exports'] change over the memory loops: "
                  f"{live_exports}", file=out)

    summaries = [summarise(row) for row in rows + exchange + way_out + scaling + processes + other]
    judged = [s for s in summaries if s["target"] is not None]
    missed = [s["name"] for s in judged if s["target"]["met"] is False]
    unknown_verdict = [s["name"] for s in judged if s["target"]["met"] is None]
    print(f"\ntargets met: {sum(1 for s in judged if s['target']['met'])}/{len(judged)}"
          + (f"; missed: {'; '.join(missed)}" if missed else "")
          + (f"; not measured: {'; '.join(unknown_verdict)}" if unknown_verdict else ""),
          file=out)
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.1f} s)", file=out)

    if args.plot:
        plot(rows, libraries, args.plot,
             f"dlinterop {versions['dlinterop']} beside {peers_text or 'no peers'}; "
             f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {args.mode} mode")
    if args.json:
        document = {
            "mode": args.mode, "settings": dataclasses.asdict(mode),
            "versions": versions,
            "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "seconds": elapsed,
            "live_exports_change": live_exports,
            "rows": summaries,
            "skipped": skipped,
            "not_built": build_notes,
        }
        with open(args.json, "w") as f:
            json.dump(document, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
