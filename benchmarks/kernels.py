"""The per-call kernels of the "way out" benchmarks, built here once and cached:

- dlinterop's: examples/downstream's `identity` (Cython: a borrowed view of the input, an
  output from the caller's framework, handed back as the caller's type);
- nanobind's: the same kernel with `nb::ndarray` (built from PyPI's nanobind, where it is
  installed), once returning `nb::numpy` and once `nb::pytorch`.

Both check the same constraints (float32, C-contiguous, CPU) and allocate a new output of
the input's shape. Builds go to a cache folder outside the checkout, keyed by the sources'
and the compiler flags' hash, so a run after the first costs no compile.

This file imports nothing from its own folder, so it runs as a script as well as a module."""
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CYTHON_KERNELS = os.path.join(REPO, "examples", "downstream", "src", "dlinterop_downstream",
                              "_kernels.pyx")

NANOBIND_SOURCE = r"""
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <cstring>

namespace nb = nanobind;
using Input = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;

template <typename Framework>
static nb::ndarray<Framework, float> identity(Input x) {
    size_t shape[64];
    size_t n = 1;
    for (size_t i = 0; i < x.ndim(); ++i) {
        shape[i] = x.shape(i);
        n *= shape[i];
    }
    float *data = new float[n ? n : 1];
    nb::capsule owner(data, [](void *p) noexcept { delete[] static_cast<float *>(p); });
    return nb::ndarray<Framework, float>(data, x.ndim(), shape, owner);
}

NB_MODULE(nb_kernels, m) {
    m.def("identity", &identity<nb::numpy>);
    m.def("identity_torch", &identity<nb::pytorch>);
}
"""

EXT = sysconfig.get_config_var("EXT_SUFFIX")


def cache_dir():
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(tempfile.gettempdir())
    path = os.path.join(root, "dlinterop-bench-kernels")
    os.makedirs(path, exist_ok=True)
    return path


def _key(*parts):
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compiler_base():
    """LDSHARED and CFLAGS as CPython was built with, minus the debug-only ones."""
    flags = []
    for name in ("LDSHARED", "CCSHARED"):
        flags += (sysconfig.get_config_var(name) or "").split()
    return flags


def build_cython_kernels():
    """examples/downstream's kernels against the installed dlinterop, at -O2."""
    import dlinterop as dl

    with open(CYTHON_KERNELS, "rb") as f:
        source = f.read()
    include_roots = [os.path.dirname(path) for path in dl.__path__]
    pxds = b"".join(open(os.path.join(p, "dlinterop", n), "rb").read()
                    for p in include_roots for n in ("_core.pxd", "frameworks.pxd", "tensor.pxd")
                    if os.path.isfile(os.path.join(p, "dlinterop", n)))
    key = _key(source, pxds, EXT, sys.version, dl.__version__)
    directory = os.path.join(cache_dir(), f"cython-{key}")
    target = os.path.join(directory, "dl_kernels" + EXT)
    if not os.path.isfile(target):
        os.makedirs(directory, exist_ok=True)
        pyx = os.path.join(directory, "dl_kernels.pyx")
        c_file = os.path.join(directory, "dl_kernels.c")
        shutil.copyfile(CYTHON_KERNELS, pyx)
        command = [sys.executable, "-m", "cython", "-3"]
        for root in include_roots:
            command += ["-I", root]
        subprocess.run(command + [pyx, "-o", c_file], check=True, capture_output=True)
        subprocess.run(_compiler_base() + [
            "-O2", "-I", sysconfig.get_paths()["include"], "-I", dl.get_include(),
            c_file, "-o", target + ".tmp"], check=True, capture_output=True)
        os.replace(target + ".tmp", target)
    return _load("dl_kernels", target)


def build_nanobind_kernels():
    """The same kernel with nanobind's nb::ndarray; None when nanobind is not installed."""
    try:
        import nanobind
    except ImportError:
        return None
    include = nanobind.include_dir()
    robin_map = os.path.join(os.path.dirname(include), "ext", "robin_map", "include")
    combined = os.path.join(nanobind.source_dir(), "nb_combined.cpp")
    flags = ["-O2", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-DNDEBUG",
             "-DNB_COMPACT_ASSERTIONS", "-I", sysconfig.get_paths()["include"],
             "-I", include, "-I", robin_map]
    key = _key(NANOBIND_SOURCE, " ".join(flags), getattr(nanobind, "__version__", "?"), EXT,
               sys.version)
    directory = os.path.join(cache_dir(), f"nanobind-{key}")
    target = os.path.join(directory, "nb_kernels" + EXT)
    if not os.path.isfile(target):
        compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
        if compiler is None:
            return None
        os.makedirs(directory, exist_ok=True)
        source = os.path.join(directory, "nb_kernels.cpp")
        with open(source, "w") as f:
            f.write(NANOBIND_SOURCE)
        objects = []
        for name, path in (("nb_combined", combined), ("nb_kernels", source)):
            obj = os.path.join(directory, name + ".o")
            subprocess.run([compiler, *flags, "-c", path, "-o", obj], check=True,
                           capture_output=True)
            objects.append(obj)
        subprocess.run([compiler, "-shared", *objects, "-o", target + ".tmp"], check=True,
                       capture_output=True)
        os.replace(target + ".tmp", target)
    return _load("nb_kernels", target)


if __name__ == "__main__":
    print(build_cython_kernels().__file__)
    nb = build_nanobind_kernels()
    print(nb.__file__ if nb else "nanobind not installed")
