/* The interned layouts (layouts_interned.h): shape-then-strides blocks kept for the life of
 * the process, one per distinct layout, so that the NumPy exchange table's non-owning views
 * (numpy_route.c) need no allocation and outlive their arrays.
 */
#include "layouts_interned.h"

#include <string.h>

/* The interned layouts: open addressing over a fixed table, probed linearly for at most
 * LAYOUT_PROBES slots. A slot goes from NULL to its block once and never back, so a
 * search may stop at the first NULL and read slots without a lock; blocks are published
 * with release stores (under the GIL, which orders them already, plain ones). A block is
 * {n, layout[0..n-1]}. At most LAYOUT_SLOTS blocks of (1 + 2 * 64) int64 (about 4 MiB)
 * however many arrays come and go: only distinct layouts take one. */
#define LAYOUT_SLOTS 4096
#define LAYOUT_PROBES 16

static int64_t* layout_slots[LAYOUT_SLOTS];
/* The block found or made last, tried before the hash: a loop over arrays of one layout
 * costs a compare. Blocks are never freed, so an outdated value is still a block. */
int64_t* dli_layout_last_block;

#if DLI_FREE_THREADED
static PyMutex layout_lock;
#define LAYOUT_LOAD(slot) __atomic_load_n(slot, __ATOMIC_ACQUIRE)
#define LAYOUT_STORE(slot, block) __atomic_store_n(slot, block, __ATOMIC_RELEASE)
#else
#define LAYOUT_LOAD(slot) (*(int64_t* volatile*)(slot))
#define LAYOUT_STORE(slot, block) (*(int64_t* volatile*)(slot) = (block))
#endif

/* Whether block (n, then n values) holds layout[0:n]: a loop, not memcmp's call, for the
 * few values of a layout. */
static inline int layout_is(const int64_t* block, const int64_t* layout, int n) {
  int i;
  if (block[0] != n) {
    return 0;
  }
  for (i = 0; i < n; i++) {
    if (block[1 + i] != layout[i]) {
      return 0;
    }
  }
  return 1;
}

/* The block holding layout[0:n] among the probed slots, or NULL with *empty the first
 * NULL slot (LAYOUT_SLOTS when every probed slot is taken). */
static const int64_t* layout_find(const int64_t* layout, int n, size_t* empty) {
  uint64_t hash = 1469598103934665603ULL ^ (uint64_t)n; /* FNV-1a over the values */
  int i;
  for (i = 0; i < n; i++) {
    hash = (hash ^ (uint64_t)layout[i]) * 1099511628211ULL;
  }
  for (i = 0; i < LAYOUT_PROBES; i++) {
    size_t slot = (size_t)((hash + (uint64_t)i) % LAYOUT_SLOTS);
    int64_t* block = LAYOUT_LOAD(&layout_slots[slot]);
    if (block == NULL) {
      *empty = slot;
      return NULL;
    }
    if (layout_is(block, layout, n)) {
      LAYOUT_STORE(&dli_layout_last_block, block);
      return block + 1;
    }
  }
  *empty = LAYOUT_SLOTS;
  return NULL;
}

const int64_t* dli_layout_interned(const int64_t* layout, int n) {
  size_t empty;
  const int64_t* found;
  int64_t* block = LAYOUT_LOAD(&dli_layout_last_block);
  if (block != NULL && layout_is(block, layout, n)) {
    return block + 1;
  }
  found = layout_find(layout, n, &empty);
  if (found != NULL || empty == LAYOUT_SLOTS) {
    return found;
  }
#if DLI_FREE_THREADED
  PyMutex_Lock(&layout_lock);
  found = layout_find(layout, n, &empty); /* another thread may have added it */
  if (found != NULL || empty == LAYOUT_SLOTS) {
    PyMutex_Unlock(&layout_lock);
    return found;
  }
#endif
  block = (int64_t*)PyMem_RawMalloc((size_t)(n + 1) * sizeof(int64_t));
  if (block != NULL) {
    block[0] = n;
    memcpy(block + 1, layout, (size_t)n * sizeof(int64_t));
    LAYOUT_STORE(&layout_slots[empty], block);
    LAYOUT_STORE(&dli_layout_last_block, block);
    found = block + 1;
  }
#if DLI_FREE_THREADED
  PyMutex_Unlock(&layout_lock);
#endif
  return found;
}
