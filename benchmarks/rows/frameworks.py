"""The frameworks' table: every framework that is no column of the other tables."""

from benchmarks.rows.table import Row, Target

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
