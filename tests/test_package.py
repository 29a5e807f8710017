"""Packaging properties: what importing costs and pulls in, the stubs, the main job."""
import importlib.util
import os
import subprocess
import sys

import pytest

import dlinterop as dl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, **kwargs):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, **kwargs)


def test_import_does_not_import_optional_peers():
    out = run_python("import sys, dlinterop, dlinterop.cuda; "
                     "print(sorted(m for m in ('numpy', 'torch', 'jax', 'cupy', 'ml_dtypes') "
                     "if m in sys.modules))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_import_without_cuda_reports_no_device():
    out = run_python("import dlinterop as dl; print(dl.cuda.device_count(), dl.cuda.is_available())",
                     env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "False"]


def test_build_info_names_versions():
    info = dl.build_info()
    assert info["dlpack_abi"] == "1.3"
    assert info["dlinterop"] == dl.__version__
    assert info["cython"].startswith("3.")
    assert isinstance(info["cuda_allocator_built"], bool)
    assert "numpy" in info["frameworks"]


def test_get_include_holds_the_dlpack_header():
    header = os.path.join(dl.get_include(), "dlpack", "dlpack.h")
    with open(header) as f:
        text = f.read()
    assert "#define DLPACK_MAJOR_VERSION 1" in text
    assert "#define DLPACK_MINOR_VERSION 3" in text


def test_main_job_proves_zero_copy_with_numpy():
    out = subprocess.run([sys.executable, "-m", "dlinterop"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("numpy ")]
    assert len(rows) == 2
    for row in rows:
        assert row[4] == "yes"
        assert float(row[5]) > 0


def test_stubs_match_the_runtime(tmp_path):
    pytest.importorskip("mypy")
    # mypy reads the stubs where the package's Python files are: the checkout for an
    # editable install, site-packages otherwise (then run away from the checkout).
    editable = os.path.dirname(os.path.realpath(dl.__file__)) == os.path.join(REPO, "dlinterop")
    allowlist = os.path.join(REPO, "tests", "stubtest-allowlist.txt")
    compiled = [f"dlinterop.{name}" for name in ("_core", "_cuda", "_capi")
                if importlib.util.find_spec(f"dlinterop.{name}") is not None]
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", *compiled,
                          "--allowlist", allowlist, "--ignore-unused-allowlist"], capture_output=True, text=True, timeout=300,
                         cwd=REPO if editable else tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_package_ships_typing_marker_and_pxd_files():
    package = os.path.dirname(dl.__file__)
    names = set(os.listdir(package))
    if "_core.pxd" not in names:  # an editable install serves sources from the checkout
        names |= set(os.listdir(os.path.join(REPO, "dlinterop")))
    assert {"py.typed", "_core.pyi", "dlpack.pxd", "tensor.pxd", "_core.pxd"} <= names
