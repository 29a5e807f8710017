/* The interned layouts (layouts_interned.c): a view's shape then strides, kept once per
 * distinct layout for the life of the process. */
#ifndef DLI_LAYOUTS_INTERNED_H
#define DLI_LAYOUTS_INTERNED_H

#include <Python.h>
#include <stdint.h>

#include "threadsafe.h" /* DLI_FREE_THREADED */

/* A copy of layout[0:n] (a view's shape, then its strides) kept for the life of the
 * process, shared by every view with that layout: the exchange table's non-owning views
 * point into it, so they need no allocation and outlive their arrays. NULL once the table
 * of layouts is full (or out of memory), without an exception: the caller keeps its own
 * copy. Called with the GIL held, or any thread on a free-threaded build. */
const int64_t* dli_layout_interned(const int64_t* layout, int n);

/* The block dli_layout_interned found or made last, {n, layout[0..n-1]}, or NULL: a caller
 * may compare a layout with it before asking (blocks are never freed, so an outdated one
 * is still a block). */
extern int64_t* dli_layout_last_block;

static inline const int64_t* dli_layout_last(void) {
#if DLI_FREE_THREADED
  return __atomic_load_n(&dli_layout_last_block, __ATOMIC_ACQUIRE);
#else
  return *(int64_t* volatile*)&dli_layout_last_block;
#endif
}

#endif
