"""What help() and inspect show, and the messages a first user meets: every public callable
has a signature with its real defaults, docstrings state the defaults, an unknown dtype name
lists the valid ones, and a CUDA request without a GPU says there is none."""

import inspect
import types

import pytest

import dlinterop as dl
import dlinterop.cuda
import dlinterop.testing

# Classes that cannot be constructed (their constructors raise TypeError, pointing to the
# functions that make them) have no constructor signature to show; exception classes have
# none either, as CPython's own (inspect.signature(ValueError) raises too).
NOT_CONSTRUCTIBLE = {dl.Tensor, dl.DType}


def public_callables():
    for module in (dl, dl.cuda, dl.testing):
        names = getattr(module, "__all__", None) or [
            n for n in vars(module) if not n.startswith("_")
        ]
        for name in names:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType) or isinstance(value, dl.DType):
                continue
            if isinstance(value, type):
                if value in NOT_CONSTRUCTIBLE or issubclass(value, BaseException):
                    yield from methods_of(f"{module.__name__}.{name}", value)
                    continue
                yield f"{module.__name__}.{name}", value
                yield from methods_of(f"{module.__name__}.{name}", value)
            elif callable(value) and getattr(value, "__module__", "").startswith("dlinterop"):
                yield f"{module.__name__}.{name}", value


def methods_of(prefix, cls):
    if issubclass(cls, BaseException):
        return
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__dlpack__", "__dlpack_device__", "__array__"):
            continue
        if isinstance(member, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
            continue
        if callable(member) or isinstance(member, (classmethod, staticmethod)):
            yield f"{prefix}.{name}", getattr(cls, name)


CALLABLES = dict(public_callables())


def test_the_list_of_public_callables_is_complete():
    for name in (
        "dlinterop.zeros",
        "dlinterop.empty",
        "dlinterop.full",
        "dlinterop.ones",
        "dlinterop.from_dlpack",
        "dlinterop.Device",
        "dlinterop.Tensor.copy",
        "dlinterop.Tensor.__dlpack__",
        "dlinterop.cuda.is_available",
        "dlinterop.testing.check_producer",
    ):
        assert name in CALLABLES


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_every_public_callable_has_a_signature(name):
    inspect.signature(CALLABLES[name])


def test_not_constructible_classes_say_what_makes_them():
    for cls in NOT_CONSTRUCTIBLE:
        with pytest.raises(TypeError, match="cannot be constructed directly; use dl"):
            cls()


@pytest.mark.parametrize("function", [dl.empty, dl.zeros, dl.ones, dl.full])
def test_creation_signatures_show_their_real_defaults(function):
    parameters = inspect.signature(function).parameters
    assert parameters["device"].default == "cpu"
    assert parameters["shared"].default is False
    # The default alignment the signature shows is the one allocations get.
    alignment = parameters["alignment"].default
    assert alignment == 256
    tensors = [function((3,), 1.0) if function is dl.full else function((3,)) for _ in range(16)]
    assert all(t.data_ptr % alignment == 0 for t in tensors)
    if function is not dl.full:
        assert parameters["dtype"].default == "float32"
        assert function((1,)).dtype == dl.float32


@pytest.mark.parametrize("function", [dl.empty, dl.zeros, dl.ones])
def test_docstrings_say_the_default_dtype_is_float32(function):
    doc = inspect.getdoc(function)
    assert "float32" in doc and "float64" in doc  # ours, and NumPy's that differs


def test_help_shows_real_parameters():
    import pydoc

    text = pydoc.render_doc(dl.zeros, renderer=pydoc.plaintext)
    assert "zeros(shape, dtype='float32', *, device='cpu', alignment=256, shared=False)" in text
    assert "Device(type, index=None)" in pydoc.render_doc(dl.Device, renderer=pydoc.plaintext)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("f4", dl.float32),
        ("<f8", dl.float64),
        ("=i4", dl.int32),
        ("|u1", dl.uint8),
        ("i8", dl.int64),
        ("c8", dl.complex64),
        ("c16", dl.complex128),
        ("f2", dl.float16),
        ("b1", dl.bool_),
        ("?", dl.bool_),
        (">u1", dl.uint8),
        ("double", dl.float64),
        ("half", dl.float16),
        ("single", dl.float32),
        ("cdouble", dl.complex128),
        ("csingle", dl.complex64),
        ("short", dl.int16),
        ("ushort", dl.uint16),
    ],
)
def test_numpy_type_strings_and_unambiguous_c_names_are_understood(name, expected):
    assert dl.dtype(name) is expected
    assert dl.zeros((2,), name).dtype is expected


def test_the_aliases_agree_with_numpy():
    np = pytest.importorskip("numpy")
    for name in (
        "f4",
        "<f8",
        "=i4",
        "|u1",
        "i8",
        "c8",
        "c16",
        "f2",
        "b1",
        "?",
        "double",
        "half",
        "single",
        "cdouble",
        "csingle",
        "short",
        "ushort",
    ):
        assert dl.dtype(name).name == np.dtype(name).name


@pytest.mark.parametrize(
    "name, reads",
    [
        ("float", "float64, PyTorch as float32"),
        ("int", "int64, PyTorch as int32"),
        ("byte", "int8, PyTorch as uint8"),
        ("complex", "complex128"),
        ("long", "Windows"),
        ("cfloat", "complex64"),
    ],
)
def test_names_numpy_and_pytorch_read_differently_are_refused_saying_so(name, reads):
    with pytest.raises(ValueError, match=f"'{name}' is ambiguous") as info:
        dl.dtype(name)
    assert reads in str(info.value)
    with pytest.raises(ValueError, match="ambiguous"):
        dl.zeros((2,), name)


@pytest.mark.parametrize(
    "name, nearest",
    [
        ("flaot32", "float32"),
        ("Float32", "float32"),
        ("bfloat", "bfloat16"),
        ("uint9", "uint8"),
        ("float8_e4m3f", "float8_e4m3fn"),
    ],
)
def test_an_unknown_name_suggests_the_nearest_and_lists_the_valid_ones(name, nearest):
    with pytest.raises(ValueError) as info:
        dl.dtype(name)
    message = str(info.value)
    assert f"unknown data type name {name!r}; did you mean {nearest!r}?" in message
    for valid in ("bool", "int8", "float32", "bfloat16", "complex128", "float4_e2m1fn"):
        assert valid in message.split("Valid names:")[1]


@pytest.mark.parametrize("name", ["", "xyz", "f3", "f0", "i16", "<", "f4f", "f\u0664"])
def test_a_name_near_nothing_still_lists_the_valid_ones(name):
    with pytest.raises(ValueError, match=r"unknown data type name .*Valid names: bool, int8"):
        dl.dtype(name)


def test_byte_swapped_type_strings_are_refused():
    with pytest.raises(ValueError, match="non-native byte order '>f4'"):
        dl.dtype(">f4")


@pytest.mark.skipif(dl.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize(
    "make",
    [
        lambda: dl.zeros((2,), device="cuda"),
        lambda: dl.empty((2,), device="cuda:1"),
        lambda: dl.zeros((2,), device="cuda_host"),
        lambda: dl.zeros((2,), device="cuda_managed"),
        lambda: dl.from_dlpack(dl.zeros(2), device="cuda"),
        lambda: dl.zeros(2).to("cuda"),
    ],
)
def test_cuda_without_a_gpu_says_there_is_none(make):
    # A build without the CUDA layer says that instead.
    expected = (
        "no CUDA GPU is available: " + r"dl.cuda.is_available\(\) is False"
        if dl.build_info()["cuda_allocator_built"]
        else "built without it"
    )
    with pytest.raises(dl.cuda.CUDAError, match=expected):
        make()


def test_asarray_of_python_data_makes_a_tensor():
    t = dl.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert t.shape == (2, 2) and t.dtype == dl.float32 and t.tolist() == [[1, 2], [3, 4]]
