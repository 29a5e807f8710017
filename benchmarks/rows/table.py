"""What every row of the runner's tables is: a Row, the Target some carry, the main table's
columns and their headings, and the names the small and large inputs have."""

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
