"""The C consumer of the exchange table, compiled once per session."""

import importlib.util
import os
import shlex
import shutil
import subprocess
import sysconfig

import pytest

import dlinterop as dl
from exchange_api.helpers import SUPPORT


@pytest.fixture(scope="session")
def c_consumer(tmp_path_factory):
    """tests/support/c_exchange_consumer.c, compiled against Python's and dlinterop's headers."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    build = tmp_path_factory.mktemp("c_exchange_consumer")
    target = build / ("c_exchange_consumer" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [
        *cc,
        "-shared",
        "-fPIC",
        "-O1",
        "-Wall",
        "-I",
        sysconfig.get_paths()["include"],
        "-I",
        dl.get_include(),
        os.path.join(SUPPORT, "c_exchange_consumer.c"),
        "-o",
        str(target),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    spec = importlib.util.spec_from_file_location("c_exchange_consumer", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
