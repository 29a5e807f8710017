# Provides: the lifetime sanitizer's switch and records for dlinterop.sanitizer
# (_sanitizer_start, _sanitizer_stop, _sanitizer_recording, _sanitizer_live,
# _sanitizer_reports, _sanitizer_report_total); its hooks sit in the paths they watch
# (export.pxi, consume.pxi, release.pxi, allocator.pxi, the host allocator in src/runtime.c).
# Uses: runtime.pxi (src/sanitizer.h).


def _sanitizer_start(size_t quarantine_count, size_t quarantine_bytes, int frames):
    """Starts recording (dlinterop.sanitizer.enable)."""
    dli_san_start(quarantine_count, quarantine_bytes, frames)


def _sanitizer_stop():
    """Stops recording and frees the quarantine (dlinterop.sanitizer.disable)."""
    dli_san_stop()


def _sanitizer_recording():
    return bool(dli_san_recording())


def _sanitizer_live():
    """The records still live: (kind, address, nbytes, what, stack) tuples."""
    return dli_san_live()


def _sanitizer_report_total():
    """How many reports were ever made (clearing the list does not lower it)."""
    return dli_san_report_total()


def _sanitizer_reports(bint clear=False):
    """The reports so far, as texts; clear=True empties the list."""
    return dli_san_reports(clear)
