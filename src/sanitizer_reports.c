/* The sanitizer's reports and notes (see sanitizer_internal.h): where they are written, the
 * lists kept of them, and the lists dlinterop.sanitizer reads. */
#include "sanitizer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sanitizer_internal.h"

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

void san_write_all(const char* s, size_t n) {
  int fd = report_fd >= 0 ? report_fd : 2;
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

void san_write_str(const char* s) { san_write_all(s, strlen(s)); }

/* Adds a report and writes it to stderr at once (a crash may follow). Under the lock. */
void san_report(const char* title, const char* what, const char* label1, const char* stack1,
                const char* label2, const char* stack2, const char* label3, const char* stack3) {
  strbuf b = {0};
  san_sb_str(&b, "dlinterop sanitizer: ");
  san_sb_str(&b, title);
  if (what != NULL && what[0]) {
    san_sb_str(&b, " (");
    san_sb_str(&b, what);
    san_sb_str(&b, ")");
  }
  san_sb_str(&b, "\n");
  const char* labels[3] = {label1, label2, label3};
  const char* stacks[3] = {stack1, stack2, stack3};
  for (int i = 0; i < 3; i++) {
    if (labels[i] == NULL) continue;
    san_sb_str(&b, "  ");
    san_sb_str(&b, labels[i]);
    san_sb_str(&b, stacks[i] != NULL ? ":\n" : "\n");
    if (stacks[i] != NULL) san_sb_str(&b, stacks[i]);
  }
  if (b.text == NULL) return;
  if (reports_written) san_write_str(b.text);
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
void san_note(const char* text) {
  if (notes_written) san_write_str(text);
  if (note_count == note_cap) {
    size_t cap = note_cap ? 2 * note_cap : 8;
    char** grown = realloc(notes, cap * sizeof(char*));
    if (grown == NULL) return;
    notes = grown;
    note_cap = cap;
  }
  char* kept = san_copy_text(text);
  if (kept != NULL) notes[note_count++] = kept;
}

void san_keep_stderr(void) {
  if (report_fd < 0) report_fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
}

int dli_san_report_to(int fd, int write_notes) {
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) {
    PyErr_SetFromErrno(PyExc_OSError);
    return -1;
  }
  pthread_mutex_lock(&san_lock);
  int old = report_fd;
  report_fd = copy;
  notes_written = write_notes;
  pthread_mutex_unlock(&san_lock);
  if (old >= 0) close(old);
  return 0;
}

void dli_san_write_reports(int written) {
  pthread_mutex_lock(&san_lock);
  reports_written = written;
  pthread_mutex_unlock(&san_lock);
}

Py_ssize_t dli_san_report_total(void) {
  pthread_mutex_lock(&san_lock);
  Py_ssize_t total = report_total;
  pthread_mutex_unlock(&san_lock);
  return total;
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
    san_sb_str(&b, m);
    san_sb_str(&b, ".");
  }
  san_sb_str(&b, q != NULL ? q : "?");
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
  pthread_mutex_lock(&san_lock);
  for (size_t i = 0; i < seen_count; i++) {
    if (seen[i] == type) {
      pthread_mutex_unlock(&san_lock);
      return;
    }
  }
  if (seen_count < sizeof seen / sizeof seen[0]) seen[seen_count++] = type;
  pthread_mutex_unlock(&san_lock);
  /* Only a producer: what has no __dlpack__ (an int handed to from_dlpack) is refused. The
   * name is read outside the lock, which Python code may run under. */
  PyObject *exc_type, *exc_value, *exc_tb;
  PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  int producer = PyObject_HasAttrString(type, "__dlpack__");
  char* name = producer ? type_name(type) : NULL;
  PyErr_Restore(exc_type, exc_value, exc_tb);
  if (name == NULL) return;
  strbuf b = {0};
  san_sb_str(&b, "dlinterop sanitizer: the memory of ");
  san_sb_str(&b, name);
  san_sb_str(&b,
             " is not dlinterop's: released, it is not quarantined, so a read after its "
             "release goes unseen here (AddressSanitizer sees it); the deleter calls and "
             "consumes of its capsules are watched\n");
  free(name);
  if (b.text != NULL) {
    pthread_mutex_lock(&san_lock);
    san_note(b.text);
    pthread_mutex_unlock(&san_lock);
  }
  free(b.text);
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
  pthread_mutex_lock(&san_lock);
  size_t n = 0, cap = san_live_count;
  snapshot* rows = cap ? calloc(cap, sizeof(snapshot)) : NULL;
  if (cap && rows == NULL) {
    pthread_mutex_unlock(&san_lock);
    return PyErr_NoMemory();
  }
  for (size_t b = 0; san_buckets != NULL && b < ((size_t)1 << BUCKET_BITS) && n < cap; b++) {
    for (entry* e = san_buckets[b]; e != NULL && n < cap; e = e->next) {
      if (e->released) continue;
      rows[n].kind = e->kind;
      rows[n].key = e->key;
      rows[n].nbytes = e->nbytes;
      rows[n].what = e->what ? san_copy_text(e->what) : NULL;
      rows[n].made = e->made ? san_copy_text(e->made) : NULL;
      n++;
    }
  }
  pthread_mutex_unlock(&san_lock);
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
  pthread_mutex_lock(&san_lock);
  size_t n = report_count;
  char** texts = n ? malloc(n * sizeof(char*)) : NULL;
  if (n && texts == NULL) {
    pthread_mutex_unlock(&san_lock);
    return PyErr_NoMemory();
  }
  for (size_t i = 0; i < n; i++) {
    texts[i] = clear ? reports[i] : san_copy_text(reports[i]);
  }
  if (clear) report_count = 0;
  pthread_mutex_unlock(&san_lock);
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
  pthread_mutex_lock(&san_lock);
  size_t n = note_count;
  char** texts = n ? calloc(n, sizeof(char*)) : NULL;
  for (size_t i = 0; texts != NULL && i < n; i++) texts[i] = san_copy_text(notes[i]);
  pthread_mutex_unlock(&san_lock);
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
