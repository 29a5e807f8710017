"""The everyday Tensor's table: views, scalar reads, tolist, creation and the buffer protocol
beside NumPy's ndarray."""

from benchmarks.rows.table import Row, Target
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

TENSOR_COLUMNS = ("dlinterop", "numpy", "float32")

# The dtypes NumPy holds, whose tolist() is timed beside NumPy's; and the types NumPy
# lacks (or holds through ml_dtypes), timed beside dlinterop's own float32 path.
TOLIST_NUMPY_DTYPES = numpy_shared_dtypes()
TOLIST_OTHER_DTYPES = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
    "int4",
    "uint4",
    "int2",
    "uint2",
    "int1",
    "uint1",
)


def define_tensor_rows():
    """The everyday Tensor beside NumPy's ndarray: views, scalar reads, tolist, creation
    and the buffer protocol, each as a user writes it (the inputs: peers.build_tensor_inputs).
    Every target is a ratio to NumPy's equivalent call, or, for the types NumPy lacks, to
    dlinterop's own float32 tolist of as many elements."""
    rows = []

    def add(name, mine, theirs, limit=1.0, reference="numpy"):
        rows.append(
            Row("tensor", name, {"dlinterop": mine, reference: theirs}, Target(limit, reference))
        )

    views = [
        ("t[3]  (16x16)", "t2[3]", "a2[3]"),
        ("t[-1]", "t2[-1]", "a2[-1]"),
        ("t[1:3]", "t2[1:3]", "a2[1:3]"),
        ("t[::-2, 1:]", "t2[::-2, 1:]", "a2[::-2, 1:]"),
        ("t[..., None]", "t2[..., None]", "a2[..., None]"),
        ("t.T", "t2.T", "a2.T"),
        ("t.transpose(1, 0)", "t2.transpose(1, 0)", "a2.transpose(1, 0)"),
        ("t.reshape((256,))", "t2.reshape((256,))", "a2.reshape((256,))"),
        ("t.reshape(8, -1)", "t2.reshape(8, -1)", "a2.reshape(8, -1)"),
        ("t.view((256,)) vs a.view().reshape(256)", "t2.view((256,))", "a2.view().reshape(256)"),
        ("t.squeeze(1)  (16x1x16)", "t3.squeeze(1)", "a3.squeeze(1)"),
        ("t.unsqueeze(0) vs a[None]", "t2.unsqueeze(0)", "a2[None]"),
    ]
    for name, mine, theirs in views:
        add(name, mine, theirs)
    scalars = [
        ("t.item()  (0-d float32)", "t0.item()", "a0.item()"),
        ("float(t)", "float(t0)", "float(a0)"),
        ("int(t)  (0-d int64)", "int(t0i)", "int(a0i)"),
        ("t[3, 4]  (16x16)", "t2[3, 4]", "a2[3, 4]"),
        ("t[3, 4].item()", "t2[3, 4].item()", "a2[3, 4].item()"),
    ]
    for name, mine, theirs in scalars:
        add(name, mine, theirs)
    for name in TOLIST_NUMPY_DTYPES:
        add(f"tolist() {name}  (16x16)", f"tl[{name!r}].tolist()", f"al[{name!r}].tolist()")
    for name in TOLIST_OTHER_DTYPES:
        add(
            f"tolist() {name} vs dl float32",
            f"tl[{name!r}].tolist()",
            "tl['float32'].tolist()",
            reference="float32",
        )
    creation = [
        ("empty((16,))", "dl.empty((16,))", "np.empty((16,))"),
        ("zeros((16,))", "dl.zeros((16,))", "np.zeros((16,))"),
        ("ones((16,))", "dl.ones((16,))", "np.ones((16,))"),
        ("full((16,), 2.0)", "dl.full((16,), 2.0)", "np.full((16,), 2.0)"),
    ]
    for func, fill in (("empty", ""), ("zeros", ""), ("ones", ""), ("full", "2.0, ")):
        creation.append(
            (
                f"{func}((1024, 1024), float32)  (4 MiB)",
                f"dl.{func}((1024, 1024), {fill}dtype=dl.float32)",
                f"np.{func}((1024, 1024), {fill}dtype=np.float32)",
            )
        )
    creation.append(("arange(100)", "dl.arange(100)", "np.arange(100)"))
    for name, mine, theirs in creation:
        add(name, mine, theirs)
    add(
        "tensor(16x16 list) vs np.array(., float32)",
        "dl.tensor(l2, dtype=dl.float32)",
        "np.array(l2, np.float32)",
        limit=1.5,
    )
    # The buffer protocol, as the issue timed it: np.asarray of a Tensor beside np.asarray of
    # a memoryview made of an array in the same statement (NumPy reads any exporter but a
    # memoryview through a memoryview it makes first); and, no target, beside a memoryview
    # made beforehand, which NumPy takes as it is (docs/benchmarks.md).
    add(
        "np.asarray(t) vs np.asarray(memoryview(a))", "np.asarray(t2)", "np.asarray(memoryview(a2))"
    )
    rows.append(
        Row(
            "tensor",
            "np.asarray(t) vs np.asarray(m), m a memoryview made before",
            {"dlinterop": "np.asarray(t2)", "numpy": "np.asarray(m2)"},
        )
    )
    return rows
