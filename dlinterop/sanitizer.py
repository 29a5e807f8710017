"""dlinterop's lifetime sanitizer: where DLPack tensors were made, and what outlived them.

Off by default, and free while off (each hook on the export, import and allocation paths
is one load and a branch). Turn it on for a whole process with the environment variable
``DLINTEROP_SANITIZE=1`` (read when dlinterop is imported; the still-live records are then
listed at exit), or for a block of code::

    import dlinterop.sanitizer as sanitizer

    with sanitizer.sanitize() as session:
        run_the_code_under_suspicion()
    print(session.format_live())      # what it exported or imported and never released
    assert not session.reports()      # double releases, double consumes, ...

While on, dlinterop records the Python stack where each capsule (or managed tensor) it
exports, each managed tensor it imports and each host buffer it allocates was made, and
where each was released, and:

- lists the exports still live and the imports never released, with those stacks
  (:func:`live`, :func:`format_live`, and at exit under ``DLINTEROP_SANITIZE``), as
  tracemalloc lists allocations;
- reports a deleter of dlinterop's export called twice, a capsule consumed twice and a
  release after interpreter shutdown, with both stacks, instead of freeing twice or
  touching a finalised runtime (:func:`reports`; each is also written to stderr at once);
- quarantines released host buffers: their pages are made inaccessible for a while instead
  of freed, so that a consumer that kept a pointer faults at the bad access, and the fault
  is reported with the buffer's allocation and release stacks before the process ends as
  it would have (Python's faulthandler, when on, prints its traceback too).

Only what is made or released while the sanitizer runs is recorded; buffers allocated
before it started are freed as usual. Docs: docs/finding-bugs.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys

from dlinterop import _core

__all__ = [
    "Record",
    "Session",
    "disable",
    "enable",
    "format_live",
    "is_enabled",
    "live",
    "notes",
    "report_count",
    "reports",
    "sanitize",
]

#: How many released records, and how many bytes of released buffers, stay quarantined
#: before the oldest is freed, and the deepest stack kept per record (the environment
#: variables DLINTEROP_SANITIZE_QUARANTINE, in MiB, and DLINTEROP_SANITIZE_FRAMES set them
#: under DLINTEROP_SANITIZE).
DEFAULT_QUARANTINE_COUNT = 4096
DEFAULT_QUARANTINE_BYTES = 256 << 20
DEFAULT_FRAMES = 16


@dataclasses.dataclass(frozen=True)
class Record:
    """Something dlinterop made or took while the sanitizer ran, and has not released."""

    kind: str  # "export" (a capsule or managed tensor dlinterop handed out), "import"
    # (a producer's managed tensor dlinterop holds), "buffer" (host memory it allocated) or
    # "watched" (a foreign managed tensor whose deleter calls are counted: one dlinterop
    # imported, or one the pytest plugin saw handed to a consumer)
    address: int  # the managed struct's, or the buffer's mapping
    nbytes: int  # a buffer's size (0 for the others)
    what: str  # the capsule's name, or how it crossed
    stack: str  # where it was made, most recent call last

    def __str__(self):
        what = f" {self.what}" if self.what else ""
        size = f", {self.nbytes} bytes" if self.kind == "buffer" else ""
        return f"{self.kind}{what} at {self.address:#x}{size}, made at:\n{self.stack}"


def enable(
    *,
    quarantine_count: int = DEFAULT_QUARANTINE_COUNT,
    quarantine_bytes: int = DEFAULT_QUARANTINE_BYTES,
    frames: int = DEFAULT_FRAMES,
) -> None:
    """Starts recording (again, with these limits, if it runs already)."""
    if quarantine_count < 0 or quarantine_bytes < 0 or frames < 1:
        raise ValueError("quarantine limits must be >= 0 and frames >= 1")
    _core._sanitizer_start(quarantine_count, quarantine_bytes, frames)


def disable() -> None:
    """Stops recording and frees the quarantine. What is still live stays recorded until
    it is released (so that its release is still checked)."""
    _core._sanitizer_stop()


def is_enabled() -> bool:
    return _core._sanitizer_recording()


def live(kinds: tuple[str, ...] = ("export", "import")) -> list[Record]:
    """The records of these kinds not released yet: by default the exports still live and
    the imports never released ("buffer" adds the host buffers)."""
    return [Record(*row) for row in _core._sanitizer_live() if row[0] in kinds]


def format_live(kinds: tuple[str, ...] = ("export", "import")) -> str:
    """:func:`live` as text, one block per record (empty when nothing is live)."""
    records = live(kinds)
    if not records:
        return ""
    head = f"dlinterop sanitizer: {len(records)} still live\n"
    return head + "".join(f"{i}. {r}" for i, r in enumerate(records, 1))


def notes() -> list[str]:
    """What the sanitizer said it cannot watch, once each, as it said it (also written to
    its report stream): a producer type whose memory is not dlinterop's, the budget of
    mappings reached."""
    return _core._sanitizer_notes()


def _report_to(fd: int, notes: bool = True) -> None:
    """Reports are written to a duplicate of `fd` from now on, instead of the stderr (fd 2)
    of the time the sanitizer was first enabled (the pytest plugin's: the stderr pytest
    saved before capturing fd 2); notes too, unless notes=False (the plugin lists them in
    its summary)."""
    _core._sanitizer_report_to(fd, notes)


def report_count() -> int:
    """How many reports were made so far in this process (clearing does not lower it): a
    mark for reports(since=...)."""
    return _core._sanitizer_report_total()


def reports(*, since: int | None = None, clear: bool = False) -> list[str]:
    """The reports kept (each also went to stderr when it was made): all of them, or those
    made after report_count() returned `since`; clear=True then empties the list."""
    texts = _core._sanitizer_reports(clear)
    if since is None:
        return texts
    newer = report_count() - since
    if newer <= 0:
        return []
    return texts[max(0, len(texts) - newer) :]


@dataclasses.dataclass
class Session:
    """What :func:`sanitize` yields: the reports made and the records still live."""

    _start: int  # report_count() when the block began

    def reports(self) -> list[str]:
        """The reports made since the block began (those still kept)."""
        return reports(since=self._start)

    def live(self, kinds: tuple[str, ...] = ("export", "import")) -> list[Record]:
        return live(kinds)

    def format_live(self, kinds: tuple[str, ...] = ("export", "import")) -> str:
        return format_live(kinds)


@contextlib.contextmanager
def sanitize(**limits):
    """Runs the block under the sanitizer (enable's keywords), then stops it unless it was
    on already. Yields a :class:`Session`."""
    was_on = is_enabled()
    if limits or not was_on:
        # Running already (DLINTEROP_SANITIZE, say), it keeps its limits unless given others.
        enable(**limits)
    try:
        yield Session(report_count())
    finally:
        if not was_on:
            disable()


def _at_exit():
    text = format_live()
    if text:
        sys.stderr.write(text)


def _enable_from_environment():
    """DLINTEROP_SANITIZE=1 (dlinterop/__init__.py calls this when it is set)."""
    value = os.environ.get("DLINTEROP_SANITIZE", "")
    if value in ("", "0"):
        return
    enable(
        quarantine_bytes=int(os.environ.get("DLINTEROP_SANITIZE_QUARANTINE", "256")) << 20,
        frames=int(os.environ.get("DLINTEROP_SANITIZE_FRAMES", str(DEFAULT_FRAMES))),
    )
    import atexit

    atexit.register(_at_exit)
