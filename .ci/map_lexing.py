"""Lexing and declarations of Cython source for .ci/check_map.py: comments and strings
removed (f-string expressions kept), logical lines, and the names a declaration binds."""

from __future__ import annotations

import re

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN = re.compile(r"[0-9][A-Za-z0-9_.]*|[A-Za-z_][A-Za-z0-9_]*")
STRING_START = re.compile(r"""([rRbBuUfFcC]{0,2})('''|\"\"\"|'|")""")
# Words of a C declaration that are never the name it declares.
DECL_WORDS = set(
    "cdef cpdef ctypedef public api readonly inline extern const volatile unsigned signed "
    "long short struct union enum packed nogil noexcept except with gil not None or object "
    "fused".split()
)
COMPOUND = {"if", "elif", "else", "for", "while", "try", "except", "finally", "with"}


# ---- lexing -------------------------------------------------------------------------------


def _string_end(text, i, quote):
    """Index just past the literal whose body starts at i and closes with `quote`."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if c == "\n" and len(quote) == 1:
            return i  # unterminated: stop at the line end, as the compiler would
        i += 1
    return n


def _blank(chunk):
    return "".join(c if c == "\n" else " " for c in chunk)


def strip_code(text):
    """text with comments and string literals blanked (newlines kept, so lines and columns
    stay), the expressions inside f-strings kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        m = STRING_START.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            prefix, quote = m.group(1).lower(), m.group(2)
            body = m.end()
            if "f" in prefix:
                kept, j = _fstring(text, body, quote)
                out.append(" " * (body - i) + kept)
            else:
                j = _string_end(text, body, quote)
                out.append(_blank(text[i:j]))
            i = j
            continue
        m = TOKEN.match(text, i)
        if m:  # whole, so that a name's last letter is no string prefix
            out.append(m.group(0))
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _fstring(text, i, quote):
    """(the f-string from i on with its literal parts blanked, index past it)."""
    out = []
    n = len(text)
    while i < n:
        if text.startswith(quote, i):
            out.append(" " * len(quote))
            return "".join(out), i + len(quote)
        c = text[i]
        if c == "\\":
            out.append(_blank(text[i : i + 2]))
            i += 2
        elif text.startswith("{{", i) or text.startswith("}}", i):
            out.append("  ")
            i += 2
        elif c == "{":
            out.append(" ")
            kept, i = _fexpression(text, i + 1, quote)
            out.append(kept)
        elif c == "\n" and len(quote) == 1:
            break
        else:
            out.append(_blank(c))
            i += 1
    return "".join(out), i


def _fexpression(text, i, quote):
    """One replacement field's expression kept (its format spec blanked, but for nested
    fields), from i up to and including its closing brace."""
    out = []
    depth = 0
    in_spec = False
    n = len(text)
    while i < n and not text.startswith(quote, i):
        c = text[i]
        if in_spec:
            if c == "{":
                out.append(" ")
                kept, i = _fexpression(text, i + 1, quote)
                out.append(kept)
                continue
            if c == "}":
                out.append(" ")
                return "".join(out), i + 1
            out.append(_blank(c))
            i += 1
            continue
        if c in "'\"":  # a string inside the expression
            m = STRING_START.match(text, i)
            j = _string_end(text, m.end(), m.group(2))
            out.append(_blank(text[i:j]))
            i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]" or (c == "}" and depth > 0):
            depth -= 1
        elif c == "}":
            out.append(" ")
            return "".join(out), i + 1
        elif depth == 0 and c == "!" and text[i + 1 : i + 2] != "=":
            in_spec = True
            out.append(" ")
            i += 1
            continue
        elif depth == 0 and c == ":":
            in_spec = True
            out.append(" ")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out), i


class Line:
    """A logical line: its text (continuation lines joined by spaces, so offsets map to
    nothing but tokens), the physical line it starts on, and its indentation."""

    def __init__(self, number, indent, text):
        self.number = number
        self.indent = indent
        self.text = text


def logical_lines(stripped):
    lines = []
    depth = 0
    current = None
    for number, raw in enumerate(stripped.split("\n"), start=1):
        body = raw.rstrip()
        continued = body.endswith("\\")
        if continued:
            body = body[:-1]
        if current is None:
            if not body.strip():
                continue
            current = Line(number, len(body) - len(body.lstrip()), body.strip())
        else:
            current.text += " " + body.strip()
        for c in body:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
        if depth == 0 and not continued:
            lines.append(current)
            current = None
    if current is not None:
        lines.append(current)
    return lines


# ---- declarations -------------------------------------------------------------------------


def _split_top(text, sep):
    """text split at each `sep` character outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _top_index(text, chars):
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c in chars and depth == 0:
            if c == "=" and (text[i + 1 : i + 2] == "=" or text[i - 1 : i] in "!<>=:"):
                continue
            return i
    return -1


def _last_ident(text):
    text = re.sub(r"\[[^\]]*\]", " ", text)
    names = [n for n in IDENT.findall(text) if n not in DECL_WORDS]
    return names[-1] if names else None


def declared_names(decl):
    """The names a C declaration (without cdef/ctypedef) declares: a function's name, a
    function pointer's name, or each variable of `TYPE a, *b, c[N] = ...`."""
    eq = _top_index(decl, "=")
    lhs = decl if eq < 0 else decl[:eq]
    paren = lhs.find("(")
    pointer = re.match(r"\(\s*\*+\s*([A-Za-z_]\w*)\s*\)", lhs[paren:]) if paren >= 0 else None
    if pointer:
        return [pointer.group(1)]
    if paren >= 0:
        name = _last_ident(lhs[:paren])
        return [name] if name else []
    parts = _split_top(lhs, ",")
    names = [_last_ident(parts[0])]
    for part in parts[1:]:
        m = IDENT.search(part.split("=")[0].split("[")[0])
        names.append(m.group(0) if m else None)
    return [n for n in names if n]


def signature_params(text):
    """Parameter names of `def name(params)` / `cdef T name(params)` / `lambda params:`."""
    start = text.find("(")
    if start < 0:
        return []
    depth, end = 0, len(text)
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                end = i
                break
    names = []
    for param in _split_top(text[start + 1 : end], ","):
        cut = min(
            (k for k in (_top_index(param, "="), _top_index(param, ":")) if k >= 0),
            default=len(param),
        )
        param = re.sub(r"\b(not|or)\s+None\b", " ", param[:cut])
        pointer = re.search(r"\(\s*\*+\s*([A-Za-z_]\w*)\s*\)", param)
        name = pointer.group(1) if pointer else _last_ident(param)
        if name:
            names.append(name)
    return names


def _bindings(text):
    """(names the statement binds in its scope, names bound only inside it): assignment
    targets, a for statement's targets, with/except ... as, imports and := are the first;
    comprehension targets and lambda parameters the second."""
    bound, inline = set(), set()
    for m in re.finditer(r"\bfor\s+([\w\s,()]+?)\s+in\b", text):
        (bound if m.start() == 0 else inline).update(IDENT.findall(m.group(1)))
    for m in re.finditer(r"\bas\s+([A-Za-z_]\w*)", text):
        bound.add(m.group(1))
    for m in re.finditer(r"([A-Za-z_]\w*)\s*:=", text):
        bound.add(m.group(1))
    for m in re.finditer(r"\blambda\b([^:]*):", text):
        inline.update(IDENT.findall(re.sub(r"=[^,]*", "", m.group(1))))
    m = re.match(r"(?:from\s+[\w.]+\s+c?import|c?import)\s+(.*)", text)
    if m:
        for part in m.group(1).strip("() ").split(","):
            part = part.strip()
            if part and part != "*":
                alias = re.search(r"\bas\s+(\w+)", part)
                bound.add(alias.group(1) if alias else part.split(".")[0])
    for target in _assignment_targets(text):
        for element in _split_top(target, ","):
            element = element.strip().strip("()*").strip()
            if IDENT.fullmatch(element):
                bound.add(element)
    return bound, inline


def _assignment_targets(text):
    """The targets of `a = b = value`, `a += value`, `a: T = value`."""
    targets = []
    rest = text
    while True:
        i = _top_index(rest, "=")
        if i < 0:
            break
        target = rest[:i].rstrip()
        if target.endswith(("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "@", "//", "**")):
            target = target.rstrip("+-*/%&|^<>@")
        if ":" in target:
            target = target.split(":")[0]
        if re.fullmatch(r"[\w\s,()*]+", target) and not re.search(r"\w\s*\(", target):
            targets.append(target)
        rest = rest[i + 1 :]
    return targets
