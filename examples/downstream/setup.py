"""Builds dlinterop_downstream._kernels against the dlinterop in the build environment.

On a CPython with a GIL: one abi3 wheel (cp310-abi3). The module calls dlinterop only
through its stable ABI (dlinterop/abi.pxd), and Python only through the Limited API of 3.10,
so the same wheel runs on CPython 3.10 and every newer one, with any dlinterop whose C ABI
table has this major version. Free-threaded CPython (3.13t) has no Limited API: there the
same source builds a wheel for that one interpreter (cp313-cp313t)."""

import os
import sysconfig

from Cython.Build import cythonize
from setuptools import Extension, setup

import dlinterop

# The oldest Python the abi3 wheel runs on (Py_LIMITED_API's value, and the wheel's tag).
LIMITED_API = (3, 10)
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

# Table 1.0 is the target (the default); dot() also calls a table 1.1 entry where the
# installed dlinterop has it (DLINTEROP_ALLOW_NEWER_ENTRIES, docs/cython.md).
DEFINES = [("DLINTEROP_ALLOW_NEWER_ENTRIES", None)]
if not FREE_THREADED:
    DEFINES.append(("Py_LIMITED_API", f"0x{LIMITED_API[0]:02X}{LIMITED_API[1]:02X}0000"))

extension = Extension(
    "dlinterop_downstream._kernels",
    ["src/dlinterop_downstream/_kernels.pyx"],
    # dlpack/dlpack.h and dlinterop/abi.h.
    include_dirs=[dlinterop.get_include()],
    define_macros=DEFINES,
    py_limited_api=not FREE_THREADED,
)

setup(
    ext_modules=cythonize(
        [extension],
        # Where Cython finds dlinterop/*.pxd: the parent of each folder dlinterop is served
        # from (site-packages for a normal install, the checkout for an editable one).
        include_path=[os.path.dirname(path) for path in dlinterop.__path__],
        compiler_directives={"language_level": 3, "freethreading_compatible": True},
        build_dir="build",  # keep the generated .c out of the source tree
    ),
    options={}
    if FREE_THREADED
    else {"bdist_wheel": {"py_limited_api": f"cp{LIMITED_API[0]}{LIMITED_API[1]}"}},
)
