"""python -m dlinterop bench: a quick side-by-side benchmark of the everyday exchanges.

dlinterop and each installed peer (NumPy, PyTorch) do the same work in this process; each
cell is the median of interleaved repeats, in ns per call, and the ratio is dlinterop's time
over the fastest peer's. Any other framework the checker knows, when asked for with --peers,
is timed importing its own array beside dl.from_dlpack of the same array. It takes a few
seconds. The full suite (every layout, size and
dtype, JAX and tvm-ffi, imports, memory, processes, asv across commits) lives in the source
tree's benchmarks/ folder: python -m benchmarks.
"""

import importlib
import importlib.metadata
import platform
import statistics
import sys
import timeit

PEERS = ("numpy", "torch")
COLUMNS = ("dlinterop",) + PEERS

# Every other framework the conformance checker knows: the code that makes its 16-element
# float32 array (named `obj`) and the framework's own import of such an array ({obj} is that
# array's name). Each is timed beside dl.from_dlpack of the same array, in a table of its own.
# The benchmark runner of the source tree (benchmarks/) times the same pairs.
FRAMEWORKS = {
    "jax": (
        "import os\nos.environ.setdefault('JAX_PLATFORMS', 'cpu')\nimport jax.numpy as jnp\n"
        "obj = jnp.zeros(16, jnp.float32)\nobj.block_until_ready()",
        "jnp.from_dlpack({obj})",
    ),
    "tvm_ffi": (
        "import numpy, tvm_ffi\nobj = tvm_ffi.from_dlpack(numpy.zeros(16, numpy.float32))",
        "tvm_ffi.from_dlpack({obj})",
    ),
    "array_api_strict": (
        "import array_api_strict as xp\nobj = xp.zeros(16, dtype=xp.float32)",
        "xp.from_dlpack({obj})",
    ),
    "cupy": ("import cupy\nobj = cupy.zeros(16, cupy.float32)", "cupy.from_dlpack({obj})"),
    "pyarrow": (
        "import numpy, pyarrow as pa\nobj = pa.array(numpy.zeros(16, numpy.float32))",
        "pa.Array.from_dlpack({obj})",
    ),
    "cuda_core": (
        "import numpy\nfrom cuda.core.utils import StridedMemoryView as SMV\n"
        "obj = SMV.from_dlpack(numpy.zeros(16, numpy.float32), stream_ptr=-1)",
        "SMV.from_dlpack({obj}, stream_ptr=-1)",
    ),
    "mlx": (
        "import mlx.core as mx\nobj = mx.zeros((16,), dtype=mx.float32)\nmx.eval(obj)",
        "mx.from_dlpack({obj})",
    ),
    "warp": (
        "import warp as wp\nwp.config.log_level = wp.LOG_WARNING\nwp.init()\n"
        "obj = wp.zeros(16, dtype=wp.float32, device='cpu')",
        "wp.from_dlpack({obj})",
    ),
    "nanobind": (
        "import numpy\nfrom dlinterop.testing._nanobind import peer\nnb = peer()\n"
        "obj = nb.copy(numpy.zeros(16, numpy.float32))",
        "nb.from_dlpack({obj})",
    ),
}
ALL_PEERS = PEERS + tuple(FRAMEWORKS)


def framework_namespace(name):
    """The namespace FRAMEWORKS[name]'s code makes (its array is `obj`), and the framework's
    version; None when it is not installed here (or cannot make an array: no GPU for CuPy,
    no compiler for nanobind's module)."""
    import dlinterop as dl

    ns = {"dl": dl}
    try:
        exec(FRAMEWORKS[name][0], ns)
    except Exception:  # an optional peer: missing, or unusable on this machine
        return None
    module = {"cuda_core": "cuda.core", "mlx": "mlx.core"}.get(name, name)
    try:
        version = importlib.metadata.version(
            {"cuda_core": "cuda-core", "tvm_ffi": "apache-tvm-ffi", "warp": "warp-lang"}.get(
                name, name.replace("_", "-")
            )
        )
    except importlib.metadata.PackageNotFoundError:
        version = getattr(sys.modules.get(module), "__version__", "?")
    return ns, version


# (row, {column: statement}); a statement runs in a namespace holding dl, np, torch and a
# 16-element float32 tensor of each library: t (dlinterop), a (NumPy), x (PyTorch).
ROWS = (
    (
        "__dlpack__()",
        {"dlinterop": "t.__dlpack__()", "numpy": "a.__dlpack__()", "torch": "x.__dlpack__()"},
    ),
    (
        "import a NumPy array",
        {
            "dlinterop": "dl.from_dlpack(a)",
            "numpy": "np.from_dlpack(a)",
            "torch": "torch.from_dlpack(a)",
        },
    ),
    (
        "import a torch tensor",
        {
            "dlinterop": "dl.from_dlpack(x)",
            "numpy": "np.from_dlpack(x)",
            "torch": "torch.from_dlpack(x)",
        },
    ),
    (
        "np.from_dlpack of X's tensor",
        {
            "dlinterop": "np.from_dlpack(t)",
            "numpy": "np.from_dlpack(a)",
            "torch": "np.from_dlpack(x)",
        },
    ),
    (
        "torch.from_dlpack of X's tensor",
        {
            "dlinterop": "torch.from_dlpack(t)",
            "numpy": "torch.from_dlpack(a)",
            "torch": "torch.from_dlpack(x)",
        },
    ),
    (
        "empty((16,), float32)",
        {
            "dlinterop": "dl.empty((16,), dl.float32)",
            "numpy": "np.empty((16,), np.float32)",
            "torch": "torch.empty((16,), dtype=torch.float32)",
        },
    ),
    ("copy of 16 float32", {"dlinterop": "t.copy()", "numpy": "a.copy()", "torch": "x.clone()"}),
)


def _namespace(peers):
    import dlinterop as dl

    ns = {"dl": dl, "t": dl.zeros((16,), dl.float32)}
    versions = {"dlinterop": dl.__version__}
    if "numpy" in peers or "torch" in peers:  # np.from_dlpack rows need NumPy for torch too
        try:
            np = importlib.import_module("numpy")  # optional peers: no import statement
        except ImportError:
            pass
        else:
            ns.update(np=np, a=np.zeros(16, np.float32))
            versions["numpy"] = np.__version__
    if "torch" in peers:
        try:
            torch = importlib.import_module("torch")
        except ImportError:
            pass
        else:
            ns.update(torch=torch, x=torch.zeros(16, dtype=torch.float32))
            versions["torch"] = torch.__version__
    return ns, versions


WARM_UP_CALLS = 3


def calibrate(timer, seconds):
    """Calls per sample so that one sample takes about `seconds` (at least one call).

    The first calls are made apart, untimed: a statement's first call may pay a one-time
    set-up (the first torch tensor imported probes PyTorch's internals, a type is described
    once, an interpreter specialises its code), and timed as one loop that set-up looked
    long enough to settle on one call per sample, so every sample was one call plus the
    timer's own overhead (the same import read 2,500 ns in one table of the benchmark runner
    and 170 ns in the next)."""
    timer.timeit(WARM_UP_CALLS)
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= seconds / 5 or number >= 10_000_000:
            break
        number *= 10 if elapsed < seconds / 50 else 2
    return max(1, round(number * seconds / elapsed)) if elapsed > 0 else number


def _medians(timers, repeats, calls=1):
    """{column: median ns per call} of timers {column: (timeit.Timer, number)}, sampled
    interleaved, each repeat starting at another column; each statement makes `calls`
    calls."""
    samples = {column: [] for column in timers}
    order = list(timers)
    for k in range(repeats):
        for column in order[k % len(order) :] + order[: k % len(order)]:
            timer, number = timers[column]
            samples[column].append(timer.timeit(number) / number / calls * 1e9)
    return {column: statistics.median(values) for column, values in samples.items()}


def _time_row(name, statements, ns, repeats, seconds):
    """{"name", "ns": {column: median}, "ratio"}, or None when dlinterop's cell cannot run."""
    timers = {}
    for column, statement in statements.items():
        try:
            timer = timeit.Timer(statement, globals=ns)
            timers[column] = (timer, calibrate(timer, seconds))
        except NameError:  # a library the statement needs is not installed
            continue
    if "dlinterop" not in timers:
        return None
    medians = _medians(timers, repeats)
    peer_times = [v for c, v in medians.items() if c != "dlinterop"]
    ratio = medians["dlinterop"] / min(peer_times) if peer_times else None
    return {"name": name, "ns": medians, "ratio": ratio}


# The C exchange tables (DLPack 1.3's DLPackExchangeAPI), called in a C loop as a C, Cython
# or Rust consumer calls them (dlinterop.testing._conformance.exchange_loop): per object,
# the table's non-owning view, its owned tensor and deleter, and the object's __dlpack__
# called from C, which is what a consumer without a table pays. (row, object, table), in
# the namespace of _namespace; a row whose names are missing is left out.
TABLE_ROWS = (
    ("numpy.ndarray, dl.exchange_api_for", "a", "dl.exchange_api_for(np.ndarray)"),
    ("dl.Tensor, its own table", "t", "dl.Tensor.__dlpack_c_exchange_api__"),
    ("torch.Tensor, dl.exchange_api_for", "x", "dl.exchange_api_for(torch.Tensor)"),
    ("torch.Tensor, torch's own table", "x", "torch.Tensor.__dlpack_c_exchange_api__"),
    ("pyarrow.Array, dl.exchange_api_for", "pa_a", "dl.exchange_api_for(pa_a)"),
    ("warp.array, dl.exchange_api_for", "wp_a", "dl.exchange_api_for(wp_a)"),
)


def _table_objects(ns):
    """The objects only the exchange-table rows time (pyarrow's and Warp's 16 float32),
    where those frameworks and NumPy are installed."""
    np = ns.get("np")
    if np is None:
        return {}
    found = {}
    try:
        pa = importlib.import_module("pyarrow")
    except ImportError:
        pass
    else:
        found["pa_a"] = pa.array(np.zeros(16, np.float32))
    try:
        wp = importlib.import_module("warp")
    except ImportError:
        pass
    else:
        wp.config.quiet = True
        found["wp_a"] = wp.array(np.zeros(16, np.float32), device="cpu")
    return found


TABLE_COLUMNS = ("view", "owned", "__dlpack__")
TABLE_CALLS = 1000  # calls per C loop: a Python call's cost shared among them


def _time_tables(ns, repeats, seconds):
    """[{"name", "ns": {"view", "owned", "__dlpack__": median ns per call}, "ratio": view /
    __dlpack__}] for each of TABLE_ROWS that can run here."""
    from dlinterop.testing._conformance import exchange_loop

    rows = []
    ns = dict(ns, **_table_objects(ns))
    for name, obj_name, table_code in TABLE_ROWS:
        try:
            obj, table = ns[obj_name], eval(table_code, ns)
        except (KeyError, NameError, AttributeError):  # a peer, or its table, is missing
            continue
        # Statements over a namespace cleared after, as run() clears its own: on
        # free-threaded CPython the functions timeit compiles can outlive the run, and
        # would keep the object alive through anything they hold.
        row_ns = {"loop": exchange_loop, "table": table, "obj": obj, "n": TABLE_CALLS}
        timers = {}
        for column, kind in zip(TABLE_COLUMNS, ("view", "owned", "dlpack")):
            timer = timeit.Timer(f"loop(table, obj, n, {kind!r})", globals=row_ns)
            try:
                timers[column] = (timer, calibrate(timer, seconds))
            except Exception:  # a refusal (a table with no view for this object): no cell
                continue
        medians = _medians(timers, repeats, TABLE_CALLS)
        row_ns.clear()
        ratio = None
        if "view" in medians and medians.get("__dlpack__"):
            ratio = medians["view"] / medians["__dlpack__"]
        rows.append({"name": name, "ns": medians, "ratio": ratio})
    ns.clear()  # this copy: the caller clears its own
    return rows


def run(peers=PEERS, repeats=9, seconds=0.002):
    """{"versions": ..., "rows": [{"name", "ns": {column: median}, "ratio"}],
    "frameworks": [the same, columns "dlinterop" and "own"], "tables": [the same, columns
    "view", "owned" and "__dlpack__": the C exchange tables]}."""
    ns, versions = _namespace(peers)
    columns = [c for c in COLUMNS if c in versions and (c == "dlinterop" or c in peers)]
    rows = []
    for name, statements in ROWS:
        row = _time_row(name, {c: statements[c] for c in columns}, ns, repeats, seconds)
        if row is not None:
            rows.append(row)
    tables = _time_tables(ns, repeats, seconds)
    frameworks = []
    for peer in peers:
        if peer not in FRAMEWORKS:
            continue
        made = framework_namespace(peer)
        if made is None:
            continue
        peer_ns, versions[peer] = made
        statements = {
            "dlinterop": "dl.from_dlpack(obj)",
            "own": FRAMEWORKS[peer][1].format(obj="obj"),
        }
        row = _time_row(f"import a {peer} array", statements, peer_ns, repeats, seconds)
        if row is not None:
            frameworks.append(row)
        peer_ns.clear()
    # Dropped here, not left to the namespace's last reference: on free-threaded CPython
    # the functions timeit compiled over it outlive the run (deferred reference counting)
    # after other threads have run, and would keep its Tensor until some later collection.
    ns.clear()
    return {
        "versions": versions,
        "python": platform.python_version(),
        "rows": rows,
        "frameworks": frameworks,
        "tables": tables,
        "repeats": repeats,
    }


def main(peers=PEERS, repeats=9, out=sys.stdout):
    """Runs the benchmark and prints its table; returns run()'s results."""
    result = run(peers, repeats)
    versions = result["versions"]
    columns = [c for c in COLUMNS if c in versions and (c == "dlinterop" or c in peers)]
    missing = [peer for peer in peers if peer not in versions]
    others = [p for p in peers if p in FRAMEWORKS and p in versions]
    print(
        f"dlinterop {versions['dlinterop']} beside "
        f"{', '.join(f'{c} {versions[c]}' for c in columns[1:] + others) or 'no peer'}"
        f"{' (not installed: ' + ', '.join(missing) + ')' if missing else ''}; "
        f"Python {result['python']}",
        file=out,
    )
    print(
        f"ns per call, median of {repeats} interleaved repeats; ratio = dlinterop / "
        "fastest peer (below 1: dlinterop is faster)",
        file=out,
    )
    header = f"{'':34}" + "".join(f"{c:>11}" for c in columns) + f"{'ratio':>8}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in result["rows"]:
        cells = "".join(
            f"{row['ns'][c]:>11,.0f}" if c in row["ns"] else f"{'-':>11}" for c in columns
        )
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"{row['name']:34}{cells}{ratio:>8}", file=out)
    if result["frameworks"]:
        print(
            f"\n{'each framework: dl.from_dlpack':34}{'dlinterop':>11}{'its own':>11}{'ratio':>8}",
            file=out,
        )
        print("-" * 64, file=out)
        for row in result["frameworks"]:
            print(
                f"{row['name']:34}{row['ns']['dlinterop']:>11,.0f}{row['ns'].get('own', 0):>11,.0f}"
                f"{'' if row['ratio'] is None else format(row['ratio'], '.2f'):>8}",
                file=out,
            )
    if result["tables"]:
        print(
            f"\n{'exchange tables, called from C':34}"
            + "".join(f"{c:>11}" for c in TABLE_COLUMNS)
            + f"{'ratio':>8}",
            file=out,
        )
        print("-" * 75, file=out)
        for row in result["tables"]:
            cells = "".join(
                f"{row['ns'][c]:>11,.1f}" if c in row["ns"] else f"{'-':>11}" for c in TABLE_COLUMNS
            )
            ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}"
            print(f"{row['name']:34}{cells}{ratio:>8}", file=out)
        print(
            "(ratio = view / __dlpack__ called from C: what a consumer without a table pays)",
            file=out,
        )
    print(
        "Timings on a shared machine move from run to run: compare ratios within one run.", file=out
    )
    return result
