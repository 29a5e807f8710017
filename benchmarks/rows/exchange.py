"""The C exchange API's table: dlinterop importing a torch tensor through torch's table."""

from benchmarks.rows.table import Row, Target

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
