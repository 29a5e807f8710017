"""Packaging properties: what importing costs and pulls in, the stubs, the main job."""

import os
import subprocess
import sys

import pytest

import dlinterop as dl

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code, **kwargs):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kwargs
    )


def test_import_does_not_import_optional_peers():
    out = run_python(
        "import sys, dlinterop, dlinterop.cuda; "
        "print(sorted(m for m in ('numpy', 'torch', 'jax', 'cupy', 'ml_dtypes', "
        "'dask', 'distributed', 'ray') "
        "if m in sys.modules))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_import_without_cuda_reports_no_device():
    out = run_python(
        "import dlinterop as dl; print(dl.cuda.device_count(), dl.cuda.is_available())",
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "False"]


def test_build_info_names_versions():
    import importlib.metadata

    info = dl.build_info()
    assert info["dlpack_abi"] == "1.3"
    assert info["dlinterop"] == dl.__version__
    # The installed metadata's version is read from __version__ at build time.
    assert importlib.metadata.version("dlinterop") == dl.__version__
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
    out = subprocess.run(
        [sys.executable, "-m", "dlinterop"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("numpy ")]
    assert len(rows) == 2
    for row in rows:
        assert row[4] == "yes"
        assert float(row[5]) > 0


def _editable():
    """Whether dlinterop is installed editable (its Python files then are the checkout's)."""
    import importlib.metadata
    import json

    text = importlib.metadata.distribution("dlinterop").read_text("direct_url.json")
    return bool(text) and json.loads(text).get("dir_info", {}).get("editable", False)


def _type_checker_cwd(tmp_path):
    # mypy reads the package where its Python files are: the checkout for an editable
    # install, site-packages otherwise (then run away from the checkout, which would shadow it).
    return REPO if _editable() else tmp_path


@pytest.mark.slow
@pytest.mark.tooling
def test_stubs_match_the_runtime_for_the_whole_package(tmp_path):
    pytest.importorskip("mypy")
    allowlist = os.path.join(REPO, "tests", "support", "stubtest-allowlist.txt")
    if not dl.build_info()["cuda_allocator_built"]:
        # The private _cuda module's stub ships with every wheel; without the allocator the
        # module itself is absent, which is all stubtest may find missing.
        with open(allowlist) as f:
            entries = f.read()
        allowlist = str(tmp_path / "allowlist.txt")
        with open(allowlist, "w") as f:
            f.write(entries + "dlinterop\\._cuda\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "dlinterop",
            "--allowlist",
            allowlist,
            "--ignore-unused-allowlist",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=_type_checker_cwd(tmp_path),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # The whole package, not only the compiled modules: dl.cuda and the main job included.
    assert "dlinterop.cuda" not in out.stdout, out.stdout


def test_user_code_type_checks_strictly(tmp_path):
    pytest.importorskip("mypy")
    script = os.path.join(REPO, "tests", "typing", "user_script.py")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            script,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=_type_checker_cwd(tmp_path),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # And it runs: the script's own calls are real ones.
    ran = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr


def test_tests_import_the_installed_package():
    # A checkout's dlinterop/ must not shadow the installed package (it would borrow the
    # installed compiled modules and hide a broken wheel): the README's test command runs
    # pytest with -P, so only an editable install serves the checkout's files.
    package = os.path.dirname(os.path.realpath(dl.__file__))
    assert not getattr(dl, "_borrowed_compiled_modules", False), dl.__path__
    if _editable():
        assert package == os.path.realpath(os.path.join(REPO, "dlinterop"))
    else:
        assert not package.startswith(os.path.realpath(REPO) + os.sep), package
        assert os.path.dirname(os.path.realpath(dl._core.__file__)) == package


def test_licence_is_shipped():
    import importlib.metadata

    dist = importlib.metadata.distribution("dlinterop")
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    assert dist.metadata.get_all("License-File") == ["LICENSE"]
    licence = [f for f in dist.files or () if f.name == "LICENSE"]
    assert licence, "LICENSE not in the installed distribution's RECORD"
    text = licence[0].read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    urls = dict(u.split(", ", 1) for u in dist.metadata.get_all("Project-URL") or ())
    assert {"Homepage", "Source", "Issues", "DLPack specification"} <= set(urls)
    assert "dlpack" in (dist.metadata["Keywords"] or "").split(",")
    classifiers = dist.metadata.get_all("Classifier")
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers


def test_package_ships_typing_marker_and_pxd_files():
    package = os.path.dirname(dl.__file__)
    names = set(os.listdir(package))
    if "_core.pxd" not in names:  # an editable install serves sources from the checkout
        names |= set(os.listdir(os.path.join(REPO, "dlinterop")))
    assert {
        "py.typed",
        "_core.pyi",
        "dlpack.pxd",
        "tensor.pxd",
        "_core.pxd",
        "frameworks.pxd",
    } <= names
