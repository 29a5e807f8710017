/* The sanitizer's quarantine (see sanitizer_internal.h): released records kept a while
 * before they are freed, so that a second release can be told; and the host buffers it
 * watches, each on pages of its own, made inaccessible once released. */
#include "sanitizer_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

entry* san_q_head;
static entry* q_tail;
size_t san_q_count;
static size_t q_bytes;
/* The quarantine's limits before dli_san_start sets them (deleters watched for the pytest
 * plugin, with the sanitizer off): dlinterop.sanitizer's defaults. */
size_t san_q_max_count = 4096, san_q_max_bytes = (size_t)256 << 20;

/* Host buffers on mappings of their own, live or quarantined: kept under map_budget, a
 * quarter of the kernel's limit on a process's mappings (vm.max_map_count), so that the
 * program's own mappings (thread stacks, malloc's arenas, files) never run out. */
static size_t map_count, map_budget, map_limit;
static int budget_noted;

void san_q_unlink(entry* e) {
  if (e->qprev != NULL) {
    e->qprev->qnext = e->qnext;
  } else {
    san_q_head = e->qnext;
  }
  if (e->qnext != NULL) {
    e->qnext->qprev = e->qprev;
  } else {
    q_tail = e->qprev;
  }
  san_q_count--;
}

/* Frees the oldest quarantined record that can be freed now: its buffer unmapped, its
 * export block freed (PyMem_Free needs the GIL: without it such a record is skipped, for a
 * later call). 0 when there is none. Under the lock.
 *
 * The fault handler reads the quarantine without the lock: a record freed here while
 * another thread faults on memory it names can be missed (the report is best effort; the
 * fault itself still takes its course). */
int san_evict_one(int gil, int kind) {
  for (entry* e = san_q_head; e != NULL; e = e->qnext) {
    if (kind != 0 && e->kind != kind) continue;
    if (e->kind == DLI_SAN_EXPORT && !e->malloc_block && !gil) continue;
    san_q_unlink(e);
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
    san_unlink_entry(e);
    san_free_entry(e);
    return 1;
  }
  return 0;
}

void san_quarantine(entry* e) {
  e->qnext = NULL;
  e->qprev = q_tail;
  if (q_tail != NULL) {
    q_tail->qnext = e;
  } else {
    san_q_head = e;
  }
  q_tail = e;
  san_q_count++;
  if (e->kind == DLI_SAN_BUFFER) q_bytes += e->map_len;
  if (san_q_count > san_q_max_count || q_bytes > san_q_max_bytes) {
    int gil = san_holds_gil();
    while ((san_q_count > san_q_max_count || q_bytes > san_q_max_bytes) && san_evict_one(gil, 0)) {
    }
  }
}
/* ---- host buffers on pages of their own ------------------------------------------------ */

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

/* The budget of mappings, the first time: a quarter of vm.max_map_count. Under the lock. */
void san_init_map_budget(void) {
  if (map_budget == 0) {
    map_limit = read_map_limit();
    map_budget = map_limit / 4;
  }
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
  pthread_mutex_lock(&san_lock);
  int gil = san_holds_gil();
  while (map_count >= map_budget && san_evict_one(gil, DLI_SAN_BUFFER)) {
  }
  if (map_count >= map_budget) {
    if (!budget_noted) {
      char text[320];
      snprintf(text, sizeof text,
               "dlinterop sanitizer: %zu host buffers watched, each a mapping of its own, a "
               "quarter of this process's limit (vm.max_map_count = %zu): while so many are "
               "live, more are allocated as usual, unwatched\n",
               map_count, map_limit);
      san_note(text);
      budget_noted = 1;
    }
    pthread_mutex_unlock(&san_lock);
    return NULL;
  }
  map_count++;
  pthread_mutex_unlock(&san_lock);
  /* NULL where the kernel refuses the mapping all the same: allocated as usual, unwatched. */
  void* map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    pthread_mutex_lock(&san_lock);
    map_count--;
    pthread_mutex_unlock(&san_lock);
    return NULL;
  }
  uintptr_t data = ((uintptr_t)map + alignment - 1) & ~((uintptr_t)alignment - 1);
  char* made = san_capture_stack();
  pthread_mutex_lock(&san_lock);
  entry* e = san_add(map, DLI_SAN_BUFFER, NULL, made);
  if (e != NULL) {
    e->map = map;
    e->map_len = len;
    e->data = (void*)data;
    e->nbytes = nbytes;
  }
  if (e == NULL) map_count--;
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  if (e == NULL) {
    munmap(map, len);
    return NULL;
  }
  *base_out = map;
  return (void*)data;
}

int dli_san_host_free(void* base, size_t nbytes) {
  (void)nbytes;
  char* here = dli_san_recording() ? san_capture_stack() : NULL;
  pthread_mutex_lock(&san_lock);
  entry* e = san_find(base, DLI_SAN_BUFFER);
  if (e == NULL) {
    pthread_mutex_unlock(&san_lock);
    free(here);
    return 0;
  }
  if (e->released) {
    san_report("a dlinterop host buffer released twice", NULL, "allocated at", e->made,
               "first released at", e->released_at, "released again at",
               here ? here : "    (not recorded: the sanitizer is off)\n");
    pthread_mutex_unlock(&san_lock);
    free(here);
    return 1;
  }
  san_live_count--;
  /* Quarantined: the pages go back to the system (MADV_DONTNEED) but stay reserved and
   * inaccessible, so that an access faults. Where that fails, unmapped at once. */
  if (san_recording && madvise(e->map, e->map_len, MADV_DONTNEED) == 0 &&
      mprotect(e->map, e->map_len, PROT_NONE) == 0) {
    /* The fault handler first again, should one have come since (faulthandler, which
     * pytest turns on): a fault's address reaches only the first. */
    san_install_fault_handler();
    e->released = 1;
    e->released_at = here;
    here = NULL;
    san_quarantine(e);
  } else {
    munmap(e->map, e->map_len);
    map_count--;
    san_unlink_entry(e);
    san_free_entry(e);
  }
  san_update_active();
  pthread_mutex_unlock(&san_lock);
  free(here);
  return 1;
}
