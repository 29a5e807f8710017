# Provides: the lifetime sanitizer's switch and records for dlinterop.sanitizer
# (_sanitizer_start, _sanitizer_stop, _sanitizer_recording, _sanitizer_live,
# _sanitizer_reports, _sanitizer_report_total, _sanitizer_notes, _sanitizer_report_to,
# _sanitizer_write_reports), and
# for the pytest plugin the watch on a capsule's deleter (_sanitizer_watch) and the note on a
# producer type (_sanitizer_note_producer); its hooks sit in the paths they watch
# (export.pxi, consume.pxi, release.pxi, allocator.pxi, importer.pxi, the host allocator in
# src/runtime.c).
# Uses: runtime.pxi (src/sanitizer.h), export.pxi (the capsule names), consume.pxi
# (_own_export).


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


def _sanitizer_notes():
    """What the sanitizer said it cannot watch, as texts."""
    return dli_san_notes()


def _sanitizer_report_to(int fd, bint notes=True):
    """Reports (and notes, unless notes=False) go to a duplicate of fd from now on."""
    dli_san_report_to(fd, notes)


def _sanitizer_write_reports(bint written):
    """Reports written as they are made (True, the default), or only kept."""
    dli_san_write_reports(written)


def _sanitizer_watch(capsule, str what):
    """Puts the sanitizer's deleter in place of the deleter of an unconsumed DLPack capsule's
    managed tensor (src/sanitizer.h dli_san_watch): a second call is reported, not passed
    on. dlinterop's own exports are left alone (the sanitizer records those itself). True
    when watched."""
    cdef const char* name
    cdef DLManagedTensorVersioned* mv
    cdef DLManagedTensor* ml
    if not PyCapsule_CheckExact(capsule):
        return False
    name = PyCapsule_GetName_raw(<PyObject*>capsule)
    encoded = what.encode(errors="replace")
    if name != NULL and strcmp(name, NAME_VERSIONED) == 0:
        mv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(<PyObject*>capsule, name)
        if _own_export(<void*>mv.deleter):
            return False
        return dli_san_watch(mv, 1, encoded) == 1
    if name != NULL and strcmp(name, NAME_LEGACY) == 0:
        ml = <DLManagedTensor*>PyCapsule_GetPointer(<PyObject*>capsule, name)
        if _own_export(<void*>ml.deleter):
            return False
        return dli_san_watch(ml, 0, encoded) == 1
    return False


def _sanitizer_note_producer(type cls):
    """Says once per type that its memory is not dlinterop's (not quarantined)."""
    if cls is not Tensor:
        dli_san_note_producer(<PyObject*>cls)
