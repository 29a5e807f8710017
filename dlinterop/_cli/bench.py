"""python -m dlinterop bench: a quick side-by-side benchmark of the everyday exchanges.

dlinterop and each installed peer (NumPy, PyTorch) do the same work in this process; each
cell is the median of interleaved repeats, in ns per call, and the ratio is dlinterop's time
over the fastest peer's. It takes a few seconds. The full suite (every layout, size and
dtype, JAX and tvm-ffi, imports, memory, processes, asv across commits) lives in the source
tree's benchmarks/ folder: python -m benchmarks.
"""

import importlib
import platform
import statistics
import sys
import timeit

PEERS = ("numpy", "torch")
COLUMNS = ("dlinterop",) + PEERS

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


def run(peers=PEERS, repeats=9, seconds=0.002):
    """{"versions": ..., "rows": [{"name", "ns": {column: median}, "ratio"}]}."""
    ns, versions = _namespace(peers)
    columns = [c for c in COLUMNS if c in versions and (c == "dlinterop" or c in peers)]
    rows = []
    for name, statements in ROWS:
        timers = {}
        for column in columns:
            try:
                timer = timeit.Timer(statements[column], globals=ns)
                timers[column] = (timer, calibrate(timer, seconds))
            except NameError:  # a library the statement needs is not installed
                continue
        if "dlinterop" not in timers:
            continue
        samples = {column: [] for column in timers}
        order = list(timers)
        for k in range(repeats):  # interleaved, each repeat starting elsewhere
            for column in order[k % len(order) :] + order[: k % len(order)]:
                timer, number = timers[column]
                samples[column].append(timer.timeit(number) / number * 1e9)
        medians = {column: statistics.median(values) for column, values in samples.items()}
        peer_times = [v for c, v in medians.items() if c != "dlinterop"]
        ratio = medians["dlinterop"] / min(peer_times) if peer_times else None
        rows.append({"name": name, "ns": medians, "ratio": ratio})
    # Dropped here, not left to the namespace's last reference: on free-threaded CPython
    # the functions timeit compiled over it outlive the run (deferred reference counting)
    # after other threads have run, and would keep its Tensor until some later collection.
    ns.clear()
    return {
        "versions": versions,
        "python": platform.python_version(),
        "rows": rows,
        "repeats": repeats,
    }


def main(peers=PEERS, repeats=9, out=sys.stdout):
    """Runs the benchmark and prints its table; returns run()'s results."""
    result = run(peers, repeats)
    versions = result["versions"]
    columns = [c for c in COLUMNS if c in versions and (c == "dlinterop" or c in peers)]
    missing = [peer for peer in peers if peer not in versions]
    print(
        f"dlinterop {versions['dlinterop']} beside "
        f"{', '.join(f'{c} {versions[c]}' for c in columns[1:]) or 'no peer'}"
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
    print(
        "Timings on a shared machine move from run to run: compare ratios within one run.", file=out
    )
    return result
