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

The work is split by job: rows/ (what is timed, and the targets; a module per table),
peers.py (the libraries and their inputs), timing.py (how it is measured), report.py (the
tables and the JSON's rows) and plot.py (the figure); this file reads the command line and
runs them.
"""

import argparse
import dataclasses
import gc
import json
import os
import platform
import sys
import time

if not __package__:
    # Run as a script: sys.path[0] is this folder, where `benchmarks` is the asv suite.
    # The repository root instead, as python -m benchmarks has it.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.peers import (  # noqa: E402
    build_inputs,
    build_tensor_inputs,
    framework_imports,
    load_kernels,
    load_libraries,
)
from benchmarks.plot import plot  # noqa: E402
from benchmarks.report import SECTION_TITLES, print_table, summarise  # noqa: E402
from benchmarks.rows.exchange import EXCHANGE_COLUMNS, define_exchange_rows  # noqa: E402
from benchmarks.rows.frameworks import FRAMEWORK_COLUMNS, define_framework_rows  # noqa: E402
from benchmarks.rows.main import define_rows  # noqa: E402
from benchmarks.rows.scaling import define_scaling_rows  # noqa: E402
from benchmarks.rows.table import COLUMNS, HEADINGS, PEERS  # noqa: E402
from benchmarks.rows.tensor import TENSOR_COLUMNS, define_tensor_rows  # noqa: E402
from benchmarks.rows.way_out import WAY_OUT_COLUMNS, define_way_out_rows  # noqa: E402
from benchmarks.timing import (  # noqa: E402
    MODES,
    import_rows,
    memory_rows,
    process_rows,
    time_row,
)
from dlinterop._cli.bench import FRAMEWORKS  # noqa: E402

# The columns' peers, then every other framework the checker knows (a table of their own).
ALL_PEERS = PEERS + tuple(name for name in FRAMEWORKS if name not in PEERS)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time dlinterop beside NumPy, PyTorch, JAX and tvm-ffi on the same work.",
    )
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument(
        "--quick",
        action="store_const",
        dest="mode",
        const="quick",
        help="fewer, shorter repeats (about 30 s); numbers are rougher",
    )
    speed.add_argument(
        "--smoke",
        action="store_const",
        dest="mode",
        const="smoke",
        help="run every row once (for tests); the numbers mean nothing",
    )
    parser.set_defaults(mode="full")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--plot",
        metavar="PATH",
        help="also draw the main rows as a bar chart (.svg, .png or .pdf; needs matplotlib)",
    )
    parser.add_argument(
        "--peers",
        default=",".join(ALL_PEERS),
        help="comma-separated peers to compare against: columns of the tables, or frameworks "
        "timed in a table of their own (default: all installed of %(default)s)",
    )
    parser.add_argument(
        "-k",
        dest="pattern",
        default=None,
        help="only rows whose name or statements contain this text",
    )
    parser.add_argument(
        "--section",
        default=None,
        help="only the rows of this table (e.g. tensor, export, import, scaling)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print each row's statements instead of timing them"
    )
    args = parser.parse_args(argv)
    mode = MODES[args.mode]
    started = time.perf_counter()

    wanted = {p.strip() for p in args.peers.split(",") if p.strip()}
    unknown = wanted - set(ALL_PEERS)
    if unknown:
        parser.error(f"unknown peer(s) {sorted(unknown)}; choose from {', '.join(ALL_PEERS)}")
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
    frameworks = define_framework_rows(framework_imports(ns))
    tensor = define_tensor_rows()
    for row in exchange:
        row.statements = {
            c: s for c, s in row.statements.items() if c not in PEERS or c in libraries
        }
    for row in rows:
        row.statements = {c: s for c, s in row.statements.items() if c in libraries}
    if args.pattern:

        def keep(row):
            return args.pattern in row.name or any(
                args.pattern in s for s in row.statements.values()
            )

        rows, scaling = [r for r in rows if keep(r)], [r for r in scaling if keep(r)]
        way_out = [r for r in way_out if keep(r)]
        frameworks = [r for r in frameworks if keep(r)]
        tensor = [r for r in tensor if keep(r)]
        kept = [r for r in exchange if r.values_from is None and keep(r)]
        exchange = [r for r in exchange if r in kept or r.values_from in kept]
    if args.section:
        rows, scaling, exchange, way_out, frameworks, tensor = (
            [r for r in group if r.section == args.section]
            for group in (rows, scaling, exchange, way_out, frameworks, tensor)
        )
    if args.list:
        for row in rows + exchange + way_out + frameworks + tensor + scaling:
            print(f"[{row.section}] {row.name}")
            for column, statement in row.statements.items():
                print(f"    {HEADINGS.get(column, column):>10}: {statement}")
        return 0

    build_inputs(ns)
    build_tensor_inputs(ns)
    # The peers leave large heaps behind; frozen, they make each gc.collect() cheap.
    gc.collect()
    gc.freeze()
    for row in rows + exchange + way_out + frameworks + tensor + scaling:
        time_row(row, ns, mode)
    other = []
    processes = []
    live_exports = None
    if not (args.pattern or args.section):
        processes = process_rows(libraries, args.mode)
        other = import_rows(libraries, mode)
        memory, live_exports = memory_rows(ns, mode)
        other += memory

    out = sys.stdout
    shown = [c for c in libraries if c != "dlinterop"] + [
        name for name in FRAMEWORKS if name in versions and name not in libraries
    ]
    peers_text = ", ".join(f"{HEADINGS.get(c, c)} {versions[c]}" for c in shown)
    print(
        f"dlinterop {versions['dlinterop']} beside {peers_text or 'no peers'}; "
        f"Python {platform.python_version()}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs",
        file=out,
    )
    print(
        f"mode {args.mode}: {mode.repeats} interleaved repeats of ~{mode.repeat_seconds * 1e3:g}"
        f" ms per candidate; medians in ns per call; ratio = dlinterop / best peer; "
        f"value = the target's own measure",
        file=out,
    )
    for line in skipped:
        print(f"skipped, a peer not installed or not asked for: {line}", file=out)
    for line in build_notes:
        print(f"not built: {line}", file=out)
    for section in ("export", "import", "consume", "round trip", "allocation", "copy"):
        section_rows = [r for r in rows if r.section == section]
        if section_rows:
            print_table(section_rows, libraries, SECTION_TITLES[section], out)
    if exchange:
        print_table(
            exchange,
            [c for c in EXCHANGE_COLUMNS if any(c in r.statements for r in exchange)],
            SECTION_TITLES["exchange"],
            out,
            with_ratio=False,
        )
    if way_out:
        print_table(
            way_out,
            [c for c in WAY_OUT_COLUMNS if any(c in r.statements for r in way_out)],
            SECTION_TITLES["way out"],
            out,
            with_ratio=False,
        )
    if frameworks:
        print_table(
            frameworks,
            list(FRAMEWORK_COLUMNS),
            SECTION_TITLES["frameworks"],
            out,
            with_ratio=False,
        )
    if tensor:
        print_table(
            tensor,
            [c for c in TENSOR_COLUMNS if any(c in r.statements for r in tensor)],
            SECTION_TITLES["tensor"],
            out,
            with_ratio=False,
        )
    if scaling:
        print_table(
            scaling, ["1 element", "64 MiB"], SECTION_TITLES["scaling"], out, with_ratio=False
        )
    if processes:
        print_table(
            processes,
            [c for c in ("dlinterop", "torch", "numpy") if any(c in r.values for r in processes)],
            SECTION_TITLES["processes"],
            out,
            with_ratio=False,
        )
    if other:
        print_table(other, libraries, SECTION_TITLES["import time"], out, with_ratio=False)
        if live_exports is not None:
            print(
                f"dl.memory_stats()['live_exports'] change over the memory loops: {live_exports}",
                file=out,
            )

    summaries = [
        summarise(row)
        for row in rows + exchange + way_out + frameworks + tensor + scaling + processes + other
    ]
    judged = [s for s in summaries if s["target"] is not None]
    missed = [s["name"] for s in judged if s["target"]["met"] is False]
    unknown_verdict = [s["name"] for s in judged if s["target"]["met"] is None]
    print(
        f"\ntargets met: {sum(1 for s in judged if s['target']['met'])}/{len(judged)}"
        + (f"; missed: {'; '.join(missed)}" if missed else "")
        + (f"; not measured: {'; '.join(unknown_verdict)}" if unknown_verdict else ""),
        file=out,
    )
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.1f} s)", file=out)

    if args.plot:
        plot(
            rows,
            libraries,
            args.plot,
            f"dlinterop {versions['dlinterop']} beside {peers_text or 'no peers'}; "
            f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {args.mode} mode",
        )
    if args.json:
        document = {
            "mode": args.mode,
            "settings": dataclasses.asdict(mode),
            "versions": versions,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "seconds": elapsed,
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
