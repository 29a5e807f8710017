/*
 * How much memory this process can have, read from what Linux says about the machine
 * (/proc/meminfo) and about the memory cgroups the process runs in (v1 or v2): the rule
 * every allocation dlinterop makes from a size it was given is checked against, before any
 * page is reserved. Plain C: no Python, no GIL needed.
 */
#ifndef DLINTEROP_MEMORY_LIMITS_H_
#define DLINTEROP_MEMORY_LIMITS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a bound is where nothing can be read (no /proc: another OS, a sandbox). */
#define DLI_MEMORY_UNKNOWN UINT64_MAX

/* Requests smaller than this are not checked: reading the limits costs more than making
   one, and no process runs under limits so tight that one of them decides. */
#define DLI_MEMORY_CHECK_FROM ((uint64_t)64 << 20)

typedef struct {
  /* What this process can take now without the kernel taking it from another: the
     machine's MemAvailable plus its free swap, and, in each memory cgroup above it with a
     limit, that limit less the cgroup's usage (its inactive file cache not counted as
     used: the kernel drops that first). */
  uint64_t available;
  /* The most this process could ever have: the machine's memory plus its swap, within
     each cgroup's limit plus the swap that cgroup may use. */
  uint64_t ceiling;
} dli_memory_room;

/* Reads both bounds now (a few small files: tens of microseconds). Never fails: a bound
   that cannot be read is DLI_MEMORY_UNKNOWN. */
void dli_memory_room_read(dli_memory_room* out);

/* Whether nbytes can be reserved now, whole, without the kernel taking memory from another
   process: nbytes <= available (always 1 for a request under DLI_MEMORY_CHECK_FROM), with
   *available_out set to what was read. The rule for memory whose pages are taken when it
   is made (shared-memory segments, pinned host memory). */
int dli_memory_fits_now(uint64_t nbytes, uint64_t* available_out);

/* The ceiling above, read once per process (limits are set when a machine or container
   starts, not while it runs) and kept. */
uint64_t dli_memory_ceiling(void);

/* Points the reads at other roots than "/proc" and "/sys" (a test's fake file trees), or
   back at the real ones with NULLs; forgets the kept ceiling. 0, or -1 (nothing changed)
   for a root longer than 1023 bytes. Not thread-safe: for tests. */
int dli_memory_set_roots(const char* proc_root, const char* sys_root);

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_MEMORY_LIMITS_H_ */
