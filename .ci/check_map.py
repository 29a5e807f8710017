"""Checks the map of dlinterop's core: which include file uses which.

    python .ci/check_map.py [dlinterop/_core.pyx]

_core.pyx is one extension built from include files (`include "core/x.pxi"` lines, paths
relative to _core.pyx), in the order they build on each other. Each file opens with a
header that says what it provides and which earlier files it uses, and this script keeps
that header true. Exit status 0 when every file passes, 1 (with one line per problem) when
one does not, 2 when the files cannot be read.

The rules, per included file F:

(a) F uses only names defined in files included before it. A name defined in two included
    files is reported as such, wherever it is used: one module holds one of it.
(b) F's Uses line lists exactly the files whose names F uses: "lists X but does not use it",
    "uses Y (names: a, b) but does not list it".
(c) F opens with its header: the first line starts with "# Provides:", and a "# Uses:" line
    follows in the opening comment block.

The header format. The opening comment block is the lines from the top of the file that
start with "#". The Uses entry starts at the line that starts with "# Uses:" and continues
onto the following comment lines until a blank comment line ("#" alone), or the end of the
block, or a line that follows one whose text ends with a full stop (a new sentence). The
entry's text (the lines joined, without their "# ") is one sentence:

    Uses: ITEM, ITEM, ... .           or      Uses: nothing.
    Uses: ITEM, ITEM; a remark.

Each ITEM is a file name relative to F's directory (as the include line names it, less
the directory of F), optionally followed by a note in parentheses: "cuda.pxi (device
memory)". Commas and semicolons inside parentheses belong to the note. A ";" ends the list:
what follows is a remark the check does not read. "nothing" (with an optional note) says F
uses no other file.

What counts as defining a name: the top level of F (no indentation, and the bodies of
top-level if/for/while/try/with statements) binds it: def, cdef and cpdef functions
(inline ones too), cdef class and class, ctypedef (structs, enums, unions, fused types and
plain aliases, function pointer types included), cdef enum (named or not) and each of its
members, cdef struct and union, `cdef TYPE NAME` variables (several names on one line too),
`NAME = ...` assignments, for-loop targets, imports, and every name declared in a
`cdef extern from` block of F (functions, variables, types, enum members).

What counts as using a name: an identifier token of F, once comments and string literals
are removed (docstrings and the C code of `cdef extern from *:` blocks included; the
expressions inside f-strings are kept), that names something another included file
defines, except:
- attribute accesses (`.name`): the methods and fields of a cdef class cannot be resolved
  by name, so `t.foo()` never counts, whatever `foo` is;
- keyword argument and parameter-default names (`f(name=...)`);
- names that are local where they appear: parameters, names a function assigns or
  declares (cdef, for, with ... as, except ... as, import, lambda parameters; not those it
  declares global), and the fields and class attributes a class body declares;
- the names the module's own .pxd declares (for _core.pyx, _core.pxd: Tensor, DType,
  dtype_from_dl, ...) when the file defining them is included after F: the .pxd declares
  them ahead of every file, so that is neither an error nor a use of that file. Defined in
  an earlier file, they count like any other name.

Names defined by F itself, and names no included file defines (cimported, builtin), are
never uses of another file. Nested includes are not followed.
"""

from __future__ import annotations

import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN = re.compile(r"[0-9][A-Za-z0-9_.]*|[A-Za-z_][A-Za-z0-9_]*")
STRING_START = re.compile(r"""([rRbBuUfFcC]{0,2})('''|\"\"\"|'|")""")
INCLUDE = re.compile(r"""^[ \t]*include[ \t]+(['"])([^'"]+)\1""", re.MULTILINE)
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


# ---- one file ---------------------------------------------------------------------------


class Scope:
    """A function's or a class's names, or a block whose lines count as their parent's:
    the top level's compound statements, extern blocks, enum and struct bodies."""

    def __init__(self, kind, indent, parent):
        self.kind = kind  # def, class, module-block, extern, enum, struct
        self.indent = indent
        self.parent = parent
        self.names = set()  # locals (def), fields and class attributes (class)
        self.globals = set()
        # Whether what this block declares is module level (an extern block's, a top-level
        # enum's members).
        self.module_level = parent is None or (
            parent.kind in ("module-block", "extern", "enum") and parent.module_level
        )


class Source:
    """One file, parsed: what its top level defines, and each identifier it uses."""

    def __init__(self, path, text):
        self.path = path
        self.text = text
        self.defined = {}  # name -> line
        self.lines = logical_lines(strip_code(text))
        self.scope_of = []  # per logical line: the innermost scope, or None
        self.not_uses = []  # per logical line: names at a definition or bound there
        self._parse()

    def _define(self, name, number):
        self.defined.setdefault(name, number)
        self.not_uses[-1].add(name)

    def _parse(self):
        stack = []
        for line in self.lines:
            while stack and line.indent <= stack[-1].indent:
                stack.pop()
            scope = stack[-1] if stack else None
            self.scope_of.append(scope)
            self.not_uses.append(set())
            text = line.text
            module_level = scope is None or scope.module_level and scope.kind == "module-block"

            if scope is not None and scope.kind == "extern":
                self._declaration(
                    line, stack, scope, re.sub(r"^(cdef|ctypedef)\s+", "", text), extern=True
                )
                continue
            if scope is not None and scope.kind == "enum":
                self._members(text, line.number, scope)
                continue
            if scope is not None and scope.kind == "struct":
                self.not_uses[-1].update(declared_names(text))  # fields: types are uses
                continue

            bound, inline = _bindings(text)
            self.not_uses[-1].update(inline)
            m = re.match(r"(cdef|cpdef|ctypedef)\b\s*", text)
            if m:
                rest = text[m.end() :]
                while re.match(r"(public|api|readonly|inline|packed)\b", rest):
                    rest = rest.split(None, 1)[1] if " " in rest else ""
                self._declaration(
                    line,
                    stack,
                    scope,
                    rest,
                    extern=False,
                    keyword=m.group(1),
                    module_level=module_level,
                )
                continue
            m = re.match(r"(?:async\s+)?def\s+([A-Za-z_]\w*)|class\s+([A-Za-z_]\w*)", text)
            if m:
                name = m.group(1) or m.group(2)
                self._bind(name, line.number, scope, module_level)
                new = self._push(stack, "def" if m.group(1) else "class", line.indent)
                if m.group(1):
                    new.names.update(self._params(text))
                continue
            if re.match(r"(global|nonlocal)\b", text):
                if scope is not None:
                    scope.globals.update(IDENT.findall(text.split(None, 1)[1]))
                continue
            for name in bound:
                self._bind(name, line.number, scope, module_level)
            first = IDENT.match(text)
            if module_level and text.endswith(":") and first and first.group(0) in COMPOUND:
                self._push(stack, "module-block", line.indent)

    def _bind(self, name, number, scope, module_level):
        if module_level:
            self._define(name, number)
        elif scope is not None and scope.kind in ("def", "class"):
            scope.names.add(name)
            self.not_uses[-1].add(name)

    def _params(self, text):
        """A signature's parameter names, which are no uses on its line."""
        params = signature_params(text)
        self.not_uses[-1].update(params)
        return params

    def _push(self, stack, kind, indent):
        scope = Scope(kind, indent, stack[-1] if stack else None)
        stack.append(scope)
        return scope

    def _members(self, text, number, enum):
        for member in _split_top(text, ","):
            m = IDENT.match(member.strip())
            if m:
                if enum.module_level:
                    self._define(m.group(0), number)
                else:
                    self.not_uses[-1].add(m.group(0))

    def _declaration(self, line, stack, scope, body, extern, keyword="cdef", module_level=True):
        """A cdef/cpdef/ctypedef statement less its keyword, or a line of an extern block."""
        text = line.text
        if extern:
            module_level = scope.module_level
        local = scope is not None and scope.kind in ("def", "class") and not module_level
        if re.match(r"extern\b", body) or (body.strip() == ":" and not extern):
            self._push(stack, "extern", line.indent)  # cdef extern from ...: / cdef:
            return
        m = re.match(r"(?:final\s+)?class\s+([A-Za-z_]\w*)", body)
        if m and not extern:
            self._bind(m.group(1), line.number, scope, module_level)
            self._push(stack, "class", line.indent)
            return
        m = re.match(r"(enum|struct|union|fused|cppclass)\b\s*([A-Za-z_]\w*)?\s*(:?)\s*(.*)", body)
        if m:
            kind, name, colon, tail = m.groups()
            if name:
                if module_level:
                    self._define(name, line.number)
                elif local:
                    self._bind(name, line.number, scope, False)
            if colon:
                block = self._push(stack, "enum" if kind == "enum" else "struct", line.indent)
                if tail:  # enum: A, B on one line
                    if kind == "enum":
                        self._members(tail, line.number, block)
                    stack.pop()
            return
        names = declared_names(body)
        eq = _top_index(body, "=")
        lhs = body if eq < 0 else body[:eq]
        paren = lhs.find("(")
        pointer = paren >= 0 and re.match(r"\(\s*\*", lhs[paren:])
        if paren >= 0 and not pointer and keyword != "ctypedef":
            params = self._params(lhs)  # a function
            if text.endswith(":") and not extern:
                self._push(stack, "def", line.indent).names.update(params)
        elif pointer:
            self._params(lhs[lhs.index(")", paren) + 1 :])  # a function pointer's parameters
        for name in names:
            if module_level:
                self._define(name, line.number)
            elif local:
                self._bind(name, line.number, scope, False)

    def _is_local(self, scope, name):
        innermost = True
        while scope is not None:
            if scope.kind == "def":
                if name in scope.globals:
                    return False
                if name in scope.names:
                    return True
                innermost = False
            elif scope.kind == "class":
                if innermost and name in scope.names:
                    return True
                innermost = False
            scope = scope.parent
        return False

    def uses(self, candidates):
        """{name: first line} of the names in `candidates` this file uses."""
        found = {}
        for line, scope, not_uses in zip(self.lines, self.scope_of, self.not_uses):
            text = line.text
            for m in TOKEN.finditer(text):
                name = m.group(0)
                if name not in candidates or name in not_uses or name in found:
                    continue
                before = text[: m.start()].rstrip()
                after = text[m.end() :].lstrip()
                if before.endswith("."):
                    continue  # an attribute
                if before.endswith(("(", ",")) and re.match(r"=(?!=)", after):
                    continue  # a keyword argument
                if self._is_local(scope, name):
                    continue
                found[name] = line.number
        return found


# ---- the header -------------------------------------------------------------------------


def read_header(text):
    """(listed files with the line of the Uses entry, problems) from a file's header."""
    problems = []
    block = []
    for raw in text.split("\n"):
        if not raw.startswith("#"):
            break
        block.append(raw)
    if not block or not block[0].startswith("# Provides:"):
        problems.append((1, 'does not open with a "# Provides:" line'))
    start = next((i for i, raw in enumerate(block) if raw.startswith("# Uses:")), None)
    if start is None:
        problems.append((1, 'has no "# Uses:" line in its opening comment block'))
        return None, 1, problems
    parts = [block[start][len("# Uses:") :].strip()]
    for raw in block[start + 1 :]:
        if parts[-1].endswith(".") or raw.strip() == "#":
            break
        parts.append(raw[1:].strip())
    sentence = " ".join(parts)
    number = start + 1
    if not sentence.endswith("."):
        problems.append((number, "its Uses entry does not end with a full stop"))
        return None, number, problems
    sentence = sentence[:-1]
    items = _split_top(sentence, ";")[0]
    listed = []
    for item in _split_top(items, ","):
        item = item.strip()
        m = re.fullmatch(r"([^\s()]+)(\s*\(.*\))?", item, re.DOTALL)
        if m is None or not (m.group(1).endswith(".pxi") or m.group(1) == "nothing"):
            problems.append(
                (
                    number,
                    f"cannot read {item!r} in its Uses entry (a file name, "
                    "optionally with a note in parentheses, or nothing)",
                )
            )
            continue
        listed.append(m.group(1))
    if "nothing" in listed:
        if len(listed) > 1:
            problems.append((number, "its Uses entry says nothing and names files"))
        listed = []
    return listed, number, problems


# ---- the module ---------------------------------------------------------------------------


def _shown(path):
    """path as messages give it: relative to the working directory where that is shorter."""
    relative = os.path.relpath(path)
    return (relative if len(relative) < len(path) else path).replace(os.sep, "/")


def check(pyx_path):
    """(the problems found, one line of text each; the files _core.pyx includes)."""
    base = os.path.dirname(os.path.abspath(pyx_path))
    pyx_name = os.path.basename(pyx_path)
    with open(pyx_path, encoding="utf-8") as f:
        includes = [m.group(2) for m in INCLUDE.finditer(f.read())]
    order = {inc: i for i, inc in enumerate(includes)}
    sources = {}
    for inc in includes:
        with open(os.path.join(base, inc), encoding="utf-8") as f:
            sources[inc] = Source(inc, f.read())
    shown = {inc: _shown(os.path.join(base, inc)) for inc in includes}

    pxd_path = os.path.splitext(pyx_path)[0] + ".pxd"
    forward = set()
    if os.path.exists(pxd_path):
        with open(pxd_path, encoding="utf-8") as f:
            forward = set(Source(pxd_path, f.read()).defined)

    definers = {}
    for inc in includes:
        for name in sources[inc].defined:
            definers.setdefault(name, []).append(inc)

    problems = []
    for name, files in sorted(definers.items()):
        if len(files) > 1:
            where = ", ".join(f"{shown[f]}:{sources[f].defined[name]}" for f in files)
            problems.append(
                f"{name} is defined in {len(files)} files ({where}); the module holds one"
            )

    for inc in includes:
        src = sources[inc]
        here = os.path.dirname(inc)
        used_files = {}
        candidates = {n for n in definers if n not in src.defined}
        for name, number in sorted(src.uses(candidates).items(), key=lambda kv: kv[1]):
            files = definers[name]
            if len(files) > 1:
                problems.append(
                    f"{shown[inc]}:{number}: uses {name}, which {len(files)} files "
                    f"define ({', '.join(shown[f] for f in files)})"
                )
            elif order[files[0]] > order[inc]:
                if name not in forward:
                    problems.append(
                        f"{shown[inc]}:{number}: uses {name}, defined in "
                        f"{shown[files[0]]}, which {pyx_name} includes after it"
                    )
            else:
                used_files.setdefault(files[0], []).append(name)

        listed, number, header_problems = read_header(src.text)
        where = f"{shown[inc]}:{number}"
        for line, problem in header_problems:
            problems.append(f"{shown[inc]}:{line}: {problem}")
        if listed is None:
            continue
        resolved = {}
        for name in listed:
            path = os.path.normpath(os.path.join(here, name)).replace(os.sep, "/")
            if path == inc:
                problems.append(f"{where}: lists itself")
            elif path not in order:
                problems.append(f"{where}: lists {name}, which {pyx_name} does not include")
            else:
                resolved[path] = name
        for path, name in resolved.items():
            if path not in used_files:
                problems.append(f"{where}: lists {name} but does not use it")
        for path in sorted(used_files, key=order.get):
            if path not in resolved:
                name = os.path.relpath(path, here or ".").replace(os.sep, "/")
                problems.append(
                    f"{where}: uses {name} (names: {', '.join(used_files[path])}) "
                    "but does not list it"
                )
    return problems, includes


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    pyx = (
        argv[0]
        if argv
        else os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dlinterop", "_core.pyx"
        )
    )
    try:
        problems, includes = check(pyx)
    except OSError as e:
        print(f"check_map: {e}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if problems:
        print(
            f"check_map: {len(problems)} problem(s) in the map of the {len(includes)} files "
            f"{_shown(pyx)} includes (see the docstring of .ci/check_map.py)"
        )
        return 1
    print(f"check_map: the map of the {len(includes)} files {_shown(pyx)} includes is true")
    return 0


if __name__ == "__main__":
    sys.exit(main())
