/* dlinterop's lifetime sanitizer: see sanitizer.h. */
#include "sanitizer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int dli_san_active;

typedef struct entry {
  const void* key;
  struct entry* next;  /* the hash chain */
  struct entry* qnext; /* the quarantine, oldest first */
  int kind;
  int released;
  char* what;
  char* made;        /* the stack where it was made (or consumed, for an import) */
  char* released_at; /* the stack of its first release */
  void* map;         /* a buffer's pages */
  size_t map_len;
  size_t nbytes;
} entry;

#define BUCKET_BITS 16
static entry** buckets;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int recording;
static size_t live_count;
static entry* q_head;
static entry* q_tail;
static size_t q_count, q_bytes, q_max_count, q_max_bytes;
static int max_frames = 16;
static char** reports;
static size_t report_count, report_cap;

/* ---- the Python stack as text --------------------------------------------------------- */

typedef struct {
  char* text;
  size_t len, cap;
} strbuf;

static void sb_add(strbuf* b, const char* s, size_t n) {
  if (b->text == NULL && b->cap == (size_t)-1) return; /* out of memory before */
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + n + 1 > cap) cap *= 2;
    char* grown = realloc(b->text, cap);
    if (grown == NULL) {
      free(b->text);
      b->text = NULL;
      b->cap = (size_t)-1;
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

/* The calling thread's Python stack, most recent call last, as the traceback module
 * prints one: malloc'd text (or NULL when out of memory). Needs the GIL; without it, says
 * that there is no Python stack to show. */
static char* capture_stack(void) {
  if (!PyGILState_Check()) {
    return copy_text("    (no Python stack: called from C code without the GIL)\n");
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyFrameObject* frames[64];
  int limit = max_frames < 64 ? max_frames : 64;
  int n = 0, more = 0;
  PyFrameObject* frame = PyThreadState_GetFrame(PyThreadState_Get());
  while (frame != NULL) {
    PyFrameObject* back = PyFrame_GetBack(frame);
    if (n < limit) {
      frames[n++] = frame; /* the reference is kept until the frame is printed */
    } else {
      more++;
      Py_DECREF(frame);
    }
    frame = back;
  }
  strbuf b = {0};
  char line[64];
  if (n == 0) sb_str(&b, "    (no Python stack)\n");
  if (more > 0) {
    snprintf(line, sizeof line, "    ... %d older frames\n", more);
    sb_str(&b, line);
  }
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

static void write_all(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

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
    sb_str(&b, ":\n");
    sb_str(&b, stacks[i] ? stacks[i] : "    (not recorded)\n");
  }
  if (b.text == NULL) return;
  write_all(b.text);
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

/* Frees the oldest quarantined record: its buffer unmapped, its export block freed (which
 * needs the GIL: without it the record stays, for a later call). 0 when it could not. */
static int evict_oldest(void) {
  entry* e = q_head;
  if (e == NULL) return 0;
  if (e->kind == DLI_SAN_EXPORT && !PyGILState_Check()) return 0;
  q_head = e->qnext;
  if (q_head == NULL) q_tail = NULL;
  q_count--;
  if (e->kind == DLI_SAN_BUFFER) {
    q_bytes -= e->map_len;
    munmap(e->map, e->map_len);
  } else if (e->kind == DLI_SAN_EXPORT) {
    PyMem_Free((void*)e->key);
  }
  unlink_entry(e);
  free_entry(e);
  return 1;
}

static void quarantine(entry* e) {
  e->qnext = NULL;
  if (q_tail != NULL) {
    q_tail->qnext = e;
  } else {
    q_head = e;
  }
  q_tail = e;
  q_count++;
  if (e->kind == DLI_SAN_BUFFER) q_bytes += e->map_len;
  while ((q_count > q_max_count || q_bytes > q_max_bytes) && evict_oldest()) {
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
  e->next = buckets[b];
  buckets[b] = e;
  live_count++;
  return e;
}

/* ---- the fault handler ---------------------------------------------------------------- */

static struct sigaction previous_segv, previous_bus;
static int handler_installed;

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)context;
  uintptr_t addr = (uintptr_t)info->si_addr;
  /* Read without the lock (a signal handler cannot take it): the quarantine changes only
   * when memory is released, which the faulting thread is not doing. */
  for (entry* e = q_head; e != NULL; e = e->qnext) {
    if (e->kind == DLI_SAN_BUFFER && addr >= (uintptr_t)e->map &&
        addr < (uintptr_t)e->map + e->map_len) {
      char line[160];
      snprintf(line, sizeof line,
               "dlinterop sanitizer: access to released memory at %p, %zu bytes into a "
               "buffer of %zu bytes dlinterop released\n",
               (void*)addr, (size_t)(addr - (uintptr_t)e->map), e->nbytes);
      write_all(line);
      write_all("  allocated at:\n");
      write_all(e->made ? e->made : "    (not recorded)\n");
      write_all("  released at:\n");
      write_all(e->released_at ? e->released_at : "    (not recorded)\n");
      break;
    }
  }
  /* The previous handler (Python's faulthandler, or the default: the process ends) takes
   * the fault when the access is tried again on return. */
  sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, NULL);
}

static void install_handler(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previous_segv);
  sigaction(SIGBUS, &action, &previous_bus);
  handler_installed = 1;
}

/* ---- the API -------------------------------------------------------------------------- */

int dli_san_start(size_t quarantine_count, size_t quarantine_bytes, int frames) {
  pthread_mutex_lock(&lock);
  if (buckets == NULL) {
    buckets = calloc((size_t)1 << BUCKET_BITS, sizeof(entry*));
    if (buckets == NULL) {
      pthread_mutex_unlock(&lock);
      PyErr_NoMemory();
      return -1;
    }
  }
  q_max_count = quarantine_count;
  q_max_bytes = quarantine_bytes;
  max_frames = frames < 1 ? 1 : frames;
  recording = 1;
  /* Installed again at each start: a handler installed since (faulthandler's) then calls
   * through to it, and the fault still reaches the one before. */
  install_handler();
  update_active();
  pthread_mutex_unlock(&lock);
  return 0;
}

void dli_san_stop(void) {
  pthread_mutex_lock(&lock);
  recording = 0;
  while (evict_oldest()) {
  }
  update_active();
  pthread_mutex_unlock(&lock);
}

int dli_san_recording(void) { return __atomic_load_n(&recording, __ATOMIC_RELAXED); }

void dli_san_made(const void* key, int kind, const char* what) {
  if (!dli_san_recording() || key == NULL) return;
  char* made = capture_stack();
  pthread_mutex_lock(&lock);
  add(key, kind, what, made);
  update_active();
  pthread_mutex_unlock(&lock);
}

int dli_san_export_released(void* block) {
  char* here = capture_stack();
  int verdict = 0;
  pthread_mutex_lock(&lock);
  entry* e = find(block, DLI_SAN_EXPORT);
  if (e == NULL) {
    free(here);
  } else if (e->released) {
    report("a dlinterop export released twice (its deleter called again)", e->what, "exported at",
           e->made, "first released at", e->released_at, "released again at", here);
    free(here);
    verdict = 2;
  } else if (!recording) {
    unlink_entry(e);
    free_entry(e);
    live_count--;
    free(here);
  } else {
    e->released = 1;
    e->released_at = here;
    live_count--;
    quarantine(e);
    verdict = 1;
  }
  update_active();
  pthread_mutex_unlock(&lock);
  return verdict;
}

void dli_san_released_after_shutdown(const void* block) {
  pthread_mutex_lock(&lock);
  entry* e = find(block, DLI_SAN_EXPORT);
  if (e != NULL) {
    report(e->released ? "a dlinterop export released twice, the second time after "
                         "interpreter shutdown"
                       : "a dlinterop export released after interpreter shutdown (its "
                         "memory is left to the process's end)",
           e->what, "exported at", e->made, e->released ? "first released at" : NULL,
           e->released_at, NULL, NULL);
  }
  pthread_mutex_unlock(&lock);
}

void dli_san_import_released(const void* key) {
  char* here = recording ? capture_stack() : NULL;
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
  free(here);
  update_active();
  pthread_mutex_unlock(&lock);
}

void dli_san_consumed_twice(const void* key, const char* name) {
  if (key == NULL) return;
  char* here = capture_stack();
  pthread_mutex_lock(&lock);
  entry* e = find(key, 0);
  if (e != NULL && e->kind == DLI_SAN_IMPORT) {
    report("a DLPack capsule consumed twice", name, "first consumed at", e->made,
           e->released ? "its tensor released at" : NULL, e->released_at,
           "handed to dlinterop again at", here);
  } else if (e != NULL && e->kind == DLI_SAN_EXPORT) {
    report("a DLPack capsule consumed twice", name, "exported at", e->made,
           e->released ? "consumed (its deleter called) at"
                       : "consumed by a consumer "
                         "outside dlinterop; its tensor "
                         "is still live",
           e->released ? e->released_at : "", "handed to dlinterop again at", here);
  }
  free(here);
  pthread_mutex_unlock(&lock);
}

void* dli_san_host_alloc(size_t nbytes, size_t alignment, int zero, void** base_out) {
  (void)zero; /* fresh anonymous pages are zero */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t extra = alignment > page ? alignment : 0;
  size_t len = nbytes + extra;
  if (len < nbytes || len > SIZE_MAX - page) return NULL;
  len = (len + page - 1) / page * page;
  if (len == 0) len = page;
  void* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return NULL;
  uintptr_t data = ((uintptr_t)map + alignment - 1) & ~((uintptr_t)alignment - 1);
  char* made = capture_stack();
  pthread_mutex_lock(&lock);
  entry* e = add(map, DLI_SAN_BUFFER, NULL, made);
  if (e != NULL) {
    e->map = map;
    e->map_len = len;
    e->nbytes = nbytes;
  }
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
  if (e == NULL || e->released) {
    pthread_mutex_unlock(&lock);
    free(here);
    return 0;
  }
  live_count--;
  if (recording) {
    mprotect(e->map, e->map_len, PROT_NONE);
    e->released = 1;
    e->released_at = here;
    here = NULL;
    quarantine(e);
  } else {
    munmap(e->map, e->map_len);
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
  static const char* kinds[] = {"", "export", "import", "buffer"};
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
