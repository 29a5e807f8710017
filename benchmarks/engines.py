"""Dask and Ray with dlinterop tensors, beside NumPy arrays in the same run: 256 MiB of
float32 through a local Ray (ray.get of a put object; four tasks reading one reference)
and a local Dask cluster (scatter to a worker, a task that reads it and returns it, gather
the result), each as a dl.Tensor and as a NumPy array.

    python benchmarks/engines.py            # both engines, 256 MiB, 15 repeats
    python benchmarks/engines.py --mib 64 --repeats 5 --only ray

After one warm-up of each, the two kinds are measured in turn, `--repeats` times, each
repeat starting with the other kind, so that both see the same machine. A sample times a
loop of calls long enough to measure (at least 20 ms: one call where a call takes that
long, a few hundred ray.get calls of a put object, which moves no data). Each row gives the
median ms per call of each kind, their ratio (dlinterop's median over NumPy's), and the
lowest and highest of the repeats' paired ratios: where they straddle 1, the two cannot
be told apart on this machine. The engines are optional: one that is not installed is said
so and skipped. This file imports nothing from its own folder and defines the tasks here,
so that the engines' workers can import it by name or receive it by value.
"""

import argparse
import statistics
import sys
import time

MIB = 1 << 20
KINDS = ("dlinterop", "numpy")


def make(kind, mib):
    import numpy as np

    a = np.ones(mib * MIB // 4, dtype=np.float32)
    if kind == "numpy":
        return a
    import dlinterop as dl

    return dl.from_dlpack(a).copy()


def first_value(x):
    """A task's work: read one element (the memory is really mapped) and report it."""
    import numpy as np

    return float(np.from_dlpack(x)[0])


def same(x):
    """A task that reads its argument and returns it (so that it travels back)."""
    first_value(x)
    return x


def _loop_length(function, seconds=0.02):
    """Calls per sample: enough for a sample to last `seconds`."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            function()
        if time.perf_counter() - start >= seconds:
            return number
        number *= 4


def _paired(functions, repeats):
    """{kind: [ms per call, one per repeat]}: the kinds in turn, interleaved, each repeat
    starting with the next kind, after a warm-up of each (the workers import what the
    task needs)."""
    numbers = {kind: _loop_length(function) for kind, function in functions.items()}
    samples = {kind: [] for kind in functions}
    kinds = list(functions)
    for k in range(repeats):
        for kind in kinds[k % len(kinds) :] + kinds[: k % len(kinds)]:
            function, number = functions[kind], numbers[kind]
            start = time.perf_counter()
            for _ in range(number):
                function()
            samples[kind].append((time.perf_counter() - start) / number * 1000)
    return samples


def ray_rows(mib, repeats):
    import cloudpickle
    import ray

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=max(4 * mib * MIB, 512 * MIB),
        configure_logging=False,
    )
    try:
        read = ray.remote(first_value)
        refs = {kind: ray.put(make(kind, mib)) for kind in KINDS}
        return {
            f"ray.get of a put {mib} MiB object": _paired(
                {kind: (lambda ref=ref: ray.get(ref)) for kind, ref in refs.items()}, repeats
            ),
            "four tasks reading one reference": _paired(
                {
                    kind: (lambda ref=ref: ray.get([read.remote(ref) for _ in range(4)]))
                    for kind, ref in refs.items()
                },
                repeats,
            ),
        }
    finally:
        ray.shutdown()


def dask_rows(mib, repeats):
    import cloudpickle
    import dask
    import distributed

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with (
        dask.config.set({"distributed.admin.low-level-log-length": 0}),
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            memory_limit=0,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):

        def round_trip(x):
            future = client.scatter(x, direct=True)
            result = client.submit(same, future, pure=False)
            back = result.result()
            del future, result, back

        data = {kind: make(kind, mib) for kind in KINDS}
        return {
            f"scatter + task + gather, {mib} MiB": _paired(
                {kind: (lambda x=x: round_trip(x)) for kind, x in data.items()}, repeats
            )
        }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only", choices=("ray", "dask"))
    args = parser.parse_args(argv)
    engines = {"ray": ray_rows, "dask": dask_rows}
    print(
        f"{'':44} {'dlinterop':>10} {'numpy':>10} {'ratio':>7} {'paired ratios':>15}   "
        f"(ms per call, median of {args.repeats})"
    )
    for name, rows_of in engines.items():
        if args.only not in (None, name):
            continue
        try:
            __import__("distributed" if name == "dask" else name)
        except ImportError:
            print(f"{name}: not installed, skipped")
            continue
        for row, samples in rows_of(args.mib, args.repeats).items():
            ours, theirs = (statistics.median(samples[kind]) for kind in KINDS)
            paired = [a / b for a, b in zip(samples["dlinterop"], samples["numpy"])]
            print(
                f"{name + ': ' + row:44} {ours:10.3f} {theirs:10.3f} {ours / theirs:6.2f}x "
                f"{min(paired):6.2f}-{max(paired):.2f}x",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
