# Provides: the same-build tier's check (dlinterop/_same_build.pxd): the module __getattr__
# that gives a module built on dlinterop.tensor or dlinterop.frameworks this build's Tensor
# type under the name its build asked for, or an ImportError naming both versions.
# Uses: tensor.pxi (Tensor).

cdef extern from *:
    # The package version, dlinterop/__init__.py's (CMake passes it).
    const char* DLINTEROP_VERSION

cdef str _same_build_prefix = "SameBuild_"
cdef str _same_build_name = _same_build_prefix + DLINTEROP_VERSION.decode().replace(".", "_")


def __getattr__(name):
    """What a module built on the same-build tier imports when it loads: this build's
    Tensor type under the name dlinterop/_same_build.pxd gave it, which carries the version
    the module was built against. That tier compiles the layout of dlinterop's objects in,
    so any other version refuses it here, before it can read a field."""
    if name == _same_build_name:
        return Tensor
    if isinstance(name, str) and name.startswith(_same_build_prefix):
        built = name[len(_same_build_prefix):].replace("_", ".")
        installed = DLINTEROP_VERSION.decode()
        raise ImportError(
            f"this extension was built against dlinterop {built}'s same-build Cython API "
            f"(dlinterop.tensor, dlinterop.frameworks), which compiles in the layout of "
            f"dlinterop's objects and runs only on that release; the installed dlinterop is "
            f"{installed}: rebuild the extension against it, or install dlinterop=={built} "
            f"(an extension built on the stable ABI, dlinterop.abi, runs on every release "
            f"with its ABI major version)")
    raise AttributeError(f"module 'dlinterop._core' has no attribute {name!r}")
