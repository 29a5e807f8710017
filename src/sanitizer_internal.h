/*
 * What the parts of dlinterop's lifetime sanitizer share (sanitizer.h is its face to the rest
 * of dlinterop; only these parts include this header):
 *
 *   sanitizer.c             the switch (start, stop) and the hooks of export, import and the
 *                           watched deleters
 *   sanitizer_records.c     the records, in a hash table by address; the Python stack as text
 *   sanitizer_quarantine.c  released records kept a while; host buffers on pages of their own
 *   sanitizer_faults.c      the fault handler: an access to a quarantined buffer, reported
 *   sanitizer_reports.c     reports and notes: where they are written, the lists kept of them,
 *                           the lists dlinterop.sanitizer reads
 *
 * Everything here is read and written under san_lock unless its comment says otherwise.
 */
#ifndef DLINTEROP_SANITIZER_INTERNAL_H_
#define DLINTEROP_SANITIZER_INTERNAL_H_

#include <Python.h>
#include <pthread.h>
#include <stddef.h>

#include "dlpack/dlpack.h"
#include "sanitizer.h"

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

/* Text grown by appending; on a failed allocation `text` is NULL and stays so. */
typedef struct {
  char* text;
  size_t len, cap;
  int failed;
} strbuf;

/* ---- sanitizer.c ------------------------------------------------------------------------ */

extern int san_recording; /* written under the lock, read anywhere through dli_san_recording */

/* ---- sanitizer_records.c ---------------------------------------------------------------- */

#define BUCKET_BITS 16
extern entry** san_buckets;
extern pthread_mutex_t san_lock;
extern size_t san_live_count;
extern int san_max_frames; /* the deepest stack kept */

void san_sb_str(strbuf* b, const char* s);
char* san_copy_text(const char* s);
/* 1 when this thread may call Python (see sanitizer_records.c). Any thread, no lock. */
int san_holds_gil(void);
/* The calling thread's Python stack as text, malloc'd; NULL when out of memory. Not under the
 * lock: taking it may run Python code. */
char* san_capture_stack(void);
entry* san_find(const void* key, int kind);
void san_unlink_entry(entry* e);
void san_update_active(void);
void san_free_entry(entry* e);
int san_ensure_buckets(void);
entry* san_add(const void* key, int kind, const char* what, char* made);

/* ---- sanitizer_quarantine.c ------------------------------------------------------------- */

extern entry* san_q_head; /* oldest first; the fault handler reads it without the lock */
extern size_t san_q_count;
extern size_t san_q_max_count, san_q_max_bytes;

void san_q_unlink(entry* e);
int san_evict_one(int gil, int kind);
void san_quarantine(entry* e);
void san_init_map_budget(void);

/* ---- sanitizer_faults.c ----------------------------------------------------------------- */

/* Puts the fault handler first for SIGSEGV and SIGBUS unless it is there already. */
void san_install_fault_handler(void);

/* ---- sanitizer_reports.c ---------------------------------------------------------------- */

/* Writes to the report stream; async-signal-safe (the fault handler writes with them). */
void san_write_all(const char* s, size_t n);
void san_write_str(const char* s);
void san_report(const char* title, const char* what, const char* label1, const char* stack1,
                const char* label2, const char* stack2, const char* label3, const char* stack3);
void san_note(const char* text);
/* The first time: reports go to a duplicate of fd 2 as it is now. */
void san_keep_stderr(void);

#endif /* DLINTEROP_SANITIZER_INTERNAL_H_ */
