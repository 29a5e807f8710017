/*
 * A per-type cache that does not keep its types alive: what dlinterop learned about a
 * producer type (or how to hand tensors back to a framework), found by the type's address
 * and trusted while the type's version tag is the one it was learned under.
 *
 * The table holds the value and a weak reference to the type, whose callback (given by the
 * module that owns the table) removes the entry when the type dies; a type made later at
 * the same address has another version tag, so an entry can never answer for it. A lookup
 * is a compare with the entry found last, else a hash of the address and a probe: no
 * allocation and no Python call.
 *
 * With a GIL the GIL orders every access. Without one (free-threaded CPython) a mutex guards
 * the table for the few instructions of a lookup or an update, and no Python code runs
 * while it is held: the weak reference is made before, and replaced or removed values are
 * released after.
 */
#ifndef DLINTEROP_TYPE_CACHE_H_
#define DLINTEROP_TYPE_CACHE_H_

#include <Python.h>
#include <stdint.h>

typedef struct {
  PyObject* type;   /* borrowed (the weak reference's callback removes the entry before the
                       type is freed); NULL: never used; DLI_TYPE_CACHE_REMOVED: removed */
  unsigned int tag; /* the type's version tag the value was made under */
  PyObject* value;  /* owned */
  PyObject* ref;    /* owned: weakref.ref(type, callback) */
} dli_type_entry;

typedef struct {
  dli_type_entry* entries; /* a power of two of them, or NULL before the first insert */
  size_t mask;
  size_t live;   /* entries holding a type */
  size_t filled; /* entries holding a type or removed (probe chains run through both) */
  /* The entry found last, checked before any probe: a loop over one type's objects costs a
     compare. last_value is borrowed from its entry, and cleared with it. */
  PyObject* last_type;
  unsigned int last_tag;
  PyObject* last_value;
#ifdef Py_GIL_DISABLED
  PyMutex mutex;
#endif
} dli_type_cache;

#define DLI_TYPE_CACHE_REMOVED ((PyObject*)(uintptr_t)1)

static inline void dli_type_cache_lock(dli_type_cache* cache) {
#ifdef Py_GIL_DISABLED
  PyMutex_Lock(&cache->mutex);
#else
  (void)cache;
#endif
}

static inline void dli_type_cache_unlock(dli_type_cache* cache) {
#ifdef Py_GIL_DISABLED
  PyMutex_Unlock(&cache->mutex);
#else
  (void)cache;
#endif
}

static inline size_t dli_type_cache_slot(const dli_type_cache* cache, PyObject* type) {
  /* Objects are 16-byte aligned: the low bits say nothing. Fibonacci hashing spreads the
     rest over the table. */
  return (size_t)((((uintptr_t)type >> 4) * (uint64_t)0x9E3779B97F4A7C15ull) >> 17) & cache->mask;
}

/* The value for `type` made under version tag `tag`, as a new reference, or NULL (no
   exception) when there is none or it was made under another tag. Never raises. */
static inline PyObject* dli_type_cache_get(dli_type_cache* cache, PyObject* type,
                                           unsigned int tag) {
  PyObject* value = NULL;
  size_t i;
  if (tag == 0) return NULL; /* no valid tag: nothing can be trusted */
  dli_type_cache_lock(cache);
  if (type == cache->last_type && tag == cache->last_tag) {
    value = cache->last_value;
    Py_INCREF(value);
  } else if (cache->entries != NULL) {
    for (i = dli_type_cache_slot(cache, type);; i = (i + 1) & cache->mask) {
      dli_type_entry* entry = &cache->entries[i];
      if (entry->type == type) {
        if (entry->tag == tag) {
          value = entry->value;
          Py_INCREF(value);
          cache->last_type = type;
          cache->last_tag = tag;
          cache->last_value = value;
        }
        break;
      }
      if (entry->type == NULL) break;
    }
  }
  dli_type_cache_unlock(cache);
  return value;
}

/* With a GIL, the value found last for `type` under `tag`, borrowed (valid until the next
   call that may run Python code), or NULL: the inline front of dli_type_cache_get for the
   hot paths. Without a GIL, always NULL (only dli_type_cache_get hands out references). */
static inline PyObject* dli_type_cache_last(dli_type_cache* cache, PyObject* type,
                                            unsigned int tag) {
#ifdef Py_GIL_DISABLED
  (void)cache;
  (void)type;
  (void)tag;
  return NULL;
#else
  return (type == cache->last_type && tag == cache->last_tag && tag != 0) ? cache->last_value
                                                                          : NULL;
#endif
}

/* Moves the live entries into a table of `capacity` entries (a power of two). Called with
   the lock held; touches no Python object. -1 when out of memory (the table is unchanged). */
static int dli_type_cache_resize(dli_type_cache* cache, size_t capacity) {
  dli_type_entry* old = cache->entries;
  size_t old_capacity = old == NULL ? 0 : cache->mask + 1;
  dli_type_entry* entries = (dli_type_entry*)PyMem_RawCalloc(capacity, sizeof(dli_type_entry));
  size_t i, j;
  if (entries == NULL) return -1;
  cache->entries = entries;
  cache->mask = capacity - 1;
  cache->filled = cache->live;
  for (i = 0; i < old_capacity; i++) {
    if (old[i].type == NULL || old[i].type == DLI_TYPE_CACHE_REMOVED) continue;
    for (j = dli_type_cache_slot(cache, old[i].type); entries[j].type != NULL;
         j = (j + 1) & cache->mask) {
    }
    entries[j] = old[i];
  }
  PyMem_RawFree(old);
  return 0;
}

/* Stores `value` for `type` under `tag`, replacing what was stored for it. `callback` is
   called with the weak reference when the type dies; it must call dli_type_cache_forget.
   0 on success; -1 with an exception set. */
static int dli_type_cache_put(dli_type_cache* cache, PyObject* type, unsigned int tag,
                              PyObject* value, PyObject* callback) {
  PyObject* ref = PyWeakref_NewRef(type, callback); /* before the lock: it may run the GC */
  PyObject *released_value = NULL, *released_ref = NULL;
  dli_type_entry *entry = NULL, *free_entry = NULL;
  size_t i;
  if (ref == NULL) return -1;
  dli_type_cache_lock(cache);
  if (cache->entries == NULL || 3 * (cache->filled + 1) > 2 * (cache->mask + 1)) {
    size_t capacity = cache->entries == NULL ? 16 : cache->mask + 1;
    while (3 * (cache->live + 1) > capacity) capacity *= 2;
    if (dli_type_cache_resize(cache, capacity) != 0) {
      dli_type_cache_unlock(cache);
      Py_DECREF(ref);
      PyErr_NoMemory();
      return -1;
    }
  }
  for (i = dli_type_cache_slot(cache, type);; i = (i + 1) & cache->mask) {
    dli_type_entry* candidate = &cache->entries[i];
    if (candidate->type == type) {
      entry = candidate;
      break;
    }
    if (candidate->type == DLI_TYPE_CACHE_REMOVED && free_entry == NULL) free_entry = candidate;
    if (candidate->type == NULL) {
      if (free_entry == NULL) {
        free_entry = candidate;
        cache->filled++;
      }
      break;
    }
  }
  if (entry != NULL) {
    released_value = entry->value;
    released_ref = entry->ref;
  } else {
    entry = free_entry;
    entry->type = type;
    cache->live++;
  }
  Py_INCREF(value);
  entry->value = value;
  entry->tag = tag;
  entry->ref = ref;
  if (tag != 0) { /* a value made under no valid tag is never found */
    cache->last_type = type;
    cache->last_tag = tag;
    cache->last_value = value;
  } else if (cache->last_type == type) {
    cache->last_type = NULL;
    cache->last_value = NULL;
  }
  dli_type_cache_unlock(cache);
  Py_XDECREF(released_value);
  Py_XDECREF(released_ref);
  return 0;
}

/* Removes the entry whose weak reference is `ref` (its type died). Never raises. */
static void dli_type_cache_forget(dli_type_cache* cache, PyObject* ref) {
  PyObject *released_value = NULL, *released_ref = NULL;
  size_t i;
  dli_type_cache_lock(cache);
  if (cache->entries != NULL) {
    for (i = 0; i <= cache->mask; i++) {
      dli_type_entry* entry = &cache->entries[i];
      if (entry->ref == ref && entry->type != NULL && entry->type != DLI_TYPE_CACHE_REMOVED) {
        released_value = entry->value;
        released_ref = entry->ref;
        if (cache->last_value == released_value) {
          cache->last_type = NULL;
          cache->last_value = NULL;
        }
        entry->type = DLI_TYPE_CACHE_REMOVED;
        entry->value = NULL;
        entry->ref = NULL;
        cache->live--;
        break;
      }
    }
  }
  dli_type_cache_unlock(cache);
  Py_XDECREF(released_value);
  Py_XDECREF(released_ref);
}

/* Entries holding a type (a testing aid's count). */
static inline Py_ssize_t dli_type_cache_size(dli_type_cache* cache) {
  Py_ssize_t live;
  dli_type_cache_lock(cache);
  live = (Py_ssize_t)cache->live;
  dli_type_cache_unlock(cache);
  return live;
}

#endif /* DLINTEROP_TYPE_CACHE_H_ */
