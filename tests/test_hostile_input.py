"""Input an attacker controls: pickle state (anyone can write a pickle that calls
dlinterop's rebuild function with any arguments), private types made with __new__ alone,
array interfaces that describe memory their buffer does not hold. Each must raise a clear
Python exception; the ones that used to crash run in a child process."""

import pickle
import subprocess
import sys
import textwrap

import pytest

import dlinterop as dl
from dlinterop import _core


def run_apart(code):
    """Runs `code` in a fresh interpreter; returns its completed process."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


class Evil:
    """Pickles as a call of dlinterop's rebuild function with the given state."""

    def __init__(self, *state):
        self.state = state

    def __reduce__(self):
        return (_core._rebuild_tensor, self.state)


# (buffer, shape, dtype triple, readonly): each once accepted, with a Tensor larger than its
# buffer (count x bits wrapped to 0) or with a shape no buffer can hold.
OVERSIZED = {
    "uint8 2**61": (b"", (2**61,), (1, 8, 1), True),
    "float32 2**60": (b"", (2**60,), (2, 32, 1), True),
    "float4 2**62": (b"", (2**62,), (17, 4, 1), True),
    "writable alias": (bytearray(8), (2**61,), (1, 8, 1), False),
    "product wraps": (b"", (2**32, 2**32), (1, 8, 1), True),
    "product wraps to 8": (bytes(8), (2**63 // 2 + 1, 2, 8), (1, 8, 1), True),
}


@pytest.mark.parametrize("state", OVERSIZED.values(), ids=OVERSIZED.keys())
def test_rebuild_of_an_oversized_shape_is_value_error(state):
    with pytest.raises(ValueError, match="overflows|do not hold"):
        _core._rebuild_tensor(*state)
    with pytest.raises(ValueError):
        pickle.loads(pickle.dumps(Evil(*state)))


def test_oversized_rebuild_then_index_does_not_crash():
    # The original report: the Tensor was accepted and indexing its buffer segfaulted.
    proc = run_apart("""
        from dlinterop import _core
        for data, readonly in [(b"", True), (bytearray(8), False)]:
            try:
                t = _core._rebuild_tensor(data, (2**61,), (1, 8, 1), readonly)
            except ValueError:
                continue
            memoryview(t)[1 << 32] = 1
            raise SystemExit("accepted")
        print("refused")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused"


@pytest.mark.parametrize("nbytes", [0, 11, 13, 1 << 10])
def test_rebuild_whose_buffer_does_not_match_the_shape_is_value_error(nbytes):
    with pytest.raises(ValueError, match="do not hold"):
        _core._rebuild_tensor(bytes(nbytes), (3,), (2, 32, 1), True)


@pytest.mark.parametrize(
    "shape", [(True,), (3.0,), ("3",), [3], 3, (3, None), (-1,), (2**64,), (1,) * 65], ids=repr
)
def test_rebuild_takes_only_a_tuple_of_exact_ints(shape):
    with pytest.raises((TypeError, ValueError)):
        _core._rebuild_tensor(bytes(12), shape, (2, 32, 1), True)


def test_rebuild_takes_no_numpy_integers():
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match="tuple of ints"):
        _core._rebuild_tensor(bytes(12), (np.int64(3),), (2, 32, 1), True)


@pytest.mark.parametrize(
    "triple,readonly", [([2, 32, 1], True), ((2, 32, 1), 1), ((2, 32, 1), None), ("float32", True)]
)
def test_rebuild_state_of_the_wrong_types_is_type_error(triple, readonly):
    with pytest.raises(TypeError):
        _core._rebuild_tensor(bytes(12), (3,), triple, readonly)


@pytest.mark.parametrize("triple", [(2, 0, 1), (2, 7, 1), (99, 8, 1), (2, 32, 4), (0, 0, 0)])
def test_rebuild_of_an_unknown_dtype_is_value_error(triple):
    with pytest.raises(ValueError):
        _core._rebuild_tensor(bytes(12), (3,), triple, True)


def test_honest_pickles_still_round_trip():
    t = dl.full((2, 3), 1.5)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        u = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert (u.shape, u.dtype, bytes(memoryview(u))) == (t.shape, t.dtype, bytes(memoryview(t)))
    packed = dl.full((5,), 1, dl.float4_e2m1fn)
    assert pickle.loads(pickle.dumps(packed)).shape == (5,)


# The bytes pickled before protocol 5: (bytes, shape, triple, readonly, padding).
@pytest.mark.parametrize(
    "payload,pad,error",
    [
        (bytes(12), -1, ValueError),
        (bytes(12), 256, ValueError),
        (bytes(12), 1.0, ValueError),
        (bytes(12), True, ValueError),
        (bytes(12), 2**64, ValueError),
        (bytes(12), 1, ValueError),  # 11 bytes after the padding: not three float32
        (bytes(4), 8, ValueError),  # padding past the end
        (bytearray(12), 0, TypeError),
        (memoryview(bytes(12)), 0, TypeError),
    ],
    ids=repr,
)
def test_rebuild_from_bytes_checks_its_padding_and_payload(payload, pad, error):
    with pytest.raises(error):
        _core._rebuild_tensor_from_bytes(payload, (3,), (2, 32, 1), False, pad)


def test_rebuild_from_bytes_reads_the_form_without_padding():
    # Pickles made before the padding was added carry four arguments.
    t = _core._rebuild_tensor_from_bytes(bytes(range(12)), (3,), (1, 32, 1), False)
    assert bytes(memoryview(t)) == bytes(range(12)) and t.data_ptr % 256 == 0


# -- private types --------------------------------------------------------------------------


def _extension_modules():
    import importlib

    names = [
        "dlinterop._core",
        "dlinterop.frameworks",
        "dlinterop._capi",
        "dlinterop.testing._conformance",
        "dlinterop._cuda",
    ]
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            pass
    return modules


@pytest.mark.parametrize("module", _extension_modules(), ids=lambda m: m.__name__)
def test_no_cython_unpickle_entry_points(module):
    # Cython's automatic pickling of cdef classes publishes __pyx_unpickle_<Class>(cls,
    # checksum, state): a pickle could set any field, a _RawBytes with no tensor among them.
    assert [n for n in dir(module) if n.startswith("__pyx_unpickle")] == []


def test_raw_bytes_made_with_new_refuses_its_buffer():
    with pytest.raises(BufferError, match="views no tensor"):
        memoryview(_core._RawBytes.__new__(_core._RawBytes))


def test_private_types_are_not_picklable():
    for cls in (_core._RawBytes, _core._BufferHolder):
        with pytest.raises(TypeError):
            pickle.dumps(cls.__new__(cls))


def test_dtype_cannot_be_made_with_new():
    # A DType with no name and zero bits divided by zero in every size computation.
    with pytest.raises(TypeError, match="cannot be constructed"):
        dl.DType.__new__(dl.DType)


def test_device_made_with_new_is_not_a_device():
    d = dl.Device.__new__(dl.Device)
    assert "unknown device type 0" in str(d)
    with pytest.raises(ValueError, match="is not a device"):
        dl.empty(3, device=d)


def test_every_private_type_made_with_new_is_safe_to_touch():
    # Every class of every extension module, made by __new__ alone (all a pickle can do
    # without running __init__), then everything a caller can do without arguments. Any
    # Python exception is fine; the child must not crash.
    proc = run_apart("""
        import copy, importlib, pickle
        names = ["dlinterop._core", "dlinterop.frameworks", "dlinterop._capi",
                 "dlinterop.testing._conformance", "dlinterop._cuda"]
        touched = 0
        for name in names:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            for cls in [v for v in vars(module).values() if isinstance(v, type)]:
                try:
                    obj = cls.__new__(cls)
                except Exception:
                    continue
                touched += 1
                actions = [repr, str, hash, memoryview, bytes, len, iter, bool,
                           pickle.dumps, copy.copy, copy.deepcopy, lambda o: o == o,
                           lambda o: o.__dlpack__(), lambda o: o.__dlpack_device__(),
                           lambda o: o.__reduce_ex__(5)]
                for attribute in dir(cls):
                    if not attribute.startswith("__"):
                        actions.append(lambda o, a=attribute: getattr(o, a))
                for action in actions:
                    try:
                        action(obj)
                    except Exception:
                        pass
        print(touched)
    """)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= 5


# -- array interfaces and buffers -------------------------------------------------------


class Interface:
    def __init__(self, **entries):
        self.__array_interface__ = {"version": 3, "typestr": "<f4", **entries}


OUTSIDE = {
    "shape beyond": dict(shape=(10**6,), data=bytearray(4)),
    "offset beyond": dict(shape=(1,), data=bytearray(8), offset=8),
    "negative stride before": dict(shape=(2,), data=bytearray(8), strides=(-4,)),
    "stride beyond": dict(shape=(2,), data=bytearray(8), strides=(8,)),
    "huge stride": dict(shape=(2,), data=bytearray(8), strides=(2**60,)),
}


@pytest.mark.parametrize("entries", OUTSIDE.values(), ids=OUTSIDE.keys())
def test_array_interface_beyond_its_buffer_is_value_error(entries):
    with pytest.raises(ValueError, match="outside its buffer|overflow"):
        dl.asarray(Interface(**entries))


@pytest.mark.parametrize("offset", [-4, 2.0, "4"])
def test_array_interface_offset_must_be_a_non_negative_int(offset):
    with pytest.raises(ValueError, match="offset"):
        dl.asarray(Interface(shape=(1,), data=bytearray(8), offset=offset))


def test_array_interface_inside_its_buffer_shares_it():
    data = bytearray(16)
    t = dl.asarray(Interface(shape=(2,), data=data, strides=(-8,), offset=8))
    data[8:12] = b"\x00\x00\x80\x3f"  # 1.0
    assert memoryview(t).tolist() == [1.0, 0.0]
    assert dl.asarray(Interface(shape=(0,), data=data, offset=16)).shape == (0,)


@pytest.mark.parametrize("shape", [(2**40, 2**40), (-1,), (2**63,), (1,) * 65])
def test_allocation_of_an_impossible_shape_is_value_error(shape):
    for make in (dl.empty, dl.zeros, lambda s: dl.full(s, 1.0)):
        with pytest.raises(ValueError):
            make(shape)
