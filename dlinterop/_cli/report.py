"""The main job, `python -m dlinterop`: print what was built, then exchange a tensor with
each installed framework in both directions (MLX: its export only, since it copies what it
imports), prove zero-copy by pointer equality, and time each exchange."""

import importlib
import importlib.util
import time

import dlinterop as dl


def _ns_per_call(fn, budget_s=0.05):
    """Median of 5 runs of a loop sized to take about budget_s / 5 each."""
    n = 1
    while True:
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter_ns() - start
        if elapsed > budget_s * 1e9 / 5 or n >= 1 << 20:
            break
        n *= 4
    runs = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter_ns() - start) / n)
    return sorted(runs)[2]


# The peers are optional: imported by name, so that type checkers of an installation
# without them (mypy.stubtest over dlinterop) do not look for them.


def _numpy_cases():
    np = importlib.import_module("numpy")

    t = dl.full((64, 64), 1.5, "float32")
    a = np.full((64, 64), 2.5, np.float32)
    return [
        (
            "numpy",
            "dlinterop -> numpy",
            lambda: np.from_dlpack(t),
            t.data_ptr,
            lambda out: out.ctypes.data,
        ),
        (
            "numpy",
            "numpy -> dlinterop",
            lambda: dl.from_dlpack(a),
            a.ctypes.data,
            lambda out: out.data_ptr,
        ),
    ]


def _torch_cases():
    torch = importlib.import_module("torch")

    t = dl.full((64, 64), 1.5, "float32")
    x = torch.full((64, 64), 2.5)
    return [
        (
            "torch",
            "dlinterop -> torch",
            lambda: torch.from_dlpack(t),
            t.data_ptr,
            lambda out: out.data_ptr(),
        ),
        (
            "torch",
            "torch -> dlinterop",
            lambda: dl.from_dlpack(x),
            x.data_ptr(),
            lambda out: out.data_ptr,
        ),
    ]


def _jax_cases():
    jax = importlib.import_module("jax")
    jnp = importlib.import_module("jax.numpy")

    t = dl.full((64, 64), 1.5, "float32")
    x = jnp.full((64, 64), 2.5, dtype=jnp.float32)
    ptr = x.unsafe_buffer_pointer()
    return [
        (
            "jax",
            "dlinterop -> jax",
            lambda: jax.dlpack.from_dlpack(t),
            t.data_ptr,
            lambda out: out.unsafe_buffer_pointer(),
        ),
        ("jax", "jax -> dlinterop", lambda: dl.from_dlpack(x), ptr, lambda out: out.data_ptr),
    ]


def _pyarrow_cases():
    pa = importlib.import_module("pyarrow")

    t = dl.full((4096,), 1.5, "float32")
    arr = pa.array(importlib.import_module("numpy").full(4096, 2.5, "float32"))
    return [
        (
            "pyarrow",
            "dlinterop -> pyarrow",
            lambda: pa.Array.from_dlpack(t),
            t.data_ptr,
            lambda out: out.buffers()[1].address,
        ),
        (
            "pyarrow",
            "pyarrow -> dlinterop",
            lambda: dl.from_dlpack(arr),
            arr.buffers()[1].address,
            lambda out: out.data_ptr,
        ),
    ]


def _cuda_core_cases():
    view_type = importlib.import_module("cuda.core.utils").StridedMemoryView

    t = dl.full((64, 64), 1.5, "float32")
    view = view_type.from_dlpack(dl.full((64, 64), 2.5, "float32"), stream_ptr=-1)
    return [
        (
            "cuda.core",
            "dlinterop -> cuda.core",
            lambda: view_type.from_dlpack(t, stream_ptr=-1),
            t.data_ptr,
            lambda out: out.ptr,
        ),
        (
            "cuda.core",
            "cuda.core -> dlinterop",
            lambda: dl.from_dlpack(view),
            view.ptr,
            lambda out: out.data_ptr,
        ),
    ]


def _mlx_cases():
    # MLX copies whatever it imports on the CPU: only its export is zero-copy.
    mx = importlib.import_module("mlx.core")

    x = mx.full((64, 64), 2.5, dtype=mx.float32)
    mx.eval(x)
    ptr = dl.from_dlpack(x).data_ptr
    return [("mlx", "mlx -> dlinterop", lambda: dl.from_dlpack(x), ptr, lambda out: out.data_ptr)]


def _warp_cases():
    wp = importlib.import_module("warp")
    wp.config.log_level = wp.LOG_WARNING
    wp.init()

    t = dl.full((64, 64), 1.5, "float32")
    x = wp.full((64, 64), 2.5, dtype=wp.float32, device="cpu")
    return [
        ("warp", "dlinterop -> warp", lambda: wp.from_dlpack(t), t.data_ptr, lambda out: out.ptr),
        ("warp", "warp -> dlinterop", lambda: dl.from_dlpack(x), x.ptr, lambda out: out.data_ptr),
    ]


FRAMEWORKS = {
    "numpy": _numpy_cases,
    "torch": _torch_cases,
    "jax": _jax_cases,
    "pyarrow": _pyarrow_cases,
    "cuda.core": _cuda_core_cases,
    "mlx": _mlx_cases,
    "warp": _warp_cases,
}


def round_trips():
    """Rows of (framework, direction, zero_copy, ns_per_call or None, note)."""
    rows = []
    for name, cases in FRAMEWORKS.items():
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # cuda.core's parent package is missing
            found = False
        if not found:
            continue
        try:
            built = cases()
        except Exception as exc:  # a broken peer install is reported, not fatal
            rows.append((name, "setup", False, None, f"{type(exc).__name__}: {exc}"))
            continue
        for framework, direction, call, source_ptr, result_ptr in built:
            try:
                zero_copy = result_ptr(call()) == source_ptr
                rows.append((framework, direction, zero_copy, _ns_per_call(call), ""))
            except Exception as exc:
                rows.append((framework, direction, False, None, f"{type(exc).__name__}: {exc}"))
    return rows


def main():
    info = dl.build_info()
    print("dlinterop build")
    for key, value in info.items():
        if key != "frameworks":
            print(f"  {key:22s} {value}")
    frameworks = ", ".join(f"{k} {v}" for k, v in info["frameworks"].items()) or "none"
    print(f"  {'frameworks':22s} {frameworks}")
    print()
    rows = round_trips()
    if not rows:
        print("No framework installed to exchange with (pip install numpy, torch or jax).")
        return 0
    print(f"{'framework':10s} {'direction':22s} {'zero-copy':10s} {'ns/call':>9s}")
    failed = False
    for framework, direction, zero_copy, ns, note in rows:
        shown = f"{ns:9.0f}" if ns is not None else "        -"
        print(f"{framework:10s} {direction:22s} {'yes' if zero_copy else 'NO':10s} {shown} {note}")
        failed |= not zero_copy
    return 1 if failed else 0
