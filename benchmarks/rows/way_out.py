"""The way out's table: tensors handed back as the caller's type, and a trivial kernel."""

from benchmarks.rows.table import Row, Target

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
