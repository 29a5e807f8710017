"""dl.exchange_api_for's tables called from C, beside what a C consumer does without them:
the object's __dlpack__(max_version=(1, 3)) called from C, the capsule read and released
(its deleter run). Per object: the table's non-owning view, its owning export (then its
deleter), and __dlpack__; each the median of interleaved repeats of a C loop
(dlinterop.testing._conformance.exchange_loop), with its ratio to __dlpack__ of the same
run. NumPy's arrays always; PyTorch's (dlinterop's table and PyTorch's own), pyarrow's and
Warp's where installed.

    python benchmarks/exchange_tables.py [--repeats N] [--number CALLS]"""

import argparse
import importlib
import statistics
import sys
import time


def cases():
    """(title, object, table) for each object timed, its framework installed."""
    import numpy as np

    import dlinterop as dl

    yield "numpy: 16 float32", np.arange(16, dtype=np.float32)
    yield "numpy: (64, 64) float32 [::2, ::-1]", np.ones((64, 64), np.float32)[::2, ::-1]
    for module, make in (
        ("torch", lambda m: m.zeros(16, dtype=m.float32)),
        ("pyarrow", lambda m: m.array(np.zeros(16, np.float32))),
        ("warp", lambda m: m.array(np.zeros(16, np.float32), device="cpu")),
    ):
        try:
            framework = importlib.import_module(module)
        except ImportError:
            continue
        if module == "warp":
            framework.config.quiet = True
        obj = make(framework)
        yield f"{module}: 16 float32", obj
        own = getattr(type(obj), "__dlpack_c_exchange_api__", None)
        if own is not None and own is not dl.exchange_api_for(obj):
            yield f"{module}: 16 float32, {module}'s own table", (obj, own)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--number", type=int, default=20000, help="calls per repeat")
    args = parser.parse_args(argv)
    import dlinterop as dl
    from dlinterop.testing._conformance import exchange_loop

    for title, case in cases():
        obj, table = case if isinstance(case, tuple) else (case, dl.exchange_api_for(case))
        ways = {"view (table)": "view", "owning (table)": "owned", "__dlpack__": "dlpack"}
        samples = {name: [] for name in ways}
        for repeat in range(args.repeats):
            order = list(ways)[repeat % 3 :] + list(ways)[: repeat % 3]
            for name in order:
                start = time.perf_counter()
                exchange_loop(table, obj, args.number, ways[name])
                samples[name].append((time.perf_counter() - start) / args.number * 1e9)
        medians = {name: statistics.median(values) for name, values in samples.items()}
        print(title)
        for name, median in medians.items():
            ratio = median / medians["__dlpack__"]
            print(f"  {name:<15} {median:8.1f} ns  {ratio:6.2f}x __dlpack__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
