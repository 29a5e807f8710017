"""Compiling a test's C file (tests/support/*.c) into a shared library with the C compiler
Python was built with, against dlinterop's headers (and Python's, for an extension module);
shared by the exchange API's C consumer and the sanitizer's pointer keeper. Skips the
calling test when there is no C compiler."""

import os
import shlex
import shutil
import subprocess
import sysconfig

import pytest

import dlinterop as dl

SUPPORT = os.path.dirname(os.path.abspath(__file__))


def compile_c(source, target, python_headers=False):
    """Compiles tests/support/`source` into the shared library `target`; returns its path."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    includes = ["-I", dl.get_include()]
    if python_headers:
        includes += ["-I", sysconfig.get_paths()["include"]]
    cmd = [
        *cc,
        "-shared",
        "-fPIC",
        "-O1",
        "-Wall",
        *includes,
        os.path.join(SUPPORT, source),
        "-o",
        str(target),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return str(target)
