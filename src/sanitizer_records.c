/* The sanitizer's records (see sanitizer_internal.h): one per export, import, host buffer
 * and watched tensor, in a hash table by address; and the Python stack each keeps, as text. */
#include "sanitizer_internal.h"

/* PyFrame_GetBack: declared by Python.h from 3.11 only. */
#include <frameobject.h>

#include "runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

entry** san_buckets;
pthread_mutex_t san_lock = PTHREAD_MUTEX_INITIALIZER;
size_t san_live_count;
int san_max_frames = 16;

/* ---- the Python stack as text --------------------------------------------------------- */

static void sb_add(strbuf* b, const char* s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + n + 1 > cap) cap *= 2;
    char* grown = realloc(b->text, cap);
    if (grown == NULL) {
      free(b->text);
      b->text = NULL;
      b->failed = 1;
      return;
    }
    b->text = grown;
    b->cap = cap;
  }
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->text[b->len] = '\0';
}

void san_sb_str(strbuf* b, const char* s) { sb_add(b, s, strlen(s)); }

char* san_copy_text(const char* s) {
  size_t n = strlen(s) + 1;
  char* out = malloc(n);
  if (out != NULL) memcpy(out, s, n);
  return out;
}

/* 1 when this thread may call Python: the interpreter runs (not finalising) and this
 * thread holds its GIL (is attached, free-threaded). PyGILState_Check alone says 1 after
 * finalisation on some versions. */
int san_holds_gil(void) {
  if (!dli_interpreter_alive()) return 0;
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked() != NULL;
#else
  PyThreadState* current = _PyThreadState_UncheckedGet();
  return current != NULL && current == PyGILState_GetThisThreadState();
#endif
}

/* The calling thread's Python stack, most recent call last, as the traceback module
 * prints one (the newest max_frames frames): malloc'd text, or NULL when out of memory.
 * Without the GIL, says that there is no Python stack to show. */
char* san_capture_stack(void) {
  if (!san_holds_gil()) {
    return san_copy_text("    (no Python stack: C code without the GIL, or after shutdown)\n");
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyFrameObject* frames[64];
  int limit = san_max_frames < 64 ? san_max_frames : 64;
  int n = 0, older = 0;
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());
  while (frame != NULL) {
    if (n == limit) {
      older = 1;
      Py_DECREF(frame);
      break;
    }
    frames[n++] = frame; /* each reference is dropped once the frame is printed */
    frame = PyFrame_GetBack(frame);
  }
  strbuf b = {0};
  char line[64];
  if (n == 0) san_sb_str(&b, "    (no Python stack)\n");
  if (older) san_sb_str(&b, "    ... (older frames not kept)\n");
  for (int i = n - 1; i >= 0; i--) {
    PyCodeObject* code = PyFrame_GetCode(frames[i]);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (file == NULL || name == NULL) PyErr_Clear();
    san_sb_str(&b, "    File \"");
    san_sb_str(&b, file ? file : "?");
    snprintf(line, sizeof line, "\", line %d, in ", PyFrame_GetLineNumber(frames[i]));
    san_sb_str(&b, line);
    san_sb_str(&b, name ? name : "?");
    san_sb_str(&b, "\n");
    Py_DECREF(code);
    Py_DECREF(frames[i]);
  }
  PyErr_Restore(type, value, tb);
  return b.text;
}

/* ---- the records ---------------------------------------------------------------------- */

static size_t bucket_of(const void* key) {
  return (size_t)(((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull) >> (64 - BUCKET_BITS));
}

/* The newest record of `key` (of `kind`, or of any kind when kind is 0). Under the lock. */
entry* san_find(const void* key, int kind) {
  if (san_buckets == NULL) return NULL;
  for (entry* e = san_buckets[bucket_of(key)]; e != NULL; e = e->next) {
    if (e->key == key && (kind == 0 || e->kind == kind)) return e;
  }
  return NULL;
}

void san_unlink_entry(entry* e) {
  entry** p = &san_buckets[bucket_of(e->key)];
  while (*p != e) p = &(*p)->next;
  *p = e->next;
}

void san_update_active(void) {
  int on = san_recording || san_live_count > 0 || san_q_count > 0;
  __atomic_store_n(&dli_san_active, on, __ATOMIC_RELAXED);
}

void san_free_entry(entry* e) {
  free(e->what);
  free(e->made);
  free(e->released_at);
  free(e);
}

/* The hash table, allocated on first use. 0, or -1 when out of memory. Under the lock. */
int san_ensure_buckets(void) {
  if (san_buckets == NULL) san_buckets = calloc((size_t)1 << BUCKET_BITS, sizeof(entry*));
  return san_buckets != NULL ? 0 : -1;
}

/* A new live record, its `made` stack taken over. Under the lock. */
entry* san_add(const void* key, int kind, const char* what, char* made) {
  entry* e = calloc(1, sizeof(entry));
  if (e == NULL) {
    free(made);
    return NULL;
  }
  e->key = key;
  e->kind = kind;
  e->what = what ? san_copy_text(what) : NULL;
  e->made = made;
  size_t b = bucket_of(key);
  if (kind == DLI_SAN_IMPORT || kind == DLI_SAN_WATCHED) {
    /* The address is another tensor's now (a producer's allocator reuses them): a released
     * record of the last one there can tell nothing more, and kept, each would lengthen
     * the chain every lookup of this address walks. */
    for (entry** p = &san_buckets[b]; *p != NULL;) {
      entry* old = *p;
      if (old->key == key && old->kind == kind && old->released) {
        *p = old->next;
        san_q_unlink(old);
        san_free_entry(old);
      } else {
        p = &old->next;
      }
    }
  }
  e->next = san_buckets[b];
  san_buckets[b] = e;
  san_live_count++;
  return e;
}
