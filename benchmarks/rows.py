"""The work the side-by-side runner (python -m benchmarks) times: the rows of its table, each
one piece of work as one statement per column, and the issue's targets some rows carry. The
statements name the inputs that peers.build_inputs makes."""

import dataclasses

# Peers in column order; dlinterop is always the first column.
PEERS = ("numpy", "torch", "jax", "tvm_ffi")
COLUMNS = ("dlinterop",) + PEERS
HEADINGS = {
    "dlinterop": "dlinterop",
    "numpy": "numpy",
    "torch": "torch",
    "jax": "jax",
    "nanobind": "nanobind",
    "tvm_ffi": "tvm-ffi",
    "exchange API": "dl+table",
    "__dlpack__": "dl+dlpack",
    "float32": "dl f32",  # dlinterop's float32 path, beside the types NumPy lacks
    "own": "its own",  # a framework's own from_dlpack of its own array
}

# Per library: the name its small (16 float32 elements) tensor has in the timing namespace,
# and the call that imports a DLPack object.
OBJECT = {"dlinterop": "t", "numpy": "a", "torch": "x", "jax": "j", "tvm_ffi": "tv"}
FROM_DLPACK = {
    "dlinterop": "dl.from_dlpack",
    "numpy": "np.from_dlpack",
    "torch": "torch.from_dlpack",
    "jax": "jnp.from_dlpack",
    "tvm_ffi": "tvm_ffi.from_dlpack",
}

SMALL = 16  # elements of the small tensors
MIB = 1 << 20
BIG = 64 * MIB // 4  # float32 elements in 64 MiB


@dataclasses.dataclass(frozen=True)
class Target:
    """A bound from the issue: value(subject) [/ value(reference)] <= limit (< when strict)."""

    limit: float
    reference: str | None = None  # column the subject is divided by; None: absolute
    subject: str = "dlinterop"
    strict: bool = False

    def describe(self):
        op = "<" if self.strict else "≤"
        if self.reference is None:
            return f"{op}{self.limit:g}"
        return f"{op}{self.limit:.2f}×{HEADINGS.get(self.reference, self.reference)}"

    def evaluate(self, values):
        subject = values.get(self.subject)
        if subject is None:
            return None, None
        if self.reference is None:
            measured = subject
        else:
            reference = values.get(self.reference)
            if not reference:
                return None, None
            measured = subject / reference
        met = measured < self.limit if self.strict else measured <= self.limit
        return measured, met


@dataclasses.dataclass
class Row:
    section: str
    name: str
    statements: dict  # column -> statement, timed in the namespace
    target: Target | None = None
    unit: str = "ns"
    needs: tuple = ()  # modules the whole row needs (a consumer, a go-between)
    values: dict = dataclasses.field(default_factory=dict)  # column -> median
    errors: dict = dataclasses.field(default_factory=dict)  # column -> why it did not run
    extra: dict = dataclasses.field(default_factory=dict)  # more numbers, for the JSON
    values_from: "Row | None" = None  # not timed: shows that row's values (another target)


def per_library(template, libraries=COLUMNS, **fixed):
    """{column: template formatted with the column's object name and from_dlpack}."""
    return {
        lib: template.format(obj=OBJECT[lib], from_dlpack=FROM_DLPACK[lib], **fixed)
        for lib in libraries
    }


def define_rows():
    rows = []
    add = rows.append
    export = "export"
    add(Row(export, "__dlpack__()", per_library("{obj}.__dlpack__()"), Target(0.8, "numpy")))
    versioned = per_library("{obj}.__dlpack__(max_version=(1, 0))")
    versioned["dlinterop"] = "t.__dlpack__(max_version=(1, 3))"
    add(Row(export, "__dlpack__(max_version=(1,3); peers (1,0))", versioned, Target(0.8, "numpy")))
    add(
        Row(
            export,
            "__dlpack_device__()",
            per_library("{obj}.__dlpack_device__()"),
            Target(0.8, "numpy"),
        )
    )
    add(
        Row(
            export,
            "to_dlpack(tensor)",
            {"dlinterop": "dl.to_dlpack(t)", "torch": "torch.utils.dlpack.to_dlpack(x)"},
        )
    )
    no_jax = [lib for lib in COLUMNS if lib != "jax"]
    for layout in ("strided", "transposed"):
        add(
            Row(
                export,
                f"__dlpack__(), {layout} (8, 16)",
                per_library(f"{{obj}}_{layout}.__dlpack__()", no_jax),
            )
        )
        add(
            Row(
                export,
                f"__dlpack__(max_version=(1, 0)), {layout}",
                per_library(f"{{obj}}_{layout}.__dlpack__(max_version=(1, 0))", no_jax),
            )
        )

    imports = "import"
    for producer, label in (
        ("numpy", "NumPy array"),
        ("torch", "torch tensor"),
        ("jax", "jax array"),
        ("tvm_ffi", "tvm-ffi tensor"),
    ):
        target = Target(0.5, "numpy") if producer == "numpy" else None
        add(
            Row(
                imports,
                f"from_dlpack({label})",
                per_library(f"{{from_dlpack}}({OBJECT[producer]})"),
                target,
                needs=() if producer == "numpy" else (producer,),
            )
        )
    for layout in ("strided", "transposed"):
        add(
            Row(
                imports,
                f"from_dlpack(NumPy array, {layout})",
                per_library(f"{{from_dlpack}}(a_{layout})", no_jax),
            )
        )

    consume = "consume"
    for consumer, label in (
        ("numpy", "np.from_dlpack"),
        ("torch", "torch.from_dlpack"),
        ("jax", "jnp.from_dlpack"),
        ("tvm_ffi", "tvm_ffi.from_dlpack"),
    ):
        # Issue 14: NumPy takes a dl.Tensor in at most 0.9x the time of its own array.
        target = (
            Target(0.9, "numpy")
            if consumer == "numpy"
            else Target(1.0, "numpy")
            if consumer == "torch"
            else None
        )
        add(
            Row(
                consume,
                f"{label}(·)",
                per_library(f"{FROM_DLPACK[consumer]}({{obj}})"),
                target,
                needs=(FROM_DLPACK[consumer].split(".")[0],),
            )
        )

    round_trip = "round trip"
    add(Row(round_trip, "X.from_dlpack(X's tensor)", per_library("{from_dlpack}({obj})")))
    add(
        Row(
            round_trip,
            "X.from_dlpack(np.from_dlpack(X's))",
            per_library("{from_dlpack}(np.from_dlpack({obj}))"),
        )
    )
    add(
        Row(
            round_trip,
            "X.from_dlpack(torch.from_dlpack(X's))",
            per_library("{from_dlpack}(torch.from_dlpack({obj}))"),
            needs=("torch",),
        )
    )
    add(
        Row(
            round_trip,
            "X.from_dlpack(X's.__dlpack__())  [capsule]",
            {
                "dlinterop": "dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))",
                "torch": "torch.utils.dlpack.from_dlpack(x.__dlpack__())",
            },
        )
    )

    alloc = "allocation"
    lib_calls = {"dlinterop": "dl", "numpy": "np", "torch": "torch", "jax": "jnp"}
    add(
        Row(
            alloc,
            "empty((1024, 1024))  [np f64, others f32]",
            {lib: f"{mod}.empty((1024, 1024))" for lib, mod in lib_calls.items()},
            Target(1.2, "numpy"),
        )
    )
    for func in ("empty", "zeros"):
        for shape in ("(1024, 1024)", f"({SMALL},)"):
            add(
                Row(
                    alloc,
                    f"{func}({shape}, float32)",
                    {
                        lib: f"{mod}.{func}({shape}, dtype={mod}.float32)"
                        for lib, mod in lib_calls.items()
                    },
                )
            )
        if func == "empty":
            add(
                Row(
                    alloc,
                    "empty((1024, 1024), float64)",
                    {
                        lib: f"{mod}.empty((1024, 1024), dtype={mod}.float64)"
                        for lib, mod in lib_calls.items()
                        if lib != "jax"
                    },
                )
            )

    copy = "copy"
    add(
        Row(
            copy,
            f"copy, {SMALL} float32",
            {"dlinterop": "t.copy()", "numpy": "a.copy()", "torch": "x.clone()", "jax": "j.copy()"},
        )
    )
    add(
        Row(
            copy,
            "copy, 4 MiB",
            {
                "dlinterop": "t_4m.copy()",
                "numpy": "a_4m.copy()",
                "torch": "x_4m.clone()",
                "jax": "j_4m.copy()",
            },
        )
    )
    add(
        Row(
            copy,
            "copy to contiguous, 4 MiB strided",
            {
                "dlinterop": "t_4m_strided.copy()",
                "numpy": "a_4m_strided.copy()",
                "torch": "x_4m_strided.contiguous()",
            },
        )
    )
    add(
        Row(
            copy,
            f"from_dlpack(NumPy array, copy=True), {SMALL}",
            per_library("{from_dlpack}(a, copy=True)", ("dlinterop", "numpy", "torch", "jax")),
        )
    )
    return rows


EXCHANGE_COLUMNS = ("exchange API", "__dlpack__", "torch", "tvm_ffi")


def define_exchange_rows():
    """Issue 8: dlinterop importing a torch tensor through torch's C exchange table, and
    through torch's __dlpack__ (the route without the table, which copy=False takes), beside
    torch's and tvm-ffi's own imports of the same tensor. One timing; two targets, so the
    second row shows the first row's values against the other reference."""
    statements = {
        "exchange API": "dl.from_dlpack(x)",
        "__dlpack__": "dl.from_dlpack(x, copy=False)",
        "torch": "torch.from_dlpack(x)",
        "tvm_ffi": "tvm_ffi.from_dlpack(x)",
    }
    timed = Row(
        "exchange",
        "dl.from_dlpack(torch tensor) vs tvm-ffi",
        statements,
        Target(1.0, "tvm_ffi", subject="exchange API"),
        needs=("torch",),
    )
    again = Row(
        "exchange",
        "dl.from_dlpack(torch tensor) vs torch",
        {},
        Target(0.1, "torch", subject="exchange API"),
        needs=("torch",),
        values_from=timed,
    )
    return [timed, again]


FRAMEWORK_COLUMNS = ("dlinterop", "own")


def define_framework_rows(frameworks):
    """Issue 44: each framework that is no column of the other tables (pyarrow, cuda.core,
    MLX, Warp, nanobind, array-api-strict, CuPy), its 16-element float32 array imported by
    dl.from_dlpack beside the framework's own import of it (`frameworks`: name -> its own
    import, {obj} standing for the array, named fw_<name> in the namespace), and the
    framework's import of a dl.Tensor beside that of its own array."""
    rows = []
    for name, own in frameworks.items():
        obj = f"fw_{name}"
        rows.append(
            Row(
                "frameworks",
                f"import a {name} array",
                {"dlinterop": f"dl.from_dlpack({obj})", "own": own.format(obj=obj)},
                Target(1.0, "own"),
                needs=(obj,),
            )
        )
        rows.append(
            Row(
                "frameworks",
                f"{name} imports a dl.Tensor (own: its own array)",
                {"dlinterop": own.format(obj="t"), "own": own.format(obj=obj)},
                needs=(obj,),
            )
        )
    return rows


WAY_OUT_COLUMNS = ("dlinterop", "nanobind", "numpy", "torch")


def define_way_out_rows():
    """Issue 15: handing a tensor back as the caller's type (dl.to_framework beside that
    framework's own from_dlpack), and a trivial kernel (one tensor in, a new one of the
    caller's type out) written with dlinterop's Cython API beside the same with nanobind."""
    return [
        Row(
            "way out",
            "to_framework(t, like=torch) vs torch.from_dlpack(t)",
            {"dlinterop": "dl.to_framework(t, like=x)", "torch": "torch.from_dlpack(t)"},
            Target(0.25, "torch"),
            needs=("torch",),
        ),
        Row(
            "way out",
            "to_framework(t, like=NumPy) vs np.from_dlpack(t)",
            {"dlinterop": "dl.to_framework(t, like=a)", "numpy": "np.from_dlpack(t)"},
        ),
        Row(
            "way out",
            "kernel(NumPy array) -> NumPy array",
            {"dlinterop": "dl_kernels.identity(a)", "nanobind": "nb_kernels.identity(a)"},
            Target(1.0, "nanobind"),
            needs=("dl_kernels", "nb_kernels"),
        ),
        Row(
            "way out",
            "kernel(torch tensor) -> torch tensor",
            {"dlinterop": "dl_kernels.identity(x)", "nanobind": "nb_kernels.identity_torch(x)"},
            Target(1.0, "nanobind"),
            needs=("torch", "dl_kernels", "nb_kernels"),
        ),
    ]


def define_scaling_rows():
    """Every exchange at 1 element beside the same at 64 MiB: cost must not grow with size."""
    exchanges = [
        ("t.__dlpack__()", "t{s}.__dlpack__()", ()),
        ("t.__dlpack__(max_version=(1, 3))", "t{s}.__dlpack__(max_version=(1, 3))", ()),
        ("dl.from_dlpack(t)", "dl.from_dlpack(t{s})", ()),
        ("dl.from_dlpack(a)  [NumPy]", "dl.from_dlpack(a{s})", ()),
        ("dl.from_dlpack(x)  [torch]", "dl.from_dlpack(x{s})", ("torch",)),
        ("dl.from_dlpack(j)  [jax]", "dl.from_dlpack(j{s})", ("jnp",)),
        ("dl.from_dlpack(tv)  [tvm-ffi]", "dl.from_dlpack(tv{s})", ("tvm_ffi",)),
        ("np.from_dlpack(t)", "np.from_dlpack(t{s})", ()),
        ("torch.from_dlpack(t)", "torch.from_dlpack(t{s})", ("torch",)),
        ("jnp.from_dlpack(t)", "jnp.from_dlpack(t{s})", ("jnp",)),
        ("tvm_ffi.from_dlpack(t)", "tvm_ffi.from_dlpack(t{s})", ("tvm_ffi",)),
    ]
    return [
        Row(
            "scaling",
            name,
            {"1 element": stmt.format(s="_1"), "64 MiB": stmt.format(s="_64m")},
            Target(1.1, "1 element", subject="64 MiB"),
            needs=needs,
        )
        for name, stmt, needs in exchanges
    ]


TENSOR_COLUMNS = ("dlinterop", "numpy", "float32")

# The dtypes NumPy holds, whose tolist() is timed beside NumPy's; and the types NumPy
# lacks (or holds through ml_dtypes), timed beside dlinterop's own float32 path.
TOLIST_NUMPY_DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
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
