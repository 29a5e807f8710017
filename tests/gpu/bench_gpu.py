"""GPU benchmarks for tests/gpu/run.sh: ns per exchange beside CuPy's own, and copy
bandwidth from pinned memory beside a plain cudaMemcpy (through CuPy's runtime binding).
Medians of interleaved repeats; ratios are what to read."""

import statistics
import time

import dlinterop as dl


def ns_per_call(fn, n=2000, repeats=7):
    runs = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter_ns() - start) / n)
    return statistics.median(runs)


def main():
    import cupy

    t = dl.zeros((1024,), device="cuda")
    a = cupy.zeros((1024,), dtype=cupy.float32)
    rows = [
        (
            "export t.__dlpack__(stream=-1) vs cupy a.__dlpack__(stream=-1)",
            lambda: t.__dlpack__(stream=-1, max_version=(1, 3)),
            lambda: a.__dlpack__(stream=-1, max_version=(1, 3)),
        ),
        (
            "cupy.from_dlpack(t) vs cupy.from_dlpack(a)",
            lambda: cupy.from_dlpack(t),
            lambda: cupy.from_dlpack(a),
        ),
        (
            "dl.from_dlpack(a) vs cupy.from_dlpack(a)",
            lambda: dl.from_dlpack(a),
            lambda: cupy.from_dlpack(a),
        ),
    ]
    print(f"{'exchange':64s} {'dlinterop':>10s} {'cupy':>10s} {'ratio':>6s}")
    for name, ours, theirs in rows:
        o, c = ns_per_call(ours), ns_per_call(theirs)
        print(f"{name:64s} {o:10.0f} {c:10.0f} {o / c:6.2f}")

    nbytes = 512 << 20
    pinned = dl.empty((nbytes,), "uint8", device="cuda_host")
    device = dl.empty((nbytes,), "uint8", device="cuda")
    runtime = cupy.cuda.runtime

    def gbps(fn):
        fn()
        dl.cuda.synchronize()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            dl.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return nbytes / statistics.median(times) / 1e9

    h2d = gbps(lambda: pinned.to("cuda"))
    d2h = gbps(lambda: device.to("cuda_host"))
    raw_h2d = gbps(
        lambda: runtime.memcpy(device.data_ptr, pinned.data_ptr, nbytes, runtime.memcpyHostToDevice)
    )
    raw_d2h = gbps(
        lambda: runtime.memcpy(pinned.data_ptr, device.data_ptr, nbytes, runtime.memcpyDeviceToHost)
    )
    print(f"H2D from pinned: dlinterop {h2d:.1f} GB/s, cudaMemcpy {raw_h2d:.1f} GB/s")
    print(f"D2H to pinned:   dlinterop {d2h:.1f} GB/s, cudaMemcpy {raw_d2h:.1f} GB/s")


if __name__ == "__main__":
    main()
