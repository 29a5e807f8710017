"""The libraries the side-by-side runner times: dlinterop and each installed peer imported,
the inputs the rows' statements name, and the compiled kernels of benchmarks/kernels.py."""

import os
import subprocess
import sys

from benchmarks.rows.table import BIG, SMALL
from benchmarks.rows.table import PEERS as COLUMN_PEERS
from benchmarks.rows.tensor import TOLIST_NUMPY_DTYPES, TOLIST_OTHER_DTYPES


def load_libraries(wanted):
    """Import dlinterop, NumPy and each wanted peer that is installed; return name -> version."""
    versions = {}
    namespace = {}
    import numpy as np

    import dlinterop as dl

    namespace.update(dl=dl, np=np)
    versions["dlinterop"] = dl.__version__
    versions["numpy"] = np.__version__
    if "torch" in wanted:
        try:
            import torch
            import torch.utils.dlpack
        except ImportError:
            pass
        else:
            namespace["torch"] = torch
            versions["torch"] = torch.__version__
    if "jax" in wanted:
        # CPU work only: keep JAX from probing for accelerators (and warning about them).
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        try:
            import jax
            import jax.numpy as jnp
        except ImportError:
            pass
        else:
            namespace.update(jax=jax, jnp=jnp)
            versions["jax"] = jax.__version__
    if "tvm_ffi" in wanted:
        try:
            import tvm_ffi
        except ImportError:
            pass
        else:
            namespace["tvm_ffi"] = tvm_ffi
            versions["tvm_ffi"] = getattr(tvm_ffi, "__version__", "?")
    from dlinterop._cli.bench import FRAMEWORKS, framework_namespace

    for name in FRAMEWORKS:
        if name in wanted and name not in COLUMN_PEERS:
            made = framework_namespace(name)
            if made is None:
                continue
            peer_ns, versions[name] = made
            # its array under a name of its own; the modules its import names as they are
            namespace[f"fw_{name}"] = peer_ns.pop("obj")
            namespace.update(
                (key, value) for key, value in peer_ns.items() if not key.startswith("__")
            )
    return namespace, versions


def framework_imports(ns):
    """name -> the framework's own import statement, for the frameworks loaded into ns."""
    from dlinterop._cli.bench import FRAMEWORKS

    return {name: own for name, (_, own) in FRAMEWORKS.items() if f"fw_{name}" in ns}


def build_inputs(ns):
    """Every tensor the statements name. Each library allocates its own where it can."""
    dl, np = ns["dl"], ns["np"]
    f32 = np.float32

    def numpy_layouts(prefix, make):
        ns[prefix] = make((SMALL,))
        ns[prefix + "_strided"] = make((8, 32))[:, ::2]  # (8, 16), every other column
        ns[prefix + "_transposed"] = make((16, 8)).T  # (8, 16), Fortran order
        ns[prefix + "_1"] = make((1,))
        ns[prefix + "_64m"] = make((BIG,))

    numpy_layouts("a", lambda shape: np.zeros(shape, f32))
    ns["t"] = dl.zeros((SMALL,), dl.float32)
    # dlinterop tensors cannot be sliced; strided ones view NumPy memory.
    ns["t_strided"] = dl.from_dlpack(np.zeros((8, 32), f32)[:, ::2])
    ns["t_transposed"] = dl.from_dlpack(np.zeros((16, 8), f32).T)
    ns["t_1"] = dl.zeros((1,), dl.float32)
    ns["t_64m"] = dl.zeros((BIG,), dl.float32)
    # Copies must read real pages, not the shared zero page.
    ns["t_4m"] = dl.full((1024, 1024), 1.0, dl.float32)
    ns["a_4m"] = np.full((1024, 1024), 1.0, f32)
    ns["a_4m_strided"] = np.full((1024, 2048), 1.0, f32)[:, ::2]
    ns["t_4m_strided"] = dl.from_dlpack(ns["a_4m_strided"])

    if "torch" in ns:
        torch = ns["torch"]
        ns["x"] = torch.zeros((SMALL,), dtype=torch.float32)
        ns["x_strided"] = torch.zeros((8, 32), dtype=torch.float32)[:, ::2]
        ns["x_transposed"] = torch.zeros((16, 8), dtype=torch.float32).T
        ns["x_1"] = torch.zeros((1,), dtype=torch.float32)
        ns["x_64m"] = torch.zeros((BIG,), dtype=torch.float32)
        ns["x_4m"] = torch.full((1024, 1024), 1.0, dtype=torch.float32)
        ns["x_4m_strided"] = torch.full((1024, 2048), 1.0, dtype=torch.float32)[:, ::2]
    if "jnp" in ns:
        jnp = ns["jnp"]
        # JAX arrays are always compact: no strided or transposed ones to export.
        ns["j"] = jnp.zeros((SMALL,), jnp.float32)
        ns["j_1"] = jnp.zeros((1,), jnp.float32)
        ns["j_64m"] = jnp.zeros((BIG,), jnp.float32)
        ns["j_4m"] = jnp.full((1024, 1024), 1.0, jnp.float32)
        for value in (ns["j"], ns["j_1"], ns["j_64m"], ns["j_4m"]):
            value.block_until_ready()
    if "tvm_ffi" in ns:
        tvm_ffi = ns["tvm_ffi"]
        # tvm-ffi has no allocator of its own in Python: its tensors view NumPy memory.
        for suffix in ("", "_strided", "_transposed", "_1", "_64m"):
            ns["tv" + suffix] = tvm_ffi.from_dlpack(ns["a" + suffix])


def load_kernels(ns, notes):
    """The compiled kernels of benchmarks/kernels.py, where they build here."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import kernels
    finally:
        sys.path.pop(0)
    for name, build in (
        ("dl_kernels", kernels.build_cython_kernels),
        ("nb_kernels", kernels.build_nanobind_kernels),
    ):
        try:
            module = build()
        except (OSError, subprocess.CalledProcessError) as exc:
            stderr = getattr(exc, "stderr", b"") or b""
            notes.append(f"{name} did not build: {exc} {stderr[-300:]!r}")
            continue
        if module is not None:
            ns[name] = module


def build_tensor_inputs(ns):
    """The inputs of the everyday-Tensor rows (rows.define_tensor_rows): a 16x16 float32
    tensor and array of the same values, a (16, 1, 16) pair, 0-d pairs, the 16x16 values as
    a list, and per dtype a 16x16 tensor (and array, where NumPy has the type) of values
    that dtype holds."""
    dl, np = ns["dl"], ns["np"]
    a2 = np.arange(256, dtype=np.float32).reshape(16, 16)
    ns["a2"], ns["t2"] = a2, dl.asarray(a2).copy()
    ns["m2"] = memoryview(a2)
    ns["a3"] = np.ones((16, 1, 16), np.float32)
    ns["t3"] = dl.ones((16, 1, 16), dtype=dl.float32)
    ns["a0"], ns["t0"] = np.ones((), np.float32), dl.ones((), dtype=dl.float32)
    ns["a0i"], ns["t0i"] = np.ones((), np.int64), dl.ones((), dtype=dl.int64)
    ns["l2"] = a2.tolist()
    ns["al"], ns["tl"] = {}, {}
    for name in TOLIST_NUMPY_DTYPES:
        ns["al"][name] = (np.arange(256) % 2).astype(name).reshape(16, 16)
        ns["tl"][name] = dl.asarray(ns["al"][name]).copy()
    for name in TOLIST_OTHER_DTYPES:
        ns["tl"][name] = dl.zeros((16, 16), dtype=name)
