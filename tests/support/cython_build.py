"""Building a Cython extension against the installed dlinterop, as a downstream package
does: shared by the Cython API tests (tests/extensions/test_cython_api.py) and the way-out
tests, which build the example downstream kernels (tests/interop/test_frameworks.py)."""

import importlib.util
import os
import subprocess
import sys
import sysconfig
import textwrap
import warnings

import dlinterop as dl


def pxd_root():
    """The folder holding the dlinterop package's .pxd files (the checkout for an editable
    install, site-packages for a normal one)."""
    for path in dl.__path__:
        if os.path.isfile(os.path.join(path, "tensor.pxd")):
            return os.path.dirname(os.path.abspath(path))
    raise RuntimeError(f"no dlinterop/tensor.pxd under {list(dl.__path__)}")


def build_extension(source, name, directory, include_root=None, defines=()):
    """Cythonizes and compiles one .pyx into `directory` (with `defines`, "NAME=VALUE"
    strings for the C compiler); returns the extension's path."""
    pyx = os.path.join(directory, name + ".pyx")
    c_file = os.path.join(directory, name + ".c")
    with open(pyx, "w") as f:
        f.write(textwrap.dedent(source))
    subprocess.run(
        [sys.executable, "-m", "cython", "-3", "-I", include_root or pxd_root(), pyx, "-o", c_file],
        check=True,
        capture_output=True,
        text=True,
    )
    out = os.path.join(directory, name + sysconfig.get_config_var("EXT_SUFFIX"))
    flags = [sysconfig.get_config_var(v) or "" for v in ("LDSHARED", "CFLAGS", "CCSHARED")]
    # -O0: Cython's memoryview support is 30k lines of C that take gcc 9 s at -O3 and 2 s
    # at -O0; these tests check behaviour, not speed.
    subprocess.run(
        " ".join(flags).split()
        + [
            "-O0",
            "-g0",
            "-I",
            sysconfig.get_paths()["include"],
            "-I",
            dl.get_include(),
            *[f"-D{define}" for define in defines],
            c_file,
            "-o",
            out,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


def import_strictly(name, path):
    """Imports an extension with RuntimeWarning as an error: Cython reports a cimported
    class whose size changed only with a warning."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        spec.loader.exec_module(module)
    return module
