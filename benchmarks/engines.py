"""Dask and Ray with dlinterop tensors, beside NumPy arrays in the same run: 256 MiB of
float32 through a local Ray (ray.get of a put object; four tasks reading one reference)
and a local Dask cluster (scatter to a worker, a task that reads it and returns it, gather
the result), each as a dl.Tensor and as a NumPy array.

    python benchmarks/engines.py            # both engines, 256 MiB, medians of 7
    python benchmarks/engines.py --mib 64 --repeats 5 --only ray

Each figure is the median in ms of `--repeats` measures after one warm-up; the ratio is
dlinterop's median over NumPy's. The engines are optional: one that is not installed is
said so and skipped. This file imports nothing from its own folder and defines the tasks
here, so that the engines' workers can import it by name or receive it by value.
"""
import argparse
import statistics
import sys
import time

MIB = 1 << 20


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


def _median_ms(function, repeats):
    function()   # warm-up: the workers import what the task needs
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def ray_rows(mib, repeats):
    import cloudpickle
    import ray
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=max(4 * mib * MIB, 512 * MIB), configure_logging=False)
    try:
        read = ray.remote(first_value)
        rows = {}
        for kind in ("dlinterop", "numpy"):
            ref = ray.put(make(kind, mib))
            rows.setdefault(f"ray.get of a put {mib} MiB object", {})[kind] = _median_ms(
                lambda: ray.get(ref), repeats)
            rows.setdefault("four tasks reading one reference", {})[kind] = _median_ms(
                lambda: ray.get([read.remote(ref) for _ in range(4)]), repeats)
            del ref
        return rows
    finally:
        ray.shutdown()


def dask_rows(mib, repeats):
    import cloudpickle
    import dask
    import distributed
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rows = {}
    with dask.config.set({"distributed.admin.low-level-log-length": 0}), \
            distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                     dashboard_address=None, memory_limit=0) as cluster, \
            distributed.Client(cluster) as client:
        for kind in ("dlinterop", "numpy"):
            x = make(kind, mib)

            def round_trip():
                future = client.scatter(x, direct=True)
                result = client.submit(same, future, pure=False)
                back = result.result()
                del future, result, back

            rows.setdefault(f"scatter + task + gather, {mib} MiB", {})[kind] = _median_ms(
                round_trip, repeats)
            del x
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", choices=("ray", "dask"))
    args = parser.parse_args(argv)
    engines = {"ray": ray_rows, "dask": dask_rows}
    print(f"{'':44} {'dlinterop':>10} {'numpy':>10} {'ratio':>7}   (ms, median of "
          f"{args.repeats})")
    for name, rows_of in engines.items():
        if args.only not in (None, name):
            continue
        try:
            __import__("distributed" if name == "dask" else name)
        except ImportError:
            print(f"{name}: not installed, skipped")
            continue
        for row, values in rows_of(args.mib, args.repeats).items():
            ratio = values["dlinterop"] / values["numpy"]
            print(f"{name + ': ' + row:44} {values['dlinterop']:10.2f} {values['numpy']:10.2f} "
                  f"{ratio:6.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
