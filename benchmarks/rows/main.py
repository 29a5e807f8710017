"""The main table: export, import, consume, round trip, allocation and copy, one column per
library (benchmarks.rows.table.COLUMNS)."""

from benchmarks.rows.table import COLUMNS, FROM_DLPACK, OBJECT, SMALL, Row, Target, per_library


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
