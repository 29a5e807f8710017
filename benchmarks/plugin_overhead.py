"""The pytest plugin's cost per exchange (dlinterop.pytest_plugin, docs/finding-bugs.md):
np.from_dlpack of a small NumPy array and torch.from_dlpack of a small tensor, plain, through
the plugin's checking wrapper, and relayed through dlinterop, each the median of interleaved
timeit repeats, with its ratio to the plain call of the same run.

    python benchmarks/plugin_overhead.py [--repeats N]"""

import argparse
import statistics
import sys
import timeit


def cases():
    import numpy as np

    yield "np.from_dlpack(a), a = np.arange(8.0)", np, "from_dlpack", np.arange(8.0)
    try:
        import torch
    except ImportError:
        return
    yield "torch.from_dlpack(t), t = torch.arange(8.0)", torch, "from_dlpack", torch.arange(8.0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    args = parser.parse_args(argv)
    from dlinterop.testing._plugin_checker import Checker

    checked, relayed = Checker(False, "report", []), Checker(True, "report", [])
    for title, module, attribute, x in cases():
        plain = getattr(module, attribute)
        variants = {
            "plain": plain,
            "checked": checked.wrap(plain, title),
            "relayed": relayed.wrap(plain, title),
        }
        samples = {name: [] for name in variants}
        for repeat in range(args.repeats):
            order = list(variants)[repeat % 3 :] + list(variants)[: repeat % 3]
            for name in order:
                consumer = variants[name]
                seconds = timeit.timeit(lambda c=consumer, x=x: c(x), number=args.number)
                samples[name].append(seconds / args.number * 1e6)
        medians = {name: statistics.median(values) for name, values in samples.items()}
        print(title)
        for name, median in medians.items():
            print(f"  {name:<8} {median:8.2f} us  {median / medians['plain']:6.2f}x plain")
        if checked.pending or relayed.pending:
            print(f"  violations: {[v.rule for v in checked.pending + relayed.pending][:5]}")
            checked.pending.clear()
            relayed.pending.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
