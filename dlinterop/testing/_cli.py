"""The command line: python -m dlinterop check NAME... (tables, --json, --markdown, --list,
--strict)."""

import argparse
import dataclasses
import json
import os
import sys

from dlinterop.testing._frameworks import FRAMEWORKS
from dlinterop.testing._model import DOCS, ROLES, RULES
from dlinterop.testing._run import _require_checkable, _selected, check

_CELL = {"pass": "pass", "fail": "FAIL", "n/a": "n/a"}


def _role_rows(reports):
    """(role, [(rule id, [cell per framework])]) for each role that any report checked;
    a cell is empty where that framework was not checked against the rule."""
    names = [r.framework for r in reports]
    cells = {(res.rule, r.framework): res for r in reports for res in r.results}
    for role in ROLES:
        rows = [
            (
                rule.id,
                [_CELL[cells[(rule.id, n)].result] if (rule.id, n) in cells else "" for n in names],
            )
            for rule in RULES
            if rule.role == role and any((rule.id, n) in cells for n in names)
        ]
        if rows:
            yield role, rows


def _markdown_section(role, names, rows):
    lines = [
        f"\n**{role}**\n",
        "| rule | " + " | ".join(names) + " |",
        "| --- |" + " --- |" * len(names),
    ]
    lines += [f"| `{rule}` | " + " | ".join(row) + " |" for rule, row in rows]
    return lines


def _text_section(role, names, rows):
    width = max(len(rule) for rule, _ in rows) + 2
    lines = [
        f"\n{role}s".upper(),
        f"{'rule':<{width}}" + "".join(f"{n:>18}" for n in names),
        "-" * (width + 18 * len(names)),
    ]
    lines += [f"{rule:<{width}}" + "".join(f"{cell:>18}" for cell in row) for rule, row in rows]
    return lines


def _table(reports, markdown):
    names = [r.framework for r in reports]
    section = _markdown_section if markdown else _text_section
    lines = []
    for role, rows in _role_rows(reports):
        lines += section(role, names, rows)
    lines.append("")
    for r in reports:
        c = r.counts()
        lines.append(f"{r.framework}: {c['pass']} passed, {c['fail']} failed, {c['n/a']} n/a")
    if any(r.failures() for r in reports):
        lines.append("\nfailures:")
    for r in reports:
        failures = r.failures()
        if len(failures) > 1 and len({res.reason for res in failures}) == 1:
            # One cause for them all (the framework cannot be set up): said once.
            lines.append(f"  {r.framework}, all {len(failures)} rules: {failures[0].reason}")
        else:
            lines += [f"  {res.framework} {res.rule}: {res.reason}" for res in failures]
    if any(r.failures() for r in reports):
        lines.append(f"\neach rule's entry: {DOCS}#the-rules")
    return "\n".join(lines)


def add_arguments(parser):
    """The checker's arguments, on `parser` (python -m dlinterop check's)."""
    parser.add_argument(
        "frameworks", nargs="*", metavar="NAME", help=f"{', '.join(FRAMEWORKS)}, or module:callable"
    )
    parser.add_argument("--role", choices=ROLES, help="check one role only")
    parser.add_argument("--rule", action="append", dest="rules", help="only this rule (repeat)")
    parser.add_argument(
        "--json", metavar="FILE", type=output_file, help="write the results as JSON"
    )
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--list", action="store_true", help="list the rules and stop")
    parser.add_argument(
        "--strict",
        metavar="NAME",
        action="append",
        default=[],
        help="exit 1 if NAME fails a rule (repeat; default: any failure "
        "of any framework only prints)",
    )


def output_file(path):
    """argparse's type for an output FILE (--json): a usage error, before anything runs,
    where it names a directory or a file in a directory that does not exist."""
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path!r} is a directory; name a file in it")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"no directory {folder!r} to write {path!r} in")
    return path


def write_json(path, document, command):
    """Writes `document` to `path`; False (said on standard error) where it cannot be."""
    try:
        with open(path, "w") as f:
            json.dump(document, f, indent=1)
    except OSError as e:
        print(f"{command}: error: cannot write {path!r}: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def run(args, parser):
    """Run the checker on parsed `args`; usage errors go through `parser`."""
    if args.list:
        for rule in RULES:
            print(f"{rule.id:<36} {rule.description}")
        return 0
    if not args.frameworks:
        parser.error("name at least one framework to check (or pass --list)")
    names = [spec.partition(":")[2] or spec for spec in args.frameworks]
    unchecked = sorted(set(args.strict) - set(names))
    if unchecked:
        parser.error(
            f"--strict {', '.join(unchecked)}: not among the frameworks checked "
            f"({', '.join(names)})"
        )
    try:  # every name and rule before anything runs (a framework takes a while)
        _selected(args.role, args.rules)
        for spec in args.frameworks:
            _require_checkable(spec)
    except (ValueError, ImportError) as e:
        parser.error(str(e))
    reports = [check(spec, args.role, args.rules) for spec in args.frameworks]
    print(_table(reports, args.markdown))
    written = not args.json or write_json(
        args.json,
        {"results": [dataclasses.asdict(res) for r in reports for res in r.results]},
        parser.prog,
    )
    failing = [r.framework for r in reports if r.framework in args.strict and not r]
    return 1 if failing or not written else 0


DESCRIPTION = "Check frameworks against DLPack 1.3 as producers and consumers."


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dlinterop check", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv), parser)
