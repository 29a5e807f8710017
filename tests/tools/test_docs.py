"""Every example in README.md and docs/*.md runs, and prints what the page says it prints.

Conventions of the Markdown (docs/, README.md) that this file reads:

* A fenced block opened with exactly ```` ```python ```` is an example. A page's examples run,
  in page order, as ONE script (later blocks use what earlier ones made), in a subprocess
  whose working directory is an empty temporary folder.
* Expected output: a line ``#> TEXT`` (a comment, so the block still runs as written) stands
  for one line TEXT that the script prints (``#>`` alone: an empty line). The script's
  standard output must be exactly these lines, in order: a ``print`` without its ``#>``
  lines fails, and so does a ``#>`` line nothing printed. Checks that need no output are
  ``assert`` statements.
* A page whose examples import an optional peer (OPTIONAL_PEERS: NumPy, PyTorch, JAX, Dask,
  Ray, ...) that is not installed is skipped, naming it, as the suite's other interop tests
  skip (the version matrix and free-threaded runs install fewer peers). CI's main job
  installs them all, so there every page runs; a missing module that is not a peer fails.
* ``<!-- needs: cuda -->`` on the line before a fence (blank lines between are allowed)
  marks a block that needs a usable CUDA device. The page then runs twice: without its
  marked blocks (always), and whole (id ``PAGE[cuda]``), which is skipped with that reason
  only when ``dlinterop.cuda.is_available()`` is false. No other ``needs:`` value exists: an
  unknown one fails, so the marker cannot hide a block that merely fails. Peers are no
  reason for a marker: CI's main job installs them (see the rule above).
* A line ```` `PATH`: ```` alone (a file name in backquotes, then a colon) on the line before
  a fence says that the block is the file PATH the reader writes. Such blocks are not run
  here: only docs/cython.md has them, and tests/docs/cython_guide.py writes them out and runs
  that page's ```` ```bash ```` blocks, literally, in a fresh virtualenv
  (``test_cython_guide`` below, with the wheel named by DLINTEROP_WHEEL).
* Blocks of other languages (``bash`` elsewhere, ``cython`` without a file name, plain
  fences for output) are shown, not run.
"""

import ast
import importlib.util
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(REPO, "docs")
GUIDE_SCRIPT = os.path.join(REPO, "tests", "docs", "cython_guide.py")


def _load_mdblocks():
    spec = importlib.util.spec_from_file_location(
        "docs_mdblocks", os.path.join(REPO, "tests", "docs", "mdblocks.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_mdblocks = _load_mdblocks()
blocks, expected_output = _mdblocks.blocks, _mdblocks.expected_output
OPTIONAL_PEERS = {
    "numpy",
    "torch",
    "jax",
    "jaxlib",
    "dask",
    "distributed",
    "ray",
    "cupy",
    "ml_dtypes",
    "tvm_ffi",
    "array_api_strict",
    "pyarrow",
    "mlx",
    "warp",
    "cuda",
    "nanobind",
}
NEEDS = {"cuda": "needs a usable CUDA device: dlinterop.cuda.is_available() is False"}


def pages():
    return ["README.md", "CHANGELOG.md", "CONTRIBUTING.md"] + sorted(
        os.path.join("docs", n) for n in os.listdir(DOCS) if n.endswith(".md")
    )


def read(page):
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        return f.read()


def examples(page):
    return [b for b in blocks(read(page)) if b[0] == "python" and b[3] is None]


def cases():
    out = []
    for page in pages():
        found = examples(page)
        if not found:
            continue
        out.append(pytest.param(page, None, id=page))
        for need in sorted({b[2] for b in found if b[2]}):
            out.append(pytest.param(page, need, id=f"{page}[{need}]"))
    return out


def missing_peers(code):
    """The optional peers the code imports that are not installed here."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []  # let the run fail and show it
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return sorted(n for n in names & OPTIONAL_PEERS if importlib.util.find_spec(n) is None)


def usable(need):
    if need == "cuda":
        import dlinterop.cuda

        return dlinterop.cuda.is_available()
    raise AssertionError(f"unknown marker <!-- needs: {need} -->: known are {sorted(NEEDS)}")


@pytest.mark.parametrize("page,need", cases())
def test_page_examples_run(page, need, tmp_path):
    found = examples(page)
    for b in found:
        if b[2] is not None and b[2] not in NEEDS:
            pytest.fail(f"{page}: unknown marker <!-- needs: {b[2]} -->; known: {sorted(NEEDS)}")
    if need is not None and not usable(need):
        pytest.skip(f"{page}: {NEEDS[need]}")
    chosen = [b[1] for b in found if b[2] is None or b[2] == need]
    code = "\n".join(chosen)
    absent = missing_peers(code)
    if absent:
        pytest.skip(f"{page}: its examples use {', '.join(absent)}, not installed here")
    script = tmp_path / "page_examples.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (
        f"{page}: the examples fail (exit {proc.returncode})\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    printed = [line.rstrip() for line in proc.stdout.splitlines()]
    assert printed == [line.rstrip() for line in expected_output(code)], (
        f"{page}: printed output differs from the page's #> lines"
    )


def test_the_parser_reads_the_conventions():
    text = "\n".join(
        [
            "```python",
            "print(1)",
            "#> 1",
            "```",
            "",
            "<!-- needs: cuda -->",
            "",
            "```python",
            "x = 2",
            "```",
            "`pkg/setup.py`:",
            "```python",
            "setup()",
            "```",
            "~~~bash",
            "echo hi",
            "~~~",
        ]
    )
    got = blocks(text)
    assert got == [
        ("python", "print(1)\n#> 1\n", None, None),
        ("python", "x = 2\n", "cuda", None),
        ("python", "setup()\n", None, "pkg/setup.py"),
        ("bash", "echo hi\n", None, None),
    ]
    assert expected_output("print(1)\n#> 1\n    #>\n#>  two\n") == ["1", "", " two"]
    with pytest.raises(ValueError, match="unclosed"):
        blocks("```python\nx = 1\n")
    with pytest.raises(AssertionError, match="unknown marker"):
        usable("gpu")
    assert missing_peers("import os\nimport numpy as np\nfrom no_such_peer import x\n") == []
    absent = missing_peers("import cupy\nfrom torch import nn\n")
    assert set(absent) <= {"cupy", "torch"}
    if importlib.util.find_spec("cupy") is None:
        assert "cupy" in absent


def test_only_the_cython_guide_has_file_blocks():
    """File blocks are run by tests/docs/cython_guide.py, which reads docs/cython.md alone: a
    file block anywhere else would be run by nothing."""
    for page in pages():
        files = [b[3] for b in blocks(read(page)) if b[3] is not None]
        if page == os.path.join("docs", "cython.md"):
            assert len(files) >= 4, files
        else:
            assert files == [], f"{page} has file blocks {files}, which no test runs"


def test_relative_links_resolve():
    """Every relative link of README.md and the docs names a file that exists (and, for a
    page's own #anchor, a heading)."""
    link = re.compile(r"\]\(([^)\s]+)\)")
    for page in pages():
        base = os.path.dirname(os.path.join(REPO, page))
        for target in link.findall(read(page)):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else os.path.join(REPO, page)
            assert os.path.exists(full), f"{page}: link to {target}: no such file"
            if anchor and full.endswith(".md"):
                with open(full, encoding="utf-8") as f:
                    slugs = {slug(h) for h in re.findall(r"^#+ (.+)$", f.read(), re.M)}
                assert anchor in slugs, f"{page}: link to {target}: no such heading"


def test_recipes_with_config_settings_upgrade_pip_first():
    """pip's -C (--config-settings) arrived in pip 23.1, after the pip that Python 3.10 ships
    (23.0): a recipe that passes -C to pip upgrades pip in the lines before."""
    config = re.compile(r"\bpip install\b.*\s-C\S")
    for page in pages():
        for _, body, _, _ in blocks(read(page)):
            lines = body.splitlines()
            for i, line in enumerate(lines):
                if config.search(line):
                    before = "\n".join(lines[:i])
                    assert "pip install --upgrade pip" in before, f"{page}: {line!r}"


def slug(heading):
    """The anchor GitHub and MyST (myst_heading_anchors) give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_cython_guide():
    """docs/cython.md, followed literally in a fresh virtualenv (tests/docs/cython_guide.py):
    the wheel is installed there, then the page's bash commands run, after its files are
    written, with their output checked. It needs a built wheel: CI sets DLINTEROP_WHEEL."""
    wheel = os.environ.get("DLINTEROP_WHEEL")
    if not wheel:
        pytest.skip(
            "DLINTEROP_WHEEL is not set: it names the dlinterop wheel to install in "
            "the guide's fresh virtualenv (.ci/run sets it and runs this test)"
        )
    assert os.path.isfile(wheel), f"DLINTEROP_WHEEL={wheel}: no such file"
    proc = subprocess.run(
        [sys.executable, GUIDE_SCRIPT, "--wheel", wheel],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"


def test_the_cli_page_names_every_command_and_option():
    """docs/cli.md against `python -m dlinterop [COMMAND] --help`: each command has a
    section, and every option the help lists is on the page, and the other way round."""
    page = read(os.path.join("docs", "cli.md"))

    def help_text(*words):
        proc = subprocess.run(
            [sys.executable, "-m", "dlinterop", *words, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=DOCS,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    top = help_text()
    commands = re.findall(r"^ {4}(\w+) {2,}", top, re.M)
    assert "info" in commands and "check" in commands, top
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", top))
    for command in commands:
        assert f"## `{command}`" in page, f"docs/cli.md has no section for {command}"
        options |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text(command)))
    on_page = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", page))
    assert options - {"--help"} <= on_page, f"not on docs/cli.md: {options - on_page}"
    assert on_page <= options, f"on docs/cli.md but in no --help: {on_page - options}"


def test_every_rule_has_its_entry_in_the_conformance_page():
    """Each rule id, the checker's (dlinterop.testing.RULES) and the pytest plugin's own,
    has its heading in docs/conformance.md, where the plugin's reports link, with the
    rule's description; each rule the plugin checks per call says what breaks it there."""
    from dlinterop.testing import RULES, _call_rules, _model

    page = read(os.path.join("docs", "conformance.md"))
    entries = dict(re.findall(r"^### `([\w.-]+)`\n\n(.+?)(?=\n### |\Z)", page, re.M | re.S))
    described = {r.id: r.description for r in RULES} | _call_rules.CALL_ONLY_RULES
    assert set(entries) == set(described), set(entries) ^ set(described)
    for rule_id, text in entries.items():
        assert _model.link(rule_id).endswith("#" + slug(f"`{rule_id}`")), rule_id
        first = text.strip().split("\n\n")[0].replace("`", "")
        assert first == f"Rule: {described[rule_id]}.", rule_id
        if rule_id in _call_rules.CALL_RULES:
            assert "\n\n**Per call**: " in text, f"{rule_id}: no Per call line"
    assert _model.link("producer.device").startswith(_model.DOCS + "#")
