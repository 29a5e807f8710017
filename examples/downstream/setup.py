"""Builds dlinterop_downstream._kernels against the installed dlinterop, as one abi3 wheel:
the module calls dlinterop only through its stable ABI (dlinterop/abi.pxd), and Python only
through the Limited API of 3.10, so the same wheel runs on CPython 3.10 and every newer one,
with any dlinterop of the same ABI major version."""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

import dlinterop

# The oldest Python the wheel runs on (Py_LIMITED_API's value, and the wheel's tag).
LIMITED_API = (3, 10)

extension = Extension(
    "dlinterop_downstream._kernels",
    ["src/dlinterop_downstream/_kernels.pyx"],
    # dlpack/dlpack.h and dlinterop/abi.h.
    include_dirs=[dlinterop.get_include()],
    define_macros=[("Py_LIMITED_API", f"0x{LIMITED_API[0]:02X}{LIMITED_API[1]:02X}0000")],
    py_limited_api=True,
)

setup(
    ext_modules=cythonize(
        [extension],
        # Where Cython finds dlinterop/*.pxd: the parent of each folder dlinterop is served
        # from (site-packages for a normal install, the checkout for an editable one).
        include_path=[os.path.dirname(path) for path in dlinterop.__path__],
        compiler_directives={"language_level": 3},
        build_dir="build",  # keep the generated .c out of the source tree
    ),
    options={"bdist_wheel": {"py_limited_api": f"cp{LIMITED_API[0]}{LIMITED_API[1]}"}},
)
