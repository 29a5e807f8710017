/* dlinterop's lifetime sanitizer: see sanitizer.h. */
#include "sanitizer.h"

/* PyFrame_GetBack: declared by Python.h from 3.11 only. */
#include <frameobject.h>

#include "dlpack/dlpack.h"
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int dli_san_active __attribute__((visibility("hidden")));

typedef struct entry {
  const void* key;
  struct entry* next;  /* the hash chain */
  struct entry* qnext; /* the quarantine, oldest first */
  struct entry* qprev;
  int kind;
  int released;
  int malloc_block; /* an export block of the exchange allocator's: free(), not PyMem_Free */
  char* what;
  char* made;        /* the stack where it was made (or consumed, for an import) */
  char* released_at; /* the stack of its first release */
  void* map;         /* a buffer's pages, and the data in them */
  size_t map_len;
  void* data;
  size_t nbytes;
  /* A watched managed tensor's own deleter (the other is NULL), called on its first
   * release through the sanitizer's. */
  void (*original_versioned)(DLManagedTensorVersioned*);
  void (*original_legacy)(DLManagedTensor*);
} entry;

#define BUCKET_BITS 16
static entry** buckets;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int recording; /* written under the lock, read anywhere through dli_san_recording */
static size_t live_count;
static entry* q_head;
static entry* q_tail;
static size_t q_count, q_bytes;
/* The quarantine's limits before dli_san_start sets them (deleters watched for the pytest
 * plugin, with the sanitizer off): dlinterop.sanitizer's defaults. */
static size_t q_max_count = 4096, q_max_bytes = (size_t)256 << 20;
static int max_frames = 16;
static char** reports;
static size_t report_count, report_cap;
static Py_ssize_t report_total; /* every report made, the cleared ones too */
static char** notes;            /* what the sanitizer cannot watch, said once each */
static size_t note_count, note_cap;

/* Where reports go: the stderr of the time the sanitizer was first started (a duplicate of
 * fd 2 then), or of dli_san_report_to: not fd 2 as it is when a report is made, which a test
 * runner's capture may have redirected to a file that dies with the process. */
static int report_fd = -1;
static int notes_written = 1; /* 0: notes only kept (the pytest plugin prints them itself) */
/* 0 while reports are expected (a pytest test marked dlpack_sanitizer_expected): kept, not
 * written. A fault's report is always written. */
static int reports_written = 1;

/* Host buffers on mappings of their own, live or quarantined: kept under map_budget, a
 * quarter of the kernel's limit on a process's mappings (vm.max_map_count), so that the
 * program's own mappings (thread stacks, malloc's arenas, files) never run out. */
static size_t map_count, map_budget, map_limit;
static int budget_noted;

/* Set by Py_AtExit at the very end of Py_FinalizeEx: a release before it (while the
 * interpreter tears its modules down) is a correct program's last one, one after it comes
 * from a C atexit handler or a thread Python never joined. */
static volatile int python_finalized;

/* ---- the Python stack as text --------------------------------------------------------- */

typedef struct {
  char* text;
  size_t len, cap;
  int failed;
} strbuf;

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

static void sb_str(strbuf* b, const char* s) { sb_add(b, s, strlen(s)); }

static char* copy_text(const char* s) {
  size_t n = strlen(s) + 1;
  char* out = malloc(n);
  if (out != NULL) memcpy(out, s, n);
  return out;
}

/* 1 when this thread may call Python: the interpreter runs (not finalising) and this
 * thread holds its GIL (is attached, free-threaded). PyGILState_Check alone says 1 after
 * finalisation on some versions. */
static int holds_gil(void) {
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
static char* capture_stack(void) {
  if (!holds_gil()) {
    return copy_text("    (no Python stack: C code without the GIL, or after shutdown)\n");
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyFrameObject* frames[64];
  int limit = max_frames < 64 ? max_frames : 64;
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
  if (n == 0) sb_str(&b, "    (no Python stack)\n");
  if (older) sb_str(&b, "    ... (older frames not kept)\n");
  for (int i = n - 1; i >= 0; i--) {
    PyCodeObject* code = PyFrame_GetCode(frames[i]);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (file == NULL || name == NULL) PyErr_Clear();
    sb_str(&b, "    File \"");
    sb_str(&b, file ? file : "?");
    snprintf(line, sizeof line, "\", line %d, in ", PyFrame_GetLineNumber(frames[i]));
    sb_str(&b, line);
    sb_str(&b, name ? name : "?");
    sb_str(&b, "\n");
    Py_DECREF(code);
    Py_DECREF(frames[i]);
  }
  PyErr_Restore(type, value, tb);
  return b.text;
}

/* ---- reports -------------------------------------------------------------------------- */

static void write_all(const char* s, size_t n) {
  int fd = report_fd >= 0 ? report_fd : 2;
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void write_str(const char* s) { write_all(s, strlen(s)); }

/* Adds a report and writes it to stderr at once (a crash may follow). Under the lock. */
static void report(const char* title, const char* what, const char* label1, const char* stack1,
                   const char* label2, const char* stack2, const char* label3, const char* stack3) {
  strbuf b = {0};
  sb_str(&b, "dlinterop sanitizer: ");
  sb_str(&b, title);
  if (what != NULL && what[0]) {
    sb_str(&b, " (");
    sb_str(&b, what);
    sb_str(&b, ")");
  }
  sb_str(&b, "\n");
  const char* labels[3] = {label1, label2, label3};
  const char* stacks[3] = {stack1, stack2, stack3};
  for (int i = 0; i < 3; i++) {
    if (labels[i] == NULL) continue;
    sb_str(&b, "  ");
    sb_str(&b, labels[i]);
    sb_str(&b, stacks[i] != NULL ? ":\n" : "\n");
    if (stacks[i] != NULL) sb_str(&b, stacks[i]);
  }
  if (b.text == NULL) return;
  if (reports_written) write_str(b.text);
  report_total++;
  if (report_count == report_cap) {
    size_t cap = report_cap ? 2 * report_cap : 16;
    char** grown = realloc(reports, cap * sizeof(char*));
    if (grown == NULL) {
      free(b.text);
      return;
    }
    reports = grown;
    report_cap = cap;
  }
  reports[report_count++] = b.text;
}

/* Says what the sanitizer cannot watch, once (the caller says it once): kept for
 * dli_san_notes and written to the report stream (unless dli_san_report_to said not to), not
 * counted as a report. Under the lock. */
static void note(const char* text) {
  if (notes_written) write_str(text);
  if (note_count == note_cap) {
    size_t cap = note_cap ? 2 * note_cap : 8;
    char** grown = realloc(notes, cap * sizeof(char*));
    if (grown == NULL) return;
    notes = grown;
    note_cap = cap;
  }
  char* kept = copy_text(text);
  if (kept != NULL) notes[note_count++] = kept;
}

/* ---- the records ---------------------------------------------------------------------- */

static size_t bucket_of(const void* key) {
  return (size_t)(((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull) >> (64 - BUCKET_BITS));
}

/* The newest record of `key` (of `kind`, or of any kind when kind is 0). Under the lock. */
static entry* find(const void* key, int kind) {
  if (buckets == NULL) return NULL;
  for (entry* e = buckets[bucket_of(key)]; e != NULL; e = e->next) {
    if (e->key == key && (kind == 0 || e->kind == kind)) return e;
  }
  return NULL;
}

static void unlink_entry(entry* e) {
  entry** p = &buckets[bucket_of(e->key)];
  while (*p != e) p = &(*p)->next;
  *p = e->next;
}

static void update_active(void) {
  int on = recording || live_count > 0 || q_count > 0;
  __atomic_store_n(&dli_san_active, on, __ATOMIC_RELAXED);
}

static void free_entry(entry* e) {
  free(e->what);
  free(e->made);
  free(e->released_at);
  free(e);
}

/* Frees the oldest quarantined record that can be freed now: its buffer unmapped, its
 * export block freed (PyMem_Free needs the GIL: without it such a record is skipped, for a
 * later call). 0 when there is none. Under the lock.
 *
 * The fault handler reads the quarantine without the lock: a record freed here while
 * another thread faults on memory it names can be missed (the report is best effort; the
 * fault itself still takes its course). */
static void q_unlink(entry* e) {
  if (e->qprev != NULL) {
    e->qprev->qnext = e->qnext;
  } else {
    q_head = e->qnext;
  }
  if (e->qnext != NULL) {
    e->qnext->qprev = e->qprev;
  } else {
    q_tail = e->qprev;
  }
  q_count--;
}

static int evict_one(int gil, int kind) {
  for (entry* e = q_head; e != NULL; e = e->qnext) {
    if (kind != 0 && e->kind != kind) continue;
    if (e->kind == DLI_SAN_EXPORT && !e->malloc_block && !gil) continue;
    q_unlink(e);
    if (e->kind == DLI_SAN_BUFFER) {
      q_bytes -= e->map_len;
      munmap(e->map, e->map_len);
      map_count--;
    } else if (e->kind == DLI_SAN_EXPORT) {
      if (e->malloc_block) {
        free((void*)e->key);
      } else {
        PyMem_Free((void*)e->key);
      }
    }
    unlink_entry(e);
    free_entry(e);
    return 1;
  }
  return 0;
}

static void quarantine(entry* e) {
  e->qnext = NULL;
  e->qprev = q_tail;
  if (q_tail != NULL) {
    q_tail->qnext = e;
  } else {
    q_head = e;
  }
  q_tail = e;
  q_count++;
  if (e->kind == DLI_SAN_BUFFER) q_bytes += e->map_len;
  if (q_count > q_max_count || q_bytes > q_max_bytes) {
    int gil = holds_gil();
    while ((q_count > q_max_count || q_bytes > q_max_bytes) && evict_one(gil, 0)) {
    }
  }
}

/* A new live record, its `made` stack taken over. Under the lock. */
static entry* add(const void* key, int kind, const char* what, char* made) {
  entry* e = calloc(1, sizeof(entry));
  if (e == NULL) {
    free(made);
    return NULL;
  }
  e->key = key;
  e->kind = kind;
  e->what = what ? copy_text(what) : NULL;
  e->made = made;
  size_t b = bucket_of(key);
  if (kind == DLI_SAN_IMPORT || kind == DLI_SAN_WATCHED) {
    /* The address is another tensor's now (a producer's allocator reuses them): a released
     * record of the last one there can tell nothing more, and kept, each would lengthen
     * the chain every lookup of this address walks. */
    for (entry** p = &buckets[b]; *p != NULL;) {
      entry* old = *p;
      if (old->key == key && old->kind == kind && old->released) {
        *p = old->next;
        q_unlink(old);
        free_entry(old);
      } else {
        p = &old->next;
      }
    }
  }
  e->next = buckets[b];
  buckets[b] = e;
  live_count++;
  return e;
}

/* ---- the fault handler ---------------------------------------------------------------- */

static struct sigaction previous_segv, previous_bus;
static volatile sig_atomic_t fault_seen;

/* Numbers for the fault handler, without stdio (not async-signal-safe). */
static void write_number(uintptr_t value, int hex) {
  char digits[32];
  int n = sizeof digits;
  unsigned base = hex ? 16 : 10;
  do {
    digits[--n] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0);
  if (hex) {
    digits[--n] = 'x';
    digits[--n] = '0';
  }
  write_all(digits + n, sizeof digits - (size_t)n);
}

static void report_fault(uintptr_t addr) {
  /* Read without the lock (a signal handler cannot take it); see evict_one. */
  for (entry* e = q_head; e != NULL; e = e->qnext) {
    if (e->kind != DLI_SAN_BUFFER || addr < (uintptr_t)e->map ||
        addr >= (uintptr_t)e->map + e->map_len) {
      continue;
    }
    uintptr_t data = (uintptr_t)e->data;
    write_str("dlinterop sanitizer: access to released memory at ");
    write_number(addr, 1);
    write_str(", ");
    if (addr < data) {
      write_number(data - addr, 0);
      write_str(" bytes before");
    } else if (addr - data < e->nbytes) {
      write_number(addr - data, 0);
      write_str(" bytes into");
    } else {
      write_number(addr - data - e->nbytes, 0);
      write_str(" bytes past the end of");
    }
    write_str(" a buffer of ");
    write_number(e->nbytes, 0);
    write_str(" bytes dlinterop released\n  allocated at:\n");
    write_str(e->made ? e->made : "    (not recorded)\n");
    write_str("  released at:\n");
    write_str(e->released_at ? e->released_at : "    (not recorded)\n");
    return;
  }
}

static void on_fault(int sig, siginfo_t* info, void* context);

static int is_ours(const struct sigaction* action) {
  return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == on_fault;
}

static void default_action(int sig) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, NULL);
}

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)context;
  if (fault_seen) {
    /* Here again: the handler before this one raised the signal anew (faulthandler does,
     * having put this one back): the default action ends the process. */
    default_action(sig);
    return;
  }
  fault_seen = 1;
  /* si_code > 0: the kernel's report of a bad access (a raise() has no address). */
  if (info != NULL && info->si_code > 0) report_fault((uintptr_t)info->si_addr);
  /* The handler before this one (faulthandler's, or the default action: the process
   * ends) takes the fault when the access is tried again on return. */
  const struct sigaction* previous = sig == SIGSEGV ? &previous_segv : &previous_bus;
  if (is_ours(previous)) {
    default_action(sig);
  } else {
    sigaction(sig, previous, NULL);
  }
}

/* Puts on_fault first for `sig` unless it is there already, keeping the handler it
 * replaces (faulthandler, when enabled since) to pass faults on to. */
static void install(int sig, struct sigaction* previous) {
  struct sigaction current;
  if (sigaction(sig, NULL, &current) != 0 || is_ours(&current)) return;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, previous) == 0) fault_seen = 0;
}

/* ---- the API -------------------------------------------------------------------------- */

static void reset_lock_in_child(void) {
  /* fork() copies the lock as it was: held, if another thread held it. */
  pthread_mutex_init(&lock, NULL);
}

/* The hash table, allocated on first use. 0, or -1 when out of memory. Under the lock. */
static int ensure_buckets(void) {
  if (buckets == NULL) buckets = calloc((size_t)1 << BUCKET_BITS, sizeof(entry*));
  return buckets != NULL ? 0 : -1;
}

static void on_python_finalized(void) { python_finalized = 1; }

/* vm.max_map_count (Linux's default, where it cannot be read). */
static size_t read_map_limit(void) {
  long limit = 65530;
  FILE* f = fopen("/proc/sys/vm/max_map_count", "r");
  if (f != NULL) {
    if (fscanf(f, "%ld", &limit) != 1 || limit <= 0) limit = 65530;
    fclose(f);
  }
  return (size_t)limit;
}

int dli_san_start(size_t quarantine_count, size_t quarantine_bytes, int frames) {
  static int atfork_registered, atexit_registered;
  pthread_mutex_lock(&lock);
  if (ensure_buckets() < 0) {
    pthread_mutex_unlock(&lock);
    PyErr_NoMemory();
    return -1;
  }
  if (!atfork_registered) atfork_registered = pthread_atfork(NULL, NULL, reset_lock_in_child) == 0;
  if (!atexit_registered) atexit_registered = Py_AtExit(on_python_finalized) == 0;
  if (report_fd < 0) report_fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (map_budget == 0) {
    map_limit = read_map_limit();
    map_budget = map_limit / 4;
  }
  q_max_count = quarantine_count;
  q_max_bytes = quarantine_bytes;
  max_frames = frames < 1 ? 1 : frames;
  __atomic_store_n(&recording, 1, __ATOMIC_RELAXED);
  install(SIGSEGV, &previous_segv);
  install(SIGBUS, &previous_bus);
  update_active();
  pthread_mutex_unlock(&lock);
  return 0;
}

int dli_san_report_to(int fd, int write_notes) {
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) {
    PyErr_SetFromErrno(PyExc_OSError);
    return -1;
  }
  pthread_mutex_lock(&lock);
  int old = report_fd;
  report_fd = copy;
  notes_written = write_notes;
  pthread_mutex_unlock(&lock);
  if (old >= 0) close(old);
  return 0;
}

void dli_san_stop(void) {
  pthread_mutex_lock(&lock);
  __atomic_store_n(&recording, 0, __ATOMIC_RELAXED);
  int gil = holds_gil();
  while (evict_one(gil, 0)) {
  }
  update_active();
  pthread_mutex_unlock(&lock);
}

int dli_san_recording(void) { return __atomic_load_n(&recording, __ATOMIC_RELAXED); }

void dli_san_write_reports(int written) {
  pthread_mutex_lock(&lock);
  reports_written = written;
  pthread_mutex_unlock(&lock);
}

Py_ssize_t dli_san_report_total(void) {
  pthread_mutex_lock(&lock);
  Py_ssize_t total = report_total;
  pthread_mutex_unlock(&lock);
  return total;
}

void dli_san_made(const void* key, int kind, const char* what) {
  if (!dli_san_recording() || key == NULL) return;
  char* made = capture_stack();
  pthread_mutex_lock(&lock);
  entry* e = add(key, kind == DLI_SAN_EXPORT_MALLOC ? DLI_SAN_EXPORT : kind, what, made);
  if (e != NULL) e->malloc_block = kind == DLI_SAN_EXPORT_MALLOC;
  update_active();
  pthread_mutex_unlock(&lock);
}

void dli_san_exported(const void* block, PyObject* capsule) {
  dli_san_made(block, DLI_SAN_EXPORT, PyCapsule_GetName(capsule));
}

int dli_san_export_released(void* block) {
  /* Once stopped, no stack is taken: a record made while it ran is only dropped. */
  char* here = dli_san_recording() ? capture_stack() : NULL;
  int verdict = 0;
  pthread_mutex_lock(&lock);
  entry* e = find(block, DLI_SAN_EXPORT);
  if (e != NULL && e->released) {
    report("a dlinterop export released twice (its deleter called again)", e->what, "exported at",
           e->made, "first released at", e->released_at, "released again at",
           here ? here : "    (not recorded: the sanitizer is off)\n");
    verdict = 2;
  } else if (e != NULL && !recording) {
    unlink_entry(e);
    free_entry(e);
    live_count--;
  } else if (e != NULL) {
    e->released = 1;
    e->released_at = here;
    here = NULL;
    live_count--;
    quarantine(e);
    verdict = 1;
  }
  update_active();
  pthread_mutex_unlock(&lock);
  free(here);
  return verdict;
}

void dli_san_released_after_shutdown(const void* block) {
  pthread_mutex_lock(&lock);
  entry* e = find(block, DLI_SAN_EXPORT);
  if (e != NULL && e->released) {
    report(
        "a dlinterop export released twice, the second time after interpreter shutdown "
        "began",
        e->what, "exported at", e->made, "first released at", e->released_at, NULL, NULL);
  } else if (e != NULL && python_finalized) {
    report(
        "a dlinterop export released after interpreter shutdown (its memory is left to "
        "the process's end)",
        e->what, "exported at", e->made, NULL, NULL, NULL, NULL);
  } else if (e != NULL) {
    /* While the interpreter tears its modules down: an export a module held to the end,
     * listed as live at exit; its memory is left to the process's end, and that is all. */
    e->released = 1;
    live_count--;
  }
  update_active();
  pthread_mutex_unlock(&lock);
}

void dli_san_import_released(const void* key) {
  char* here = dli_san_recording() ? capture_stack() : NULL;
  pthread_mutex_lock(&lock);
  entry* e = find(key, DLI_SAN_IMPORT);
  if (e != NULL && !e->released) {
    live_count--;
    if (recording) {
      e->released = 1;
      e->released_at = here;
      here = NULL;
      quarantine(e);
    } else {
      unlink_entry(e);
      free_entry(e);
    }
  }
  update_active();
  pthread_mutex_unlock(&lock);
  free(here);
}

void dli_san_consumed_twice(const void* key, const char* name) {
  if (key == NULL) return;
  char* here = capture_stack();
  pthread_mutex_lock(&lock);
  entry* e = find(key, DLI_SAN_IMPORT);
  if (e == NULL) e = find(key, 0);
  if (e != NULL && e->kind == DLI_SAN_IMPORT) {
    report("a DLPack capsule consumed twice", name, "first consumed at", e->made,
           e->released ? "its tensor released at" : NULL, e->released_at,
           "handed to dlinterop again at", here);
  } else if (e != NULL && e->kind == DLI_SAN_EXPORT) {
    report("a DLPack capsule consumed twice", name, "exported at", e->made,
           e->released ? "consumed (its deleter called) at"
                       : "consumed by a consumer outside dlinterop; its tensor is still live",
           e->released ? e->released_at : NULL, "handed to dlinterop again at", here);
  } else if (e != NULL && e->kind == DLI_SAN_WATCHED) {
    report("a DLPack capsule consumed twice", e->what, "handed to its consumer at", e->made,
           e->released ? "released (its deleter called) at"
                       : "consumed by that consumer; its tensor is still live",
           e->released ? e->released_at : NULL, "handed to dlinterop again at", here);
  }
  pthread_mutex_unlock(&lock);
  free(here);
}

/* ---- foreign managed tensors watched: their deleters counted ---------------------------- */

#define NOT_RECORDED "    (not recorded: the sanitizer was off; --dlpack-sanitize records it)\n"

/* The first call of a watched tensor's deleter calls its own; a second is reported and
 * calls nothing (the producer's deleter would free twice). Any thread, with or without the
 * GIL, and after shutdown. */
/* Whether `managed` is watched and not released yet. */
static int watched_and_live(void* managed) {
  pthread_mutex_lock(&lock);
  entry* e = find(managed, DLI_SAN_WATCHED);
  int live = e != NULL && !e->released;
  pthread_mutex_unlock(&lock);
  return live;
}

static void watched_release(void* managed) {
  /* The first release's stack only while recording (the pytest plugin watches every
   * exchange, and a stack costs microseconds); a second's always, for its report. Taken
   * before the lock: taking one may run the garbage collector, and so a deleter. */
  char* here = dli_san_recording() || !watched_and_live(managed) ? capture_stack() : NULL;
  void (*original_versioned)(DLManagedTensorVersioned*) = NULL;
  void (*original_legacy)(DLManagedTensor*) = NULL;
  pthread_mutex_lock(&lock);
  entry* e = find(managed, DLI_SAN_WATCHED);
  if (e == NULL) {
    report(
        "a DLPack deleter called twice: a watched tensor's deleter called again after its "
        "record was dropped from the quarantine (its deleter is not called again)",
        NULL, "released again at", here ? here : NOT_RECORDED, NULL, NULL, NULL, NULL);
  } else if (e->released) {
    report("a DLPack deleter called twice (the producer's deleter is not called again)", e->what,
           "handed over at", e->made ? e->made : NOT_RECORDED, "first released at",
           e->released_at ? e->released_at : NOT_RECORDED, "released again at",
           here ? here : NOT_RECORDED);
  } else {
    original_versioned = e->original_versioned;
    original_legacy = e->original_legacy;
    e->released = 1;
    e->released_at = here;
    here = NULL;
    live_count--;
    quarantine(e);
  }
  update_active();
  pthread_mutex_unlock(&lock);
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
  char* made = dli_san_recording() ? capture_stack() : NULL;
  pthread_mutex_lock(&lock);
  entry* e = ensure_buckets() == 0 ? add(managed, DLI_SAN_WATCHED, what, made) : NULL;
  if (e != NULL && mv != NULL) {
    e->original_versioned = mv->deleter;
    mv->deleter = watched_deleter_versioned;
  } else if (e != NULL) {
    e->original_legacy = ml->deleter;
    ml->deleter = watched_deleter_legacy;
  } else if (buckets == NULL) {
    free(made);
  }
  update_active();
  pthread_mutex_unlock(&lock);
  return e != NULL;
}

void dli_san_imported(void* managed, int versioned, const char* what) {
  if (!dli_san_recording() || managed == NULL) return;
  dli_san_made(managed, DLI_SAN_IMPORT, what);
  dli_san_watch(managed, versioned, "imported by dlinterop");
}

/* "module.qualname" of a type, as the user names it: malloc'd, or NULL. With the GIL. */
static char* type_name(PyObject* type) {
  PyObject* module = PyObject_GetAttrString(type, "__module__");
  PyObject* qualname = PyObject_GetAttrString(type, "__qualname__");
  const char* m = module != NULL && PyUnicode_Check(module) ? PyUnicode_AsUTF8(module) : NULL;
  const char* q = qualname != NULL && PyUnicode_Check(qualname) ? PyUnicode_AsUTF8(qualname)
                                                                : ((PyTypeObject*)type)->tp_name;
  strbuf b = {0};
  if (m != NULL && strcmp(m, "builtins") != 0) {
    sb_str(&b, m);
    sb_str(&b, ".");
  }
  sb_str(&b, q != NULL ? q : "?");
  Py_XDECREF(module);
  Py_XDECREF(qualname);
  PyErr_Clear();
  return b.text;
}

void dli_san_note_producer(PyObject* type) {
  /* Types seen, by address: one more type past the table's end is noted again each time it
   * comes, which only repeats the note. */
  static PyObject* seen[256];
  static size_t seen_count;
  if (!dli_san_recording()) return;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < seen_count; i++) {
    if (seen[i] == type) {
      pthread_mutex_unlock(&lock);
      return;
    }
  }
  if (seen_count < sizeof seen / sizeof seen[0]) seen[seen_count++] = type;
  pthread_mutex_unlock(&lock);
  /* Only a producer: what has no __dlpack__ (an int handed to from_dlpack) is refused. The
   * name is read outside the lock, which Python code may run under. */
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  int producer = PyObject_HasAttrString(type, "__dlpack__");
  char* name = producer ? type_name(type) : NULL;
  PyErr_Restore(exc_type, exc_value, exc_tb);
  if (name == NULL) return;
  strbuf b = {0};
  sb_str(&b, "dlinterop sanitizer: the memory of ");
  sb_str(&b, name);
  sb_str(&b,
         " is not dlinterop's: released, it is not quarantined, so a read after its "
         "release goes unseen here (AddressSanitizer sees it); the deleter calls and "
         "consumes of its capsules are watched\n");
  free(name);
  if (b.text != NULL) {
    pthread_mutex_lock(&lock);
    note(b.text);
    pthread_mutex_unlock(&lock);
  }
  free(b.text);
}

void* dli_san_host_alloc(size_t nbytes, size_t alignment, int zero, void** base_out) {
  (void)zero; /* fresh anonymous pages are zero */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t extra = alignment > page ? alignment : 0;
  size_t len = nbytes + extra;
  if (len < nbytes || len > SIZE_MAX - page) return NULL;
  len = (len + page - 1) / page * page;
  if (len == 0) len = page;
  /* At the budget of mappings, the oldest quarantined buffers make room; where all are
   * live, this one is allocated as usual (NULL), unwatched, and that is said once. */
  pthread_mutex_lock(&lock);
  int gil = holds_gil();
  while (map_count >= map_budget && evict_one(gil, DLI_SAN_BUFFER)) {
  }
  if (map_count >= map_budget) {
    if (!budget_noted) {
      char text[320];
      snprintf(text, sizeof text,
               "dlinterop sanitizer: %zu host buffers watched, each a mapping of its own, a "
               "quarter of this process's limit (vm.max_map_count = %zu): while so many are "
               "live, more are allocated as usual, unwatched\n",
               map_count, map_limit);
      note(text);
      budget_noted = 1;
    }
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  map_count++;
  pthread_mutex_unlock(&lock);
  /* NULL where the kernel refuses the mapping all the same: allocated as usual, unwatched. */
  void* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    pthread_mutex_lock(&lock);
    map_count--;
    pthread_mutex_unlock(&lock);
    return NULL;
  }
  uintptr_t data = ((uintptr_t)map + alignment - 1) & ~((uintptr_t)alignment - 1);
  char* made = capture_stack();
  pthread_mutex_lock(&lock);
  entry* e = add(map, DLI_SAN_BUFFER, NULL, made);
  if (e != NULL) {
    e->map = map;
    e->map_len = len;
    e->data = (void*)data;
    e->nbytes = nbytes;
  }
  if (e == NULL) map_count--;
  update_active();
  pthread_mutex_unlock(&lock);
  if (e == NULL) {
    munmap(map, len);
    return NULL;
  }
  *base_out = map;
  return (void*)data;
}

int dli_san_host_free(void* base, size_t nbytes) {
  (void)nbytes;
  char* here = dli_san_recording() ? capture_stack() : NULL;
  pthread_mutex_lock(&lock);
  entry* e = find(base, DLI_SAN_BUFFER);
  if (e == NULL) {
    pthread_mutex_unlock(&lock);
    free(here);
    return 0;
  }
  if (e->released) {
    report("a dlinterop host buffer released twice", NULL, "allocated at", e->made,
           "first released at", e->released_at, "released again at",
           here ? here : "    (not recorded: the sanitizer is off)\n");
    pthread_mutex_unlock(&lock);
    free(here);
    return 1;
  }
  live_count--;
  /* Quarantined: the pages go back to the system (MADV_DONTNEED) but stay reserved and
   * inaccessible, so that an access faults. Where that fails, unmapped at once. */
  if (recording && madvise(e->map, e->map_len, MADV_DONTNEED) == 0 &&
      mprotect(e->map, e->map_len, PROT_NONE) == 0) {
    /* The fault handler first again, should one have come since (faulthandler, which
     * pytest turns on): a fault's address reaches only the first. */
    install(SIGSEGV, &previous_segv);
    install(SIGBUS, &previous_bus);
    e->released = 1;
    e->released_at = here;
    here = NULL;
    quarantine(e);
  } else {
    munmap(e->map, e->map_len);
    map_count--;
    unlink_entry(e);
    free_entry(e);
  }
  update_active();
  pthread_mutex_unlock(&lock);
  free(here);
  return 1;
}

/* ---- for Python ----------------------------------------------------------------------- */

typedef struct {
  int kind;
  const void* key;
  size_t nbytes;
  char* what;
  char* made;
} snapshot;

PyObject* dli_san_live(void) {
  /* Copied under the lock, made into Python objects after it (no Python call while
   * holding it). */
  pthread_mutex_lock(&lock);
  size_t n = 0, cap = live_count;
  snapshot* rows = cap ? calloc(cap, sizeof(snapshot)) : NULL;
  if (cap && rows == NULL) {
    pthread_mutex_unlock(&lock);
    return PyErr_NoMemory();
  }
  for (size_t b = 0; buckets != NULL && b < ((size_t)1 << BUCKET_BITS) && n < cap; b++) {
    for (entry* e = buckets[b]; e != NULL && n < cap; e = e->next) {
      if (e->released) continue;
      rows[n].kind = e->kind;
      rows[n].key = e->key;
      rows[n].nbytes = e->nbytes;
      rows[n].what = e->what ? copy_text(e->what) : NULL;
      rows[n].made = e->made ? copy_text(e->made) : NULL;
      n++;
    }
  }
  pthread_mutex_unlock(&lock);
  static const char* kinds[] = {"", "export", "import", "buffer", "", "watched"};
  PyObject* out = PyList_New(0);
  for (size_t i = 0; i < n; i++) {
    if (out != NULL) {
      PyObject* row = Py_BuildValue("(snnss)", kinds[rows[i].kind], (Py_ssize_t)rows[i].key,
                                    (Py_ssize_t)rows[i].nbytes, rows[i].what ? rows[i].what : "",
                                    rows[i].made ? rows[i].made : "");
      if (row == NULL || PyList_Append(out, row) < 0) Py_CLEAR(out);
      Py_XDECREF(row);
    }
    free(rows[i].what);
    free(rows[i].made);
  }
  free(rows);
  return out;
}

PyObject* dli_san_reports(int clear) {
  pthread_mutex_lock(&lock);
  size_t n = report_count;
  char** texts = n ? malloc(n * sizeof(char*)) : NULL;
  if (n && texts == NULL) {
    pthread_mutex_unlock(&lock);
    return PyErr_NoMemory();
  }
  for (size_t i = 0; i < n; i++) {
    texts[i] = clear ? reports[i] : copy_text(reports[i]);
  }
  if (clear) report_count = 0;
  pthread_mutex_unlock(&lock);
  PyObject* out = PyList_New(0);
  for (size_t i = 0; i < n; i++) {
    if (out != NULL && texts[i] != NULL) {
      PyObject* text = PyUnicode_DecodeUTF8(texts[i], (Py_ssize_t)strlen(texts[i]), "replace");
      if (text == NULL || PyList_Append(out, text) < 0) Py_CLEAR(out);
      Py_XDECREF(text);
    }
    free(texts[i]);
  }
  free(texts);
  return out;
}

PyObject* dli_san_notes(void) {
  /* Copied under the lock, made into Python objects after it, as dli_san_reports does. */
  pthread_mutex_lock(&lock);
  size_t n = note_count;
  char** texts = n ? calloc(n, sizeof(char*)) : NULL;
  for (size_t i = 0; texts != NULL && i < n; i++) texts[i] = copy_text(notes[i]);
  pthread_mutex_unlock(&lock);
  if (n && texts == NULL) return PyErr_NoMemory();
  PyObject* out = PyList_New(0);
  for (size_t i = 0; i < n; i++) {
    if (out != NULL && texts[i] != NULL) {
      PyObject* text = PyUnicode_DecodeUTF8(texts[i], (Py_ssize_t)strlen(texts[i]), "replace");
      if (text == NULL || PyList_Append(out, text) < 0) Py_CLEAR(out);
      Py_XDECREF(text);
    }
    free(texts[i]);
  }
  free(texts);
  return out;
}
