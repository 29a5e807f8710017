# The same-build tier's check (docs/cython.md, "The same-build tier"). Cimported by
# dlinterop/tensor.pxd and dlinterop/frameworks.pxd: every module built on them imports, when
# it loads, the type below from dlinterop._core, under a name that carries the version of
# dlinterop it was built against. Only that release's _core answers to the name
# (dlinterop/core/same_build.pxi); any other raises an ImportError naming both versions, so
# that a module that compiled in one release's object layouts never reads another's.
# The name follows dlinterop/__init__.py's __version__ (.ci/check_version.py checks).
cdef extern from *:
    ctypedef class dlinterop._core.SameBuild_0_2_0 [object PyObject, check_size ignore]:
        pass
