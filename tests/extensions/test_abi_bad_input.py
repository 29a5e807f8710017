"""What a C caller can pass the stable ABI's entries that no Python caller can: dtypes and
devices dlinterop has no object for, unchecked spec fields, NULL pointers. Each gets a Python
exception, never a crash; the cases that once crashed run in a child interpreter, so that a
crash fails a test rather than the run."""

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlinterop as dl
from tests.support.cython_build import build_extension

from abi_table import abi_entry

SOURCE = """
# cython: language_level=3
from libc.stdint cimport uint8_t, uint64_t
from dlinterop.dlpack cimport DLDataType, DLDevice, DLDeviceType, DLTensor
from dlinterop.abi cimport (
    ArgSpec, arg_spec, borrow, check_arg, device_object, dtype_object, import_dlinterop,
)

import_dlinterop()


def check(x, int dtype_code, int dtype_bits, arg_code=None, arg_bits=None, named=True):
    '''check_arg of x's view against a spec asking for (dtype_code, dtype_bits), the view's
    dtype replaced by (arg_code, arg_bits, 1) when given.'''
    cdef DLTensor view
    cdef bint readonly
    cdef ArgSpec spec = arg_spec()
    keeper = borrow(x, &view, &readonly)
    spec.dtype_code, spec.dtype_bits = dtype_code, dtype_bits
    if arg_code is not None:
        view.dtype.code, view.dtype.bits, view.dtype.lanes = arg_code, arg_bits, 1
    cdef const char* name = NULL
    if named:
        name = "x"
    return check_arg(&view, readonly, name, &spec)


def check_null_tensor():
    cdef ArgSpec spec = arg_spec()
    return check_arg(NULL, 0, "x", &spec)


def check_null_spec(x):
    cdef DLTensor view
    cdef bint readonly
    keeper = borrow(x, &view, &readonly)
    return check_arg(&view, readonly, "x", NULL)


def dtype_of(int code, int bits, int lanes):
    cdef DLDataType dt
    dt.code, dt.bits, dt.lanes = code, bits, lanes
    return dtype_object(dt)


def device_of(int device_type, int device_id):
    cdef DLDevice dev
    dev.device_type, dev.device_id = <DLDeviceType>device_type, device_id
    return device_object(dev)
"""

# Each case: the call, as text evaluated in the child with `ext`, `np` and `dl` in scope.
CASES = {
    # the spec's dtype names no DType (once a segfault: the name was read from None)
    "spec float8": "ext.check(np.zeros(2, np.float32), 2, 8)",
    "spec (2, 33)": "ext.check(np.zeros(2, np.float32), 2, 33)",
    "spec code 9": "ext.check(np.zeros(2, np.float32), 9, 32)",
    "spec code 300": "ext.check(np.zeros(2, np.float32), 300, 32)",
    # the argument's dtype names none
    "argument (2, 33)": "ext.check(np.zeros(2, np.float32), 2, 32, 2, 33)",
    "argument code 99": "ext.check(np.zeros(2, np.float32), 0, 32, 99, 32)",
    # dtype_bits left at -1 ("unchecked"): any width of the type code
    "code only, met": "ext.check(np.zeros(2, np.float64), 2, -1)",
    "code only, unmet": "ext.check(np.zeros(2, np.int64), 2, -1)",
    "bits only, met": "ext.check(np.zeros(2, np.int32), -1, 32)",
    "bits only, unmet": "ext.check(np.zeros(2, np.int16), -1, 32)",
    "no name": "ext.check(np.zeros(2, np.int16), 2, 32, named=False)",
    "NULL tensor": "ext.check_null_tensor()",
    "NULL spec": "ext.check_null_spec(np.zeros(2))",
    # dtype_object and device_object of what has no object
    "dtype (2, 33, 1)": "ext.dtype_of(2, 33, 1)",
    "dtype (200, 8, 1)": "ext.dtype_of(200, 8, 1)",
    "dtype (2, 32, 3)": "ext.dtype_of(2, 32, 3)",
    "device cpu:-1": "ext.device_of(1, -1)",
    "device type 5": "ext.device_of(5, 0)",
    "device type 99": "ext.device_of(99, 0)",
    "device type 0": "ext.device_of(0, 0)",
}

EXPECTED = {
    "spec float8": "TypeError: x: expected dtype (2, 8, 1), got float32",
    "spec (2, 33)": "TypeError: x: expected dtype (2, 33, 1), got float32",
    "spec code 9": "TypeError: x: expected dtype (9, 32, 1), got float32",
    "spec code 300": "TypeError: x: expected dtype (300, 32, 1), got float32",
    "argument (2, 33)": "TypeError: x: expected dtype float32, got (2, 33, 1)",
    "argument code 99": "TypeError: x: expected dtype int32, got (99, 32, 1)",
    "code only, met": "0",
    "code only, unmet": "TypeError: x: expected a dtype of DLPack type code 2 (any width), "
    "got int64",
    "bits only, met": "0",
    "bits only, unmet": "TypeError: x: expected a 32-bit dtype, got int16",
    "no name": "TypeError: argument: expected dtype float32, got int16",
    "NULL tensor": "ValueError: x: check_arg needs a DLTensor and an ArgSpec, got NULL",
    "NULL spec": "ValueError: x: check_arg needs a DLTensor and an ArgSpec, got NULL",
    "dtype (2, 33, 1)": "ValueError: no DLPack data type has (code, bits, lanes) = (2, 33, 1)",
    "dtype (200, 8, 1)": "ValueError: no DLPack data type has (code, bits, lanes) = (200, 8, 1)",
    "dtype (2, 32, 3)": "ValueError: no DLPack data type has (code, bits, lanes) = (2, 32, 3)",
    "device cpu:-1": "ValueError: device index must be >= 0, got -1",
    "device type 5": "ValueError: unknown DLPack device type 5",
    "device type 99": "ValueError: unknown DLPack device type 99",
    "device type 0": "ValueError: unknown DLPack device type 0",
}

CHILD = """
import importlib.util, json, sys
import numpy as np
import dlinterop as dl
spec = importlib.util.spec_from_file_location("abi_bad_input", sys.argv[1])
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)
for label, call in json.loads(sys.argv[2]).items():
    print(label, flush=True)          # the last label printed names a crash
    try:
        said = str(eval(call))
    except Exception as error:
        said = f"{type(error).__name__}: {error}"
    print("->", said, flush=True)
"""


@pytest.fixture(scope="module")
def ext_path(tmp_path_factory):
    return build_extension(SOURCE, "abi_bad_input", str(tmp_path_factory.mktemp("abi_bad")))


def test_every_case_has_its_expected_answer():
    assert set(CASES) == set(EXPECTED)


def test_c_callers_bad_dtypes_devices_and_nulls_raise_never_crash(ext_path):
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), ext_path, json.dumps(CASES)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, f"crashed at {lines[-1:]}: {proc.stderr[-2000:]}"
    said = dict(zip(lines[0::2], [line[3:] for line in lines[1::2]]))
    assert said == EXPECTED


def test_check_tensor_from_python_agrees_on_a_code_without_bits():
    # Python's check_tensor takes DTypes only; the C spec's code-only check is its own.
    assert dl.check_tensor(np.zeros(2), "x", dtype="float64").dtype == dl.float64
    with pytest.raises(TypeError, match="x: expected dtype float64, got float32"):
        dl.check_tensor(np.zeros(2, np.float32), "x", dtype="float64")


def test_exchange_api_for_refuses_a_null_type():
    entry = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(abi_entry("exchange_api_for"))
    with pytest.raises(TypeError, match="exchange_api_for takes a type, got NULL"):
        entry(None)
