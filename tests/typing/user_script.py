"""What a user's type-checked code sees of dlinterop: mypy --strict must pass on this file
(tests/tools/test_package.py with the installed mypy; .ci/typing.sh with the test extra's floor).
Every assert_type fails the check if a public name comes out as Any or as the wrong type."""

from typing import Any

from typing_extensions import CapsuleType, assert_type

import dlinterop as dl
import dlinterop.cuda

t = dl.zeros((2, 3), dl.float32)
assert_type(t, dl.Tensor)
assert_type(t.shape, tuple[int, ...])
assert_type(t.strides, tuple[int, ...])
assert_type(t.__dlpack__(), CapsuleType)
assert_type(t.__dlpack__(max_version=(1, 3), copy=False), CapsuleType)
assert_type(t.__dlpack_device__(), tuple[dl.DeviceType, int])
assert_type(dl.from_dlpack(t), dl.Tensor)
assert_type(dl.asarray(bytearray(8)), dl.Tensor)
assert_type(dl.asarray([1, 2], "int8", copy=True), dl.Tensor)
assert_type(dl.to_dlpack(t), CapsuleType)
assert_type(dl.dtype("bfloat16"), dl.DType)
assert_type(dl.dtype(float), dl.DType)
assert_type(dl.Device("cpu"), dl.Device)
assert_type(dl.memory_stats(), dict[str, int])
assert_type(dl.get_include(), str)
assert_type(dl.build_info(), dict[str, Any])
assert_type(dl.__version__, str)

# dl.cuda is loaded on first use at run time; checkers see it without that.
assert_type(dl.cuda.device_count(), int)
assert_type(dl.cuda.is_available(), bool)
assert_type(dlinterop.cuda.CUDAError(2, "out of memory").code, int)
if dl.cuda.is_available():
    dl.cuda.synchronize("cuda:0")
    with dl.cuda.Stream(0) as stream:
        assert_type(stream, dl.cuda.Stream)
        assert_type(stream.ptr, int)
    assert_type(dl.cuda.current_stream(), dl.cuda.Stream)

# The way out: outputs typed as the caller's framework.
out = dl.empty_like(t, shape=(3,), dtype="int32")
assert_type(out, dl.Tensor)
assert_type(dl.zeros_like(t), dl.Tensor)
assert_type(dl.to_framework(out, like=t), dl.Tensor)
assert_type(dl.to_framework(out, like=dl.Tensor), dl.Tensor)
assert_type(dl.check_tensor(out, "out", dtype="int32", ndim=1, writable=True), dl.Tensor)

# What a NumPy user types first.
t[0, 1] = 2.5
t[:, ::2] = [[1.0, 2.0]]
assert_type(t.astype(float, copy=False), dl.Tensor)
assert_type(t < 1.0, dl.Tensor)
assert_type(t.flatten(), dl.Tensor)
assert_type(t.ravel("K"), dl.Tensor)
assert_type(t.copy("F"), dl.Tensor)
assert_type(dl.full(2, dl.tensor(1.5)), dl.Tensor)  # an array of no axis is a number
assert_type(dl.arange(dl.tensor(3)), dl.Tensor)
