"""The scaling table: every exchange at 1 element beside the same at 64 MiB."""

from benchmarks.rows.table import Row, Target


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
