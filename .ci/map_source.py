"""One Cython include file as .ci/check_map.py reads it: the names its top level defines and
the names it uses (map_lexing.py reads the text)."""

from __future__ import annotations

import re

from map_lexing import (
    COMPOUND,
    IDENT,
    TOKEN,
    _bindings,
    _split_top,
    _top_index,
    declared_names,
    logical_lines,
    signature_params,
    strip_code,
)

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
