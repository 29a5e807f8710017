"""nanobind as a DLPack peer: a small extension module built on first use (with the C++
compiler and PyPI's nanobind) and cached, whose functions are nanobind's ``nb::ndarray``
import and export as an extension written with nanobind makes them.

- ``from_dlpack(obj)``: ``obj`` taken as ``nb::ndarray<nb::ro>`` (any dtype, layout and
  device, read-only allowed) and kept in a bound object (nanobind hands an imported array
  back as the object it came from, so only a holder keeps the import itself alive), whose
  ``__dlpack__`` exports it again through nanobind's ndarray object, read-only;
- ``copy(obj)``: the same import, copied into memory the module owns (a C-contiguous
  ndarray whose owner is a capsule, as a kernel returns its results).

``build_extension`` is the builder, shared with the benchmarks' nanobind kernels
(benchmarks/kernels.py)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

PEER_SOURCE = r"""
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <cstring>
#include <vector>

namespace nb = nanobind;
using Any = nb::ndarray<nb::ro>;
using Out = nb::ndarray<nb::array_api>;
using ReadOnlyOut = nb::ndarray<nb::array_api, nb::ro>;

static std::vector<size_t> shape_of(const Any &x) {
    std::vector<size_t> shape(x.ndim());
    for (size_t i = 0; i < x.ndim(); ++i) shape[i] = x.shape(i);
    return shape;
}

static std::vector<int64_t> strides_of(const Any &x) {
    std::vector<int64_t> strides(x.ndim());
    for (size_t i = 0; i < x.ndim(); ++i) strides[i] = x.stride(i);
    return strides;
}

// What a nanobind extension that keeps an array it was given holds: the import itself (the
// producer's deleter runs when this object dies), exported again through nanobind's ndarray
// object, read-only as it was taken.
struct Held {
    Any array;
};

static nb::object exported(nb::handle self) {
    Any &x = nb::cast<Held &>(self).array;
    auto shape = shape_of(x);
    auto strides = strides_of(x);
    ReadOnlyOut out(x.data(), x.ndim(), shape.data(), self, strides.data(), x.dtype(),
                    x.device_type(), x.device_id());
    return nb::cast(out);
}

// A C-contiguous copy in memory the module owns (CPU only), element by element in the
// input's strides, whatever its dtype's width (sub-byte types are refused).
static Out copy(Any x) {
    if (x.device_type() != nb::device::cpu::value)
        throw nb::type_error("copy: CPU arrays only");
    size_t bits = (size_t) x.dtype().bits * x.dtype().lanes;
    if (bits % 8 != 0) throw nb::type_error("copy: sub-byte dtypes are not copied");
    size_t item = bits / 8, n = x.size(), ndim = x.ndim();
    auto shape = shape_of(x);
    char *out = new char[n * item ? n * item : 1];
    std::vector<size_t> index(ndim, 0);
    const char *base = (const char *) x.data();
    for (size_t k = 0; k < n; ++k) {
        int64_t offset = 0;
        for (size_t i = 0; i < ndim; ++i) offset += (int64_t) index[i] * x.stride(i);
        std::memcpy(out + k * item, base + offset * (int64_t) item, item);
        for (size_t i = ndim; i-- > 0;) {
            if (++index[i] < shape[i]) break;
            index[i] = 0;
        }
    }
    nb::capsule owner(out, [](void *p) noexcept { delete[] static_cast<char *>(p); });
    return Out(out, ndim, shape.data(), owner, nullptr, x.dtype(), x.device_type(),
               x.device_id());
}

NB_MODULE(dli_nanobind_peer, m) {
    nb::class_<Held>(m, "Held")
        .def("__dlpack__", [](nb::handle self, nb::kwargs kwargs) {
            return exported(self).attr("__dlpack__")(**kwargs);
        })
        .def("__dlpack_device__", [](nb::handle self) {
            return exported(self).attr("__dlpack_device__")();
        });
    m.def("from_dlpack", [](Any x) { return Held{x}; });
    m.def("copy", &copy);
}
"""

EXT = sysconfig.get_config_var("EXT_SUFFIX")


def cache_dir() -> str:
    """Where built extensions are kept, keyed by what went into them."""
    root = os.environ.get("XDG_CACHE_HOME") or tempfile.gettempdir()
    path = os.path.join(root, "dlinterop-nanobind")
    os.makedirs(path, exist_ok=True)
    return path


def _key(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def build_extension(name: str, source: str, abort_on_leak: bool = False) -> str | None:
    """The path of extension module `name` built from the C++ `source` with nanobind, built
    if need be (at -O2, as nanobind's own builds); None when nanobind or a C++ compiler is
    missing. With `abort_on_leak`, built as nanobind's own tests are (NB_ABORT_ON_LEAK): a
    process that imported it aborts at exit when a nanobind type or instance is still
    alive, so load that one only in a child process."""
    try:
        nanobind = importlib.import_module("nanobind")  # an optional peer
    except ImportError:
        return None
    include = nanobind.include_dir()
    robin_map = os.path.join(os.path.dirname(include), "ext", "robin_map", "include")
    combined = os.path.join(nanobind.source_dir(), "nb_combined.cpp")
    flags = [
        "-O2",
        "-std=c++17",
        "-fPIC",
        "-fvisibility=hidden",
        "-DNDEBUG",
        "-DNB_COMPACT_ASSERTIONS",
        "-I",
        sysconfig.get_paths()["include"],
        "-I",
        include,
        "-I",
        robin_map,
    ] + (["-DNB_ABORT_ON_LEAK"] if abort_on_leak else [])
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        flags.append("-DNB_FREE_THREADED")
    key = _key(source, " ".join(flags), getattr(nanobind, "__version__", "?"), EXT, sys.version)
    directory = os.path.join(cache_dir(), f"{name}-{key}")
    target = os.path.join(directory, name + EXT)
    if not os.path.isfile(target):
        compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
        if compiler is None:
            return None
        os.makedirs(directory, exist_ok=True)
        cpp = os.path.join(directory, name + ".cpp")
        with open(cpp, "w") as f:
            f.write(source)
        objects = []
        for stem, path in (("nb_combined", combined), (name, cpp)):
            obj = os.path.join(directory, f"{stem}.{os.getpid()}.o")
            subprocess.run(
                [compiler, *flags, "-c", path, "-o", obj], check=True, capture_output=True
            )
            objects.append(obj)
        partial = f"{target}.{os.getpid()}.tmp"
        subprocess.run(
            [compiler, "-shared", *objects, "-o", partial], check=True, capture_output=True
        )
        os.replace(partial, target)  # atomic: a concurrent build of the same key is harmless
        for obj in objects:
            os.remove(obj)
    return target


_loaded: dict = {}


def load(name: str, path: str):
    """The extension module at `path`, loaded once per process (a second load would
    register its nanobind types again)."""
    if path not in _loaded:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path} is no extension module Python can load")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _loaded[path] = module
    return _loaded[path]


def peer():
    """The peer module (see the module's docstring), built if need be; ImportError when
    nanobind or a C++ compiler is missing."""
    path = build_extension("dli_nanobind_peer", PEER_SOURCE)
    if path is None:
        raise ImportError(
            "the nanobind peer needs nanobind (pip install nanobind) and a C++ compiler"
        )
    return load("dli_nanobind_peer", path)
