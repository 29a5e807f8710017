/*
 * dlinterop's lifetime sanitizer (dlinterop.sanitizer is its Python face). Off by default;
 * while off, every hook in the export, import and allocation paths is one load of
 * dli_san_active and a branch not taken.
 *
 * While on it records where each capsule or managed tensor dlinterop exports, each managed
 * tensor it imports, and each host buffer it allocates was made (the Python stack, as
 * text), and where each was released. A release dlinterop's own export sees twice, a
 * capsule consumed twice and a release after interpreter shutdown are reported with both
 * stacks instead of freeing twice or touching a finalised runtime. A foreign managed tensor
 * it imports, or one the pytest plugin sees handed to a consumer, has its deleter watched
 * (replaced by one that counts: a second call is reported, not passed on). Host buffers are
 * mapped whole pages of their own, and on release made inaccessible (PROT_NONE) for a while
 * instead of freed: a consumer that kept a pointer faults at the bad access, and the fault
 * handler reports the buffer's two stacks before the fault takes its usual course. Those
 * mappings are kept to a quarter of the process's limit (vm.max_map_count); past it buffers
 * are allocated as usual, and that is said once. Reports go to the stderr of the time it
 * was first started (a test runner's capture redirects fd 2 later), at once.
 *
 * Records stay C memory (malloc'd text), so that a report can be written from any thread,
 * without the GIL, after shutdown and from the fault handler.
 */
#ifndef DLINTEROP_SANITIZER_H_
#define DLINTEROP_SANITIZER_H_

#include <Python.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nonzero while the sanitizer records, or while anything it recorded is still live or
 * quarantined: the hooks call in only then. Written under the sanitizer's lock; read by
 * dli_san_on() without it (a relaxed load: a plain move on x86-64 and AArch64). */
/* Hidden: only dlinterop._core reads it, with one instruction (no GOT load). */
extern int dli_san_active __attribute__((visibility("hidden")));
static inline int dli_san_on(void) {
  return __builtin_expect(__atomic_load_n(&dli_san_active, __ATOMIC_RELAXED), 0);
}

/* What a record is: an export (a capsule's or managed tensor's block, PyMem_Malloc'd), an
 * import, a host buffer, a foreign managed tensor whose deleter is watched;
 * DLI_SAN_EXPORT_MALLOC (dli_san_made only) is an export block of the exchange allocator,
 * malloc'd. */
enum {
  DLI_SAN_EXPORT = 1,
  DLI_SAN_IMPORT = 2,
  DLI_SAN_BUFFER = 3,
  DLI_SAN_EXPORT_MALLOC = 4,
  DLI_SAN_WATCHED = 5
};

/* Starts recording (quarantine limits: how many released records, and how many bytes of
 * released buffers, are kept before the oldest is freed; frames: the deepest stack kept).
 * Installs the fault handler the first time, and the first time keeps a duplicate of fd 2
 * to write reports to. 0, or -1 with a Python exception set. */
int dli_san_start(size_t quarantine_count, size_t quarantine_bytes, int frames);
/* Reports go to a duplicate of `fd` from now on (a test runner's saved stderr, which its
 * capture does not redirect), and notes too where write_notes is nonzero (else they are
 * only kept). 0, or -1 with OSError set. */
int dli_san_report_to(int fd, int write_notes);
/* Stops recording and frees the quarantine; records of what is still live stay until it
 * is released. */
void dli_san_stop(void);
int dli_san_recording(void);
/* Whether reports are written as they are made (1, the default) or only kept (0: the pytest
 * plugin, during a test that expects them). */
void dli_san_write_reports(int written);
/* How many reports were ever made (dli_san_reports' clear does not lower it). */
Py_ssize_t dli_san_report_total(void);

/* A capsule or managed tensor dlinterop exported (key: the managed struct), or a foreign
 * managed tensor dlinterop imported (key: that struct). `what` is copied. */
void dli_san_made(const void* key, int kind, const char* what);

/* dli_san_made for the block of a capsule dlinterop exported (what: the capsule's name). One
 * call with the GIL held, so that the export path that calls it stays small. */
void dli_san_exported(const void* block, PyObject* capsule);

/* dlinterop's export `block` is being released (its deleter or its unconsumed capsule's
 * destructor), with the GIL held. 0: not recorded, release it as usual; 1: recorded, the
 * first release: release it, but leave the block to the sanitizer (it keeps it, so that a
 * second call can be told); 2: released before: reported, touch nothing. */
int dli_san_export_released(void* block);
/* The same release after interpreter shutdown began: a second release is reported, and so
 * is a first one after Py_FinalizeEx ended (a C atexit handler, a thread never joined); a
 * first one while the interpreter tears its modules down is a correct program's (an export a
 * module held, listed as live at exit) and is only recorded. */
void dli_san_released_after_shutdown(const void* block);
/* A foreign managed tensor dlinterop imported is being released. */
void dli_san_import_released(const void* key);
/* A foreign managed tensor dlinterop imports while recording (versioned: a
 * DLManagedTensorVersioned, else a DLManagedTensor): recorded as an import, its deleter
 * watched (dli_san_watch). */
void dli_san_imported(void* managed, int versioned, const char* what);
/* Puts the sanitizer's deleter in place of the managed tensor's, whether or not it records
 * (the pytest plugin watches each exchange's): the first call calls the tensor's own, a
 * second is reported (with where it was watched and first released, stacks taken while the
 * sanitizer records) and calls nothing. `what` is copied. 1 when watched, 0 when it has no
 * deleter, is watched already, or there is no memory for the record. With the GIL. */
int dli_san_watch(void* managed, int versioned, const char* what);
/* Says once per producer type (one with __dlpack__; by its address) that its memory is not
 * dlinterop's, so not quarantined. While recording; with the GIL. */
void dli_san_note_producer(PyObject* type);
/* A capsule already renamed used_* was handed to dlinterop again (key: its pointer). */
void dli_san_consumed_twice(const void* key, const char* name);

/* The host allocator's sanitizer path (src/runtime.c): whole pages, recorded; NULL when no
 * mapping can be had (the caller then allocates as usual). */
void* dli_san_host_alloc(size_t nbytes, size_t alignment, int zero, void** base_out);
/* 1 when base was the sanitizer's (quarantined or unmapped now, or released before:
 * reported, untouched), 0 when it was not. */
int dli_san_host_free(void* base, size_t nbytes);

/* Python lists for dlinterop.sanitizer: the records still live, as tuples
 * (kind, address, nbytes, what, made), and the reports so far (texts; clear: empty the
 * list). NULL with an exception set on failure. */
PyObject* dli_san_live(void);
PyObject* dli_san_reports(int clear);
/* The notes so far: what the sanitizer said it cannot watch (texts). */
PyObject* dli_san_notes(void);

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_SANITIZER_H_ */
