"""The side-by-side runner's figure (--plot): its main rows as a bar chart."""

from benchmarks.rows.table import HEADINGS, SMALL

# The rows the plot shows: the everyday exchanges, one or two per section.
PLOTTED_ROWS = (
    "__dlpack__()",
    "from_dlpack(NumPy array)",
    "from_dlpack(torch tensor)",
    "np.from_dlpack(·)",
    "torch.from_dlpack(·)",
    "X.from_dlpack(X's tensor)",
    f"empty(({SMALL},), float32)",
    f"copy, {SMALL} float32",
)


def plot(rows, libraries, path, title):
    """A bar chart of the PLOTTED_ROWS found in `rows`, ns per call for every library that
    ran, on a log scale; written to `path` in the format its extension names (.svg, .png,
    .pdf). Needs matplotlib (the "docs" extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for name in PLOTTED_ROWS for row in rows if row.name == name and row.values]
    if not shown:
        raise SystemExit("--plot: none of the plotted rows was timed (see PLOTTED_ROWS)")
    columns = [c for c in libraries if any(c in row.values for row in shown)]
    height = 0.8 / len(columns)
    figure, axes = plt.subplots(figsize=(8, 0.5 + 0.42 * len(shown) * max(2, len(columns)) / 2))
    for k, column in enumerate(columns):
        positions = [i + (k - (len(columns) - 1) / 2) * height for i in range(len(shown))]
        values = [row.values.get(column, 0) for row in shown]
        bars = axes.barh(positions, values, height, label=HEADINGS.get(column, column))
        for bar, value in zip(bars, values):
            if value:
                axes.text(
                    value * 1.05,
                    bar.get_y() + bar.get_height() / 2,
                    f"{value:,.0f}",
                    va="center",
                    fontsize=6,
                )
    axes.set_yticks(range(len(shown)), [row.name for row in shown], fontsize=8)
    axes.invert_yaxis()
    axes.set_xscale("log")
    largest = max(value for row in shown for value in row.values.values())
    axes.set_xlim(right=largest * 4)  # room for the labels of the longest bars
    axes.set_xlabel("ns per call (median; log scale; shorter is faster)")
    axes.set_title(title, fontsize=8, pad=22)
    axes.legend(
        fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(columns), frameon=False
    )
    figure.tight_layout()
    figure.savefig(path, metadata={"Date": None} if path.endswith(".svg") else None)
    plt.close(figure)
