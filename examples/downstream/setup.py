"""Builds dlinterop_downstream._kernels against the installed dlinterop."""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

import dlinterop

extension = Extension(
    "dlinterop_downstream._kernels",
    ["src/dlinterop_downstream/_kernels.pyx"],
    # dlpack/dlpack.h, which dlinterop's .pxd files declare.
    include_dirs=[dlinterop.get_include()],
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
)
