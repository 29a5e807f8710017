"""The per-call kernels of the "way out" benchmarks, built here once and cached:

- dlinterop's: examples/downstream's `identity` (Cython: a borrowed view of the input, an
  output from the caller's framework, handed back as the caller's type);
- nanobind's: the same kernel with `nb::ndarray` (built from PyPI's nanobind, where it is
  installed), once returning `nb::numpy` and once `nb::pytorch`; beside them `ramp`, an
  object of a class bound with nanobind that has `__dlpack__`, which the tests import to
  prove that dlinterop's per-type caches let such a type die (nanobind reports leaked
  types at exit).

Both check the same constraints (float32, C-contiguous, CPU) and allocate a new output of
the input's shape. Builds go to a cache folder outside the checkout, keyed by the sources'
and the compiler flags' hash, so a run after the first costs no compile.

This file imports nothing from its own folder, so it runs as a script as well as a module."""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

# Builds keyed by their inputs' hash, and an extension module loaded once per process, as
# for the checker's nanobind peer.
from dlinterop.testing._nanobind import _key
from dlinterop.testing._nanobind import load as _load

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CYTHON_KERNELS = os.path.join(
    REPO, "examples", "downstream", "src", "dlinterop_downstream", "_kernels.pyx"
)

NANOBIND_SOURCE = r"""
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <cstring>
#include <vector>

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

// A class bound with nanobind that produces DLPack tensors, as nanobind users write one.
struct Ramp {
    std::vector<float> values;
};

NB_MODULE(nb_kernels, m) {
    m.def("identity", &identity<nb::numpy>);
    m.def("identity_torch", &identity<nb::pytorch>);
    nb::class_<Ramp>(m, "Ramp")
        .def("__dlpack__", [](nb::handle self, nb::kwargs kwargs) {
            Ramp &ramp = nb::cast<Ramp &>(self);
            size_t shape[1] = {ramp.values.size()};
            nb::ndarray<nb::array_api, float> array(ramp.values.data(), 1, shape, self);
            return nb::cast(array).attr("__dlpack__")(**kwargs);
        })
        .def("__dlpack_device__", [](nb::handle) { return nb::make_tuple(1, 0); });
    m.def("ramp", [](size_t n) {
        Ramp ramp;
        for (size_t i = 0; i < n; ++i) ramp.values.push_back((float)i);
        return ramp;
    });
}
"""

EXT = sysconfig.get_config_var("EXT_SUFFIX")


def cache_dir():
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(tempfile.gettempdir())
    path = os.path.join(root, "dlinterop-bench-kernels")
    os.makedirs(path, exist_ok=True)
    return path


def _compiler_base():
    """LDSHARED and CFLAGS as CPython was built with, minus the debug-only ones."""
    flags = []
    for name in ("LDSHARED", "CCSHARED"):
        flags += (sysconfig.get_config_var(name) or "").split()
    return flags


def build_cython_kernels():
    """examples/downstream's kernels against the installed dlinterop, at -O2, with the full
    C API of this Python, as nanobind's kernels are built (the example's own wheel is an
    abi3 build: the Limited API costs Cython's code some tens of ns per call, whichever
    library it calls)."""
    import dlinterop as dl

    with open(CYTHON_KERNELS, "rb") as f:
        source = f.read()
    include_roots = [os.path.dirname(path) for path in dl.__path__]
    pxds = b"".join(
        open(os.path.join(p, "dlinterop", n), "rb").read()
        for p in include_roots
        for n in ("_core.pxd", "frameworks.pxd", "tensor.pxd", "abi.pxd")
        if os.path.isfile(os.path.join(p, "dlinterop", n))
    )
    abi_header = os.path.join(dl.get_include(), "dlinterop", "abi.h")
    if os.path.isfile(abi_header):
        pxds += open(abi_header, "rb").read()
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
        subprocess.run(
            _compiler_base()
            + [
                "-O2",
                # As the example's setup.py: entries newer than its target table are
                # declared, and asked for only where abi_minor() says they are there.
                "-DDLINTEROP_ALLOW_NEWER_ENTRIES",
                "-I",
                sysconfig.get_paths()["include"],
                "-I",
                dl.get_include(),
                c_file,
                "-o",
                target + ".tmp",
            ],
            check=True,
            capture_output=True,
        )
        os.replace(target + ".tmp", target)
    return _load("dl_kernels", target)


def build_nanobind_kernels():
    """The same kernel with nanobind's nb::ndarray; None when nanobind is not installed."""
    path = build_nanobind_extension()
    return None if path is None else _load("nb_kernels", path)


def build_nanobind_extension(abort_on_leak=False):
    """The path of the nanobind kernels' extension module, built if need be (by the
    checker's nanobind builder, dlinterop.testing._nanobind); None when nanobind or a C++
    compiler is missing. With `abort_on_leak`, built as nanobind's own tests are
    (NB_ABORT_ON_LEAK): a process that imported it aborts at exit when a nanobind type or
    instance is still alive, so load that one only in a child process."""
    from dlinterop.testing._nanobind import build_extension

    return build_extension("nb_kernels", NANOBIND_SOURCE, abort_on_leak)


if __name__ == "__main__":
    print(build_cython_kernels().__file__)
    nb = build_nanobind_kernels()
    print(nb.__file__ if nb else "nanobind not installed")
