"""The side-by-side runner's report: a table per section (values, the ratio to the best
peer, each target and whether it is met), and each row summarised as data for --json."""

from benchmarks.rows.table import HEADINGS, PEERS, SMALL

SECTION_TITLES = {
    "export": f"Export: column = whose tensor is exported ({SMALL} float32 elements unless said)",
    "import": "Import: column = whose from_dlpack takes the row's input",
    "consume": "Consumers: row = consumer, column = whose tensor it takes",
    "round trip": "Round trips: column = library X whose tensor goes out and comes back",
    "allocation": "Allocation: column = library",
    "copy": "Copies: column = library",
    "exchange": "C exchange API: dlinterop importing a torch tensor through torch's table and "
    "through its __dlpack__, beside torch and tvm-ffi",
    "way out": "The way out: a tensor handed back as the caller's type, and a trivial kernel "
    "(one float32 tensor in, a new one of the caller's type out)",
    "frameworks": "Every other framework: dl.from_dlpack of its array beside its own import of "
    "it, and its import of a dl.Tensor beside that of its own array",
    "tensor": "The everyday Tensor beside NumPy's ndarray (types NumPy lacks: beside dlinterop's "
    "float32 tolist of as many elements)",
    "scaling": "Size scaling: dlinterop exchanges at 1 element and at 64 MiB (float32)",
    "import time": "Import time (ms, fresh subprocess) and RSS growth (KiB) over round trips",
    "processes": "Across processes (ms per round trip, median): column = what is sent",
}


def format_value(value, unit):
    if value is None:
        return "—"
    if unit == "ns":
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def best_peer(row):
    peers = {c: v for c, v in row.values.items() if c in PEERS}
    if not peers:
        return None, None
    column = min(peers, key=peers.get)
    return column, peers[column]


def summarise(row):
    """The row as data: values, ratio to the best peer, target verdict."""
    peer, peer_value = best_peer(row)
    mine = row.values.get("dlinterop")
    ratio = mine / peer_value if mine is not None and peer_value else None
    measured, met = row.target.evaluate(row.values) if row.target else (None, None)
    return {
        "section": row.section,
        "name": row.name,
        "unit": row.unit,
        "statements": row.statements,
        "values": row.values,
        "errors": row.errors,
        **row.extra,
        "best_peer": peer,
        "ratio_to_best_peer": ratio,
        "target": None
        if row.target is None
        else {
            "limit": row.target.limit,
            "reference": row.target.reference,
            "subject": row.target.subject,
            "strict": row.target.strict,
            "describe": row.target.describe(),
            "measured": measured,
            "met": met,
        },
    }


NAME_WIDTH = 50


def print_table(rows, columns, title, out, with_ratio=True):
    name_width = NAME_WIDTH
    header = f"{'':<{name_width}}" + "".join(f"{HEADINGS.get(c, c):>11}" for c in columns)
    if with_ratio:
        header += f"{'ratio':>8}"
    header += f"  {'target':<16}{'value':>7}  met"
    print(f"\n{title}", file=out)
    print(header, file=out)
    print("-" * len(header), file=out)
    for row in rows:
        line = f"{row.name:<{name_width}}"
        for column in columns:
            if column in row.values:
                line += f"{format_value(row.values[column], row.unit):>11}"
            elif column in row.statements:
                line += f"{'n/a':>11}"  # it raised: see "errors" in the JSON
            else:
                line += f"{'—':>11}"  # nothing comparable
        summary = summarise(row)
        if with_ratio:
            ratio = summary["ratio_to_best_peer"]
            line += f"{'' if ratio is None else f'{ratio:.2f}':>8}"
        target = summary["target"]
        if target:
            measured = target["measured"]
            verdict = {True: "yes", False: "MISSED", None: "n/a"}[target["met"]]
            if measured is None:
                shown = ""
            elif target["reference"] is None:
                shown = format_value(measured, row.unit)
            else:
                shown = f"{measured:.2f}"
            line += f"  {target['describe']:<16}{shown:>7}  {verdict}"
        print(line.rstrip(), file=out)
