"""tests/support/c_pointer_keeper.c, compiled once per session into a plain shared
library (no Python headers) that the sanitizer tests load with ctypes."""

import os
import shlex
import shutil
import subprocess
import sysconfig

import pytest

import dlinterop as dl

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")


@pytest.fixture(scope="session")
def pointer_keeper(tmp_path_factory):
    """The path of the compiled C consumer."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    target = tmp_path_factory.mktemp("c_pointer_keeper") / "c_pointer_keeper.so"
    cmd = [
        *cc,
        "-shared",
        "-fPIC",
        "-O1",
        "-Wall",
        "-I",
        dl.get_include(),
        os.path.join(SUPPORT, "c_pointer_keeper.c"),
        "-o",
        str(target),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return str(target)
