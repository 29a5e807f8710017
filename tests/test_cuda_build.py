"""The CUDA layer on a machine without a GPU: it is built, imports, reports no device, and
fails cleanly. The GPU tests themselves live in tests/gpu/ and run through tests/gpu/run.sh."""

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

import dlinterop as dl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
built = dl.build_info()["cuda_allocator_built"]
needs_cuda_module = pytest.mark.skipif(not built, reason="built without the CUDA allocator")
no_gpu = pytest.mark.skipif(dl.cuda.is_available(), reason="a GPU is present")


def cuda_module_path():
    import dlinterop._cuda

    return dlinterop._cuda.__file__


def test_cuda_module_is_built_as_the_build_asked():
    info = dl.build_info()
    option = info["build_options"]["DLINTEROP_CUDA"]
    assert option in ("AUTO", "ON", "OFF")
    if option == "OFF":
        # An explicit OFF wins over an nvcc on PATH.
        assert not built and info["cuda_toolkit"] is None
        assert importlib.util.find_spec("dlinterop._cuda") is None
        assert dl.cuda.device_count() == 0
        with pytest.raises(dl.cuda.CUDAError, match="built without its CUDA allocator"):
            dl.cuda.synchronize()
        return
    if option == "AUTO" and shutil.which("nvcc") is None:
        pytest.skip("DLINTEROP_CUDA=AUTO and no nvcc on PATH: either outcome is right")
    # ON, or AUTO with nvcc on PATH (CI builds where it runs the tests).
    assert built
    assert info["cuda_toolkit"]
    assert importlib.util.find_spec("dlinterop._cuda") is not None


def test_compiled_modules_export_only_their_init_function():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not installed")
    names = ["_core", "_capi"] + (["_cuda"] if built else [])
    for name in names:
        path = importlib.util.find_spec(f"dlinterop.{name}").origin
        out = subprocess.run(
            [nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True
        ).stdout
        exported = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
        assert exported == [f"PyInit_{name}"], (name, exported)


@needs_cuda_module
def test_cuda_module_links_the_runtime_statically():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf not installed")
    dynamic = subprocess.run(
        [readelf, "-d", cuda_module_path()], capture_output=True, text=True, check=True
    ).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert needed, dynamic
    assert not any("libcudart" in line or "libcuda.so" in line for line in needed), needed


@needs_cuda_module
@no_gpu
def test_device_count_is_zero_without_a_gpu():
    assert dl.cuda.device_count() == 0
    assert dl.cuda.is_available() is False
    assert dl.build_info()["gpu_usable"] is False


@needs_cuda_module
@no_gpu
@pytest.mark.parametrize("device", ["cuda", "cuda:1", "cuda_host", "cuda_managed"])
def test_allocation_without_a_gpu_raises_cuda_error(device):
    before = dl.memory_stats()
    with pytest.raises(dl.cuda.CUDAError) as info:
        dl.empty((4, 4), device=device)
    assert isinstance(info.value.code, int) and info.value.code > 0
    assert "cuda" in str(info.value).lower()
    assert dl.memory_stats() == before


@needs_cuda_module
@no_gpu
def test_streams_without_a_gpu_raise_cuda_error():
    with pytest.raises(dl.cuda.CUDAError):
        dl.cuda.Stream()
    with pytest.raises(dl.cuda.CUDAError):
        dl.cuda.synchronize()


@no_gpu
def test_copy_to_cuda_without_a_gpu_is_a_clear_error():
    t = dl.zeros(3)
    with pytest.raises((dl.cuda.CUDAError, BufferError)):
        t.to("cuda")
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0), max_version=(1, 3))


def test_cuda_out_of_memory_error_is_a_memory_error():
    assert issubclass(dl.cuda.CUDAOutOfMemoryError, MemoryError)
    assert issubclass(dl.cuda.CUDAOutOfMemoryError, dl.cuda.CUDAError)


def test_non_cuda_devices_have_no_allocator():
    with pytest.raises(BufferError, match="cannot allocate or copy"):
        dl.empty(3, device="rocm")


def test_cpu_tensor_has_no_cuda_array_interface():
    assert not hasattr(dl.zeros(2), "__cuda_array_interface__")


@pytest.mark.slow
@pytest.mark.tooling
def test_build_with_cuda_off_has_no_cuda_module(tmp_path):
    """DLINTEROP_CUDA=OFF: the wheel has no _cuda, and the package still imports."""
    pytest.importorskip("scikit_build_core")
    pytest.importorskip("cython_cmake")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            "-Ccmake.define.DLINTEROP_CUDA=OFF",
            f"-Cbuild-dir={tmp_path / 'build'}",
            REPO,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (wheel,) = glob.glob(str(tmp_path / "dlinterop-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("dlinterop/_core.") for n in names)
    assert not any(n.startswith("dlinterop/_cuda.") and n.endswith(".so") for n in names)
    assert "dlinterop/include/dlpack/dlpack.h" in names
    # The stable ABI's header and Cython surface, and the Tensor layout the .pxd files read.
    for name in ("include/dlinterop/abi.h", "include/dlinterop/tensor_layout.h", "abi.pxd"):
        assert f"dlinterop/{name}" in names
    config = zipfile.ZipFile(wheel).read("dlinterop/_lib/build_config.py").decode()
    assert 'cuda_built = "OFF" == "ON"' in config
