/* dlinterop's lifetime sanitizer (see sanitizer.h): its switch, and the hooks the export
 * and import paths and the watched deleters call. Its other parts are listed in
 * sanitizer_internal.h. */
#include "sanitizer.h"

#include <pthread.h>
#include <stdlib.h>

#include "dlpack/dlpack.h"
#include "sanitizer_internal.h"

int dli_san_active __attribute__((visibility("hidden")));

int san_recording; /* written under the lock, read anywhere through dli_san_recording */

/* Set by Py_AtExit at the very end of Py_FinalizeEx: a release before it (while the
 * interpreter tears its modules down) is a correct program's last one, one after it comes
 * from a C atexit handler or a thread Python never joined. */
static volatile int python_finalized;

static void reset_lock_in_child(void) {
  /* fork() copies the lock as it was: held, if another thread held it. */
  pthread_mutex_init(&san_lock, NULL);
}

static void on_python_finalized(void) { python_finalized = 1; }

int dli_san_start(size_t quarantine_count, size_t quarantine_bytes, int frames) {
  static int atfork_registered, atexit_registered;
  pthread_mutex_lock(&san_lock);
  if (san_ensure_buckets() < 0) {
    pthread_mutex_unlock(&san_lock);
    PyErr_NoMemory();
    return -1;
  }
  if (!atfork_registered) atfork_registered = pthread_atfork(NULL, NULL, reset_lock_in_child) == 0;
  if (!atexit_registered) atexit_registered = Py_AtExit(on_python_finalized) == 0;
  san_keep_stderr();
  san_init_map_budget();
  san_q_max_count = quarantine_count;
  san_q_max_bytes = quarantine_bytes;
  san_max_frames = frames < 1 ? 1 : frames;
  __atomic_store_n(&san_recording, 1, __ATOMIC_RELAXED);
  san_install_fault_handler();
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  return 0;
}

void dli_san_stop(void) {
  pthread_mutex_lock(&san_lock);
  __atomic_store_n(&san_recording, 0, __ATOMIC_RELAXED);
  int gil = san_holds_gil();
  while (san_evict_one(gil, 0)) {
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
}

int dli_san_recording(void) { return __atomic_load_n(&san_recording, __ATOMIC_RELAXED); }

void dli_san_made(const void* key, int kind, const char* what) {
  if (!dli_san_recording() || key == NULL) return;
  char* made = san_capture_stack();
  pthread_mutex_lock(&san_lock);
  entry* e = san_add(key, kind == DLI_SAN_EXPORT_MALLOC ? DLI_SAN_EXPORT : kind, what, made);
  if (e != NULL) e->malloc_block = kind == DLI_SAN_EXPORT_MALLOC;
  san_update_active();
  pthread_mutex_unlock(&san_lock);
}

void dli_san_exported(const void* block, PyObject* capsule) {
  dli_san_made(block, DLI_SAN_EXPORT, PyCapsule_GetName(capsule));
}

int dli_san_export_released(void* block) {
  /* Once stopped, no stack is taken: a record made while it ran is only dropped. */
  char* here = dli_san_recording() ? san_capture_stack() : NULL;
  int verdict = 0;
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(block, DLI_SAN_EXPORT);
  if (e != NULL && e->released) {
    san_report("a dlinterop export released twice (its deleter called again)", e->what,
               "exported at", e->made, "first released at", e->released_at, "released again at",
               here ? here : "    (not recorded: the sanitizer is off)\n");
    verdict = 2;
  } else if (e != NULL && !san_recording) {
    san_unlink_entry(e);
    san_free_entry(e);
    san_live_count--;
  } else if (e != NULL) {
    e->released = 1;
    e->released_at = here;
    here = NULL;
    san_live_count--;
    san_quarantine(e);
    verdict = 1;
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  free(here);
  return verdict;
}

void dli_san_released_after_shutdown(const void* block) {
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(block, DLI_SAN_EXPORT);
  if (e != NULL && e->released) {
    san_report(
        "a dlinterop export released twice, the second time after interpreter shutdown "
        "began",
        e->what, "exported at", e->made, "first released at", e->released_at, NULL, NULL);
  } else if (e != NULL && python_finalized) {
    san_report(
        "a dlinterop export released after interpreter shutdown (its memory is left to "
        "the process's end)",
        e->what, "exported at", e->made, NULL, NULL, NULL, NULL);
  } else if (e != NULL) {
    /* While the interpreter tears its modules down: an export a module held to the end,
     * listed as live at exit; its memory is left to the process's end, and that is all. */
    e->released = 1;
    san_live_count--;
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
}

void dli_san_import_released(const void* key) {
  char* here = dli_san_recording() ? san_capture_stack() : NULL;
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(key, DLI_SAN_IMPORT);
  if (e != NULL && !e->released) {
    san_live_count--;
    if (san_recording) {
      e->released = 1;
      e->released_at = here;
      here = NULL;
      san_quarantine(e);
    } else {
      san_unlink_entry(e);
      san_free_entry(e);
    }
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  free(here);
}

void dli_san_consumed_twice(const void* key, const char* name) {
  if (key == NULL) return;
  char* here = san_capture_stack();
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(key, DLI_SAN_IMPORT);
  if (e == NULL) e = san_find(key, 0);
  if (e != NULL && e->kind == DLI_SAN_IMPORT) {
    san_report("a DLPack capsule consumed twice", name, "first consumed at", e->made,
               e->released ? "its tensor released at" : NULL, e->released_at,
               "handed to dlinterop again at", here);
  } else if (e != NULL && e->kind == DLI_SAN_EXPORT) {
    san_report("a DLPack capsule consumed twice", name, "exported at", e->made,
               e->released ? "consumed (its deleter called) at"
                           : "consumed by a consumer outside dlinterop; its tensor is still live",
               e->released ? e->released_at : NULL, "handed to dlinterop again at", here);
  } else if (e != NULL && e->kind == DLI_SAN_WATCHED) {
    san_report("a DLPack capsule consumed twice", e->what, "handed to its consumer at", e->made,
               e->released ? "released (its deleter called) at"
                           : "consumed by that consumer; its tensor is still live",
               e->released ? e->released_at : NULL, "handed to dlinterop again at", here);
  }
  pthread_mutex_unlock(&san_lock);
  free(here);
}

/* ---- foreign managed tensors watched: their deleters counted ---------------------------- */

#define NOT_RECORDED "    (not recorded: the sanitizer was off; --dlpack-sanitize records it)\n"

/* The first call of a watched tensor's deleter calls its own; a second is reported and
 * calls nothing (the producer's deleter would free twice). Any thread, with or without the
 * GIL, and after shutdown. */
/* Whether `managed` is watched and not released yet. */
static int watched_and_live(void* managed) {
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(managed, DLI_SAN_WATCHED);
  int live = e != NULL && !e->released;
  pthread_mutex_unlock(&san_lock);
  return live;
}

static void watched_release(void* managed) {
  /* The first release's stack only while recording (the pytest plugin watches every
   * exchange, and a stack costs microseconds); a second's always, for its report. Taken
   * before the lock: taking one may run the garbage collector, and so a deleter. */
  char* here = dli_san_recording() || !watched_and_live(managed) ? san_capture_stack() : NULL;
  void (*original_versioned)(DLManagedTensorVersioned*) = NULL;
  void (*original_legacy)(DLManagedTensor*) = NULL;
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(managed, DLI_SAN_WATCHED);
  if (e == NULL) {
    san_report(
        "a DLPack deleter called twice: a watched tensor's deleter called again after its "
        "record was dropped from the quarantine (its deleter is not called again)",
        NULL, "released again at", here ? here : NOT_RECORDED, NULL, NULL, NULL, NULL);
  } else if (e->released) {
    san_report("a DLPack deleter called twice (the producer's deleter is not called again)",
               e->what, "handed over at", e->made ? e->made : NOT_RECORDED, "first released at",
               e->released_at ? e->released_at : NOT_RECORDED, "released again at",
               here ? here : NOT_RECORDED);
  } else {
    original_versioned = e->original_versioned;
    original_legacy = e->original_legacy;
    e->released = 1;
    e->released_at = here;
    here = NULL;
    san_live_count--;
    san_quarantine(e);
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  free(here);
  if (original_versioned != NULL) original_versioned((DLManagedTensorVersioned*)managed);
  if (original_legacy != NULL) original_legacy((DLManagedTensor*)managed);
}

static void watched_deleter_versioned(DLManagedTensorVersioned* managed) {
  watched_release(managed);
}

static void watched_deleter_legacy(DLManagedTensor* managed) { watched_release(managed); }

int dli_san_watch(void* managed, int versioned, const char* what) {
  if (managed == NULL) return 0;
  DLManagedTensorVersioned* mv = versioned ? (DLManagedTensorVersioned*)managed : NULL;
  DLManagedTensor* ml = versioned ? NULL : (DLManagedTensor*)managed;
  if (mv != NULL && (mv->deleter == NULL || mv->deleter == watched_deleter_versioned)) return 0;
  if (ml != NULL && (ml->deleter == NULL || ml->deleter == watched_deleter_legacy)) return 0;
  char* made = dli_san_recording() ? san_capture_stack() : NULL;
  pthread_mutex_lock(&san_lock);
  entry* e = san_ensure_buckets() == 0 ? san_add(managed, DLI_SAN_WATCHED, what, made) : NULL;
  if (e != NULL && mv != NULL) {
    e->original_versioned = mv->deleter;
    mv->deleter = watched_deleter_versioned;
  } else if (e != NULL) {
    e->original_legacy = ml->deleter;
    ml->deleter = watched_deleter_legacy;
  } else if (san_buckets == NULL) {
    free(made);
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  return e != NULL;
}

void dli_san_imported(void* managed, int versioned, const char* what) {
  if (!dli_san_recording() || managed == NULL) return;
  dli_san_made(managed, DLI_SAN_IMPORT, what);
  dli_san_watch(managed, versioned, "imported by dlinterop");
}
