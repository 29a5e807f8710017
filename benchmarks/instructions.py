"""Instructions per call, counted by valgrind's callgrind: repeatable where timings on a
noisy machine are not, so it backs the claims whose margins are smaller than the noise.

Each statement runs N and 3N times, each in a fresh interpreter under callgrind (fixed hash
seed, no address-space randomisation); the difference of the two totals over 2N is its
count per call. BLAS runs one thread (an idle pool's spinning is counted too and varies);
--repeat measures each statement several times (median printed, all shown) to prove it.

    python benchmarks/instructions.py                 # the NumPy import/export comparisons
    python benchmarks/instructions.py -n 20000 "dl.from_dlpack(a)" "np.from_dlpack(a)"
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

SETUP = """
import numpy as np
import dlinterop as dl
a = np.arange(16, dtype=np.float32)
t = dl.from_dlpack(np.arange(16, dtype=np.float32)).copy()
"""

# The pairs the NumPy targets compare (issue 14): ours first, then NumPy's.
DEFAULT = [
    "dl.from_dlpack(a)",
    "np.from_dlpack(a)",
    "np.from_dlpack(t)",
    "t.__dlpack__(max_version=(1, 3))",
    "a.__dlpack__(max_version=(1, 0))",
]

RUNNER = """
import timeit
{setup}
statement = {statement!r}
timer = timeit.Timer(statement, globals=globals())
timer.timeit(100)   # warm every cache and lazy set-up before the counted calls
timer.timeit({number})
"""


def total_instructions(statement, number, setup):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        code = RUNNER.format(setup=setup, statement=statement, number=number)
        # A fixed hash seed, so that start-up and imports cost the same in every run.
        # One BLAS thread: callgrind counts every thread, and an idle BLAS pool spinning
        # for a time that varies from run to run made the counts wander by several percent.
        env = dict(
            os.environ,
            PYTHONHASHSEED="0",
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
        )
        prefix = ["setarch", "-R"] if shutil.which("setarch") else []
        subprocess.run(
            [
                *prefix,
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                code,
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        with open(out) as f:
            for line in f:
                match = re.match(r"(?:summary|totals):\s+(\d+)", line)
                if match:
                    return int(match.group(1))
    raise RuntimeError("callgrind wrote no total")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("statements", nargs="*", default=DEFAULT)
    parser.add_argument("-n", "--number", type=int, default=50000)
    parser.add_argument("--setup", default=SETUP)
    parser.add_argument(
        "-r",
        "--repeat",
        type=int,
        default=1,
        help="measure each statement this many times and print the median",
    )
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2
    for statement in args.statements:
        # Two run lengths of the same statement: start-up, set-up and the warm-up calls
        # cancel out, leaving the cost of the extra calls.
        counts = []
        for _ in range(args.repeat):
            short = total_instructions(statement, args.number, args.setup)
            long = total_instructions(statement, 3 * args.number, args.setup)
            counts.append((long - short) / (2 * args.number))
        spread = f"  (of {', '.join(f'{c:.0f}' for c in counts)})" if args.repeat > 1 else ""
        print(f"{statistics.median(counts):10.0f}  {statement}{spread}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
