"""Sphinx configuration of dlinterop's documentation: Markdown pages (MyST), theme furo.

Build it with `bash docs/build.sh OUTDIR`, or, once docs/_generated/benchmarks.svg exists,
`python -P -m sphinx -W --keep-going -b html docs OUTDIR` from the repository root.
The API reference documents the INSTALLED dlinterop (`pip install ".[docs]"` first): the
checkout's own dlinterop/ folder has no compiled modules, so it is taken off sys.path here.
"""

import os
import re
import sys

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

_repo = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _repo]

import dlinterop  # noqa: E402  (after the checkout left sys.path)

project = "dlinterop"
author = "The dlinterop developers"
copyright = "The dlinterop developers, Apache License 2.0"
release = dlinterop.__version__
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/*.md"]
# Headings get anchors as on GitHub (concepts.md#views-and-values works on both).
myst_heading_anchors = 3
# Fences without a language are program output, not Python.
highlight_language = "text"

html_theme = "furo"
html_title = f"dlinterop {release}"

autodoc_default_options = {"member-order": "groupwise"}
autodoc_typehints = "signature"
# The package's docstrings are plain text with Markdown's `code` spans: render those as code.
default_role = "literal"

_STAR_ARGS = re.compile(r"(?<![\w`*\\])(\*{1,2})(?=[A-Za-z_]\w*(?![\w*]))")


def _plain_text_docstring(app, what, name, obj, options, lines):
    """`*args` and `**kwargs` in a plain-text docstring are Python, not the start of reST
    emphasis (which has a closing star, and is left alone)."""
    for i, line in enumerate(lines):
        parts = re.split(r"(`[^`]*`)", line)  # code spans stay as they are
        lines[i] = "".join(
            part
            if part.startswith("`")
            else _STAR_ARGS.sub(lambda m: "\\*" * len(m.group(1)), part)
            for part in parts
        )


class DTypes(SphinxDirective):
    """`dlinterop-dtypes`: an entry for each DType object in dlinterop.__all__, from the
    object itself (so the reference never drifts from the package)."""

    def run(self):
        text = []
        for name in dlinterop.__all__:
            dt = getattr(dlinterop, name)
            if not isinstance(dt, dlinterop.DType):
                continue
            lanes = f", {dt.lanes} lanes" if dt.lanes != 1 else ""
            text += [
                f".. py:data:: {name}",
                "   :module: dlinterop",
                "   :type: DType",
                "",
                f'   ``dl.dtype("{dt.name}")``: DLPack type code {dt.code}, '
                f"{dt.bits} bits{lanes}; itemsize {dt.itemsize}.",
                "",
            ]
        container = nodes.section()
        self.state.nested_parse(
            StringList(text, source="dlinterop.__all__"), self.content_offset, container
        )
        return container.children


def _check_api_is_complete(app, env):
    """A name of dlinterop.__all__ without an entry in the API reference is a warning, and
    so an error under -W."""
    from sphinx.util import logging

    documented = set(env.get_domain("py").objects)
    for name in dlinterop.__all__:
        if f"dlinterop.{name}" not in documented:
            logging.getLogger(__name__).warning(
                "dlinterop.%s (in dlinterop.__all__) is missing from the API reference", name
            )


def setup(app):
    app.add_directive("dlinterop-dtypes", DTypes)
    app.connect("autodoc-process-docstring", _plain_text_docstring)
    app.connect("env-updated", _check_api_is_complete)
