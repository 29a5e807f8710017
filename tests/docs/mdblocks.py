"""The fenced blocks of the project's Markdown pages, and the markers around them.

Shared by tests/tools/test_docs.py (which documents the conventions) and
tests/docs/cython_guide.py; the standard library alone, so the guide's script runs anywhere.
"""

import re

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")
NEEDS_MARK = re.compile(r"^<!--\s*needs:\s*(\S+)\s*-->$")
FILE_MARK = re.compile(r"^`([^`\s]+)`:$")
EXPECTED = re.compile(r"^\s*#>(?: (.*))?$")


def blocks(text):
    """[(language, body, needs, file)] of a Markdown text's fenced blocks, in order: needs is
    X for a block after `<!-- needs: X -->`, file is PATH for a block after a line
    "`PATH`:" alone (blank lines between allowed), else None."""
    out = []
    lines = text.splitlines()
    i = 0
    previous = ""  # the last non-blank line outside fences
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        if j == len(lines):
            raise ValueError(f"unclosed fence at line {i + 1}")
        need = NEEDS_MARK.match(previous)
        path = FILE_MARK.match(previous)
        out.append(
            (
                info,
                "\n".join(lines[i + 1 : j]) + "\n",
                need.group(1) if need else None,
                path.group(1) if path else None,
            )
        )
        previous = ""
        i = j + 1
    return out


def expected_output(code):
    """The lines a block says it prints: each `#> TEXT` line's TEXT (`#>` alone: "")."""
    return [m.group(1) or "" for m in map(EXPECTED.match, code.splitlines()) if m]
