#define _GNU_SOURCE
#include "memory_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The roots the files are read under (dli_memory_set_roots); short, so that every path
   made from one fits in PATH_MAX. */
static char proc_root[1024] = "/proc";
static char sys_root[1024] = "/sys";

/* 0 until read: no machine has no memory. */
static _Atomic uint64_t kept_ceiling = 0;

static uint64_t add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
static uint64_t min(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Reads a whole small file into buf (NUL-terminated, cut at size - 1 bytes): 0, or -1
   where it cannot be read. */
static int read_text(const char* path, char* buf, size_t size) {
  size_t got = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  while (got < size - 1) {
    ssize_t n = read(fd, buf + got, size - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return -1;
    }
    if (n == 0) break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = '\0';
  return 0;
}

/* The number that follows `key` (and the ':' or ' ' after it) at the start of a line of
   `text`, times `unit`; DLI_MEMORY_UNKNOWN where there is no such line. */
static uint64_t field(const char* text, const char* key, uint64_t unit) {
  size_t len = strlen(key);
  for (const char* line = text; line != NULL && *line; line = strchr(line, '\n')) {
    if (*line == '\n') line++;
    if (strncmp(line, key, len) == 0 && (line[len] == ':' || line[len] == ' ')) {
      char* end;
      errno = 0;
      unsigned long long value = strtoull(line + len + 1, &end, 10);
      if (end == line + len + 1 || errno != 0) return DLI_MEMORY_UNKNOWN;
      return value > UINT64_MAX / unit ? UINT64_MAX : (uint64_t)value * unit;
    }
  }
  return DLI_MEMORY_UNKNOWN;
}

/* The number a one-number file holds; DLI_MEMORY_UNKNOWN for "max" (no limit) or where
   the file cannot be read. */
static uint64_t number_in(const char* dir, const char* name) {
  char path[PATH_MAX];
  char text[64];
  char* end;
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
    return DLI_MEMORY_UNKNOWN;
  }
  if (read_text(path, text, sizeof text) != 0) return DLI_MEMORY_UNKNOWN;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  return end == text || errno != 0 ? DLI_MEMORY_UNKNOWN : (uint64_t)value;
}

/* Reads the machine's bounds into `room`; returns its swap (0 where unknown). */
static uint64_t machine_room(dli_memory_room* room) {
  char path[PATH_MAX];
  char text[8192];
  snprintf(path, sizeof path, "%s/meminfo", proc_root);
  if (read_text(path, text, sizeof text) != 0) return 0;
  uint64_t total = field(text, "MemTotal", 1024);
  uint64_t available = field(text, "MemAvailable", 1024);
  uint64_t swap_total = field(text, "SwapTotal", 1024);
  uint64_t swap_free = field(text, "SwapFree", 1024);
  if (available == DLI_MEMORY_UNKNOWN) available = field(text, "MemFree", 1024); /* < 3.14 */
  if (swap_total == DLI_MEMORY_UNKNOWN) swap_total = 0;
  if (swap_free == DLI_MEMORY_UNKNOWN) swap_free = 0;
  if (available != DLI_MEMORY_UNKNOWN) room->available = add(available, swap_free);
  if (total != DLI_MEMORY_UNKNOWN) room->ceiling = add(total, swap_total);
  return swap_total;
}

/* The files a memory cgroup states its limits, its usage and its droppable cache in. */
typedef struct {
  const char* limit;
  const char* usage;
  const char* inactive_file; /* the key in memory.stat */
  const char* swap_limit;    /* v1: of memory and swap together; v2: of swap alone */
  int swap_limit_counts_memory;
} cgroup_files;

static const cgroup_files CGROUP_V1 = {"memory.limit_in_bytes", "memory.usage_in_bytes",
                                       "total_inactive_file", "memory.memsw.limit_in_bytes", 1};
static const cgroup_files CGROUP_V2 = {"memory.max", "memory.current", "inactive_file",
                                       "memory.swap.max", 0};

/* Narrows `room` to the cgroup at `dir`, where it has a memory limit. What is available
   now counts its memory only (a segment reserved into swap would be paged out as it is
   made); what it could ever have counts the swap it may use too. */
static void narrow_to_cgroup(dli_memory_room* room, const char* dir, const cgroup_files* files,
                             uint64_t swap_total) {
  char path[PATH_MAX];
  char stat[8192];
  uint64_t limit = number_in(dir, files->limit);
  if (limit == DLI_MEMORY_UNKNOWN) return;
  uint64_t usage = number_in(dir, files->usage);
  uint64_t inactive = DLI_MEMORY_UNKNOWN;
  uint64_t swap_limit = number_in(dir, files->swap_limit);
  uint64_t ceiling = add(limit, swap_total);
  if (snprintf(path, sizeof path, "%s/memory.stat", dir) < (int)sizeof path &&
      read_text(path, stat, sizeof stat) == 0) {
    inactive = field(stat, files->inactive_file, 1);
  }
  if (usage == DLI_MEMORY_UNKNOWN) usage = 0;
  if (inactive == DLI_MEMORY_UNKNOWN) inactive = 0;
  if (files->swap_limit_counts_memory) {
    ceiling = min(ceiling, swap_limit);
  } else {
    ceiling = add(limit, min(swap_limit, swap_total));
  }
  room->available = min(room->available, sub(limit, sub(usage, inactive)));
  room->ceiling = min(room->ceiling, ceiling);
}

/* Narrows `room` to the cgroup `path` names under the hierarchy mounted at `mount` and to
   each cgroup above it (a limit anywhere up the tree binds). Where the path is not there
   (a container sees its own cgroup as the root of the mount), the levels that are. */
static void narrow_to_cgroups(dli_memory_room* room, const char* mount, const char* path,
                              const cgroup_files* files, uint64_t swap_total) {
  char dir[PATH_MAX];
  size_t root_len = strlen(mount);
  if (snprintf(dir, sizeof dir, "%s%s", mount, path) >= (int)sizeof dir) return;
  for (;;) {
    size_t len = strlen(dir);
    while (len > root_len && dir[len - 1] == '/') dir[--len] = '\0';
    narrow_to_cgroup(room, dir, files, swap_total);
    if (len <= root_len) return;
    char* slash = strrchr(dir + root_len, '/');
    if (slash == NULL) return;
    *slash = '\0';
  }
}

/* Whether the comma-separated `list` names `item`. */
static int lists(const char* list, size_t list_len, const char* item) {
  size_t item_len = strlen(item);
  const char* end = list + list_len;
  for (const char* p = list; p < end;) {
    const char* comma = memchr(p, ',', (size_t)(end - p));
    size_t len = (size_t)((comma ? comma : end) - p);
    if (len == item_len && strncmp(p, item, len) == 0) return 1;
    p += len + 1;
  }
  return 0;
}

/* /proc/self/cgroup: "0::<path>" for the v2 hierarchy, "<id>:<controllers>:<path>" for
   each v1 one; the memory controller is in one of them, or in neither. */
static void cgroup_room(dli_memory_room* room, uint64_t swap_total) {
  char path[PATH_MAX];
  char mount[PATH_MAX];
  char text[8192];
  snprintf(path, sizeof path, "%s/self/cgroup", proc_root);
  if (read_text(path, text, sizeof text) != 0) return;
  char* rest = NULL;
  for (char* line = strtok_r(text, "\n", &rest); line; line = strtok_r(NULL, "\n", &rest)) {
    char* first = strchr(line, ':');
    char* second = first ? strchr(first + 1, ':') : NULL;
    if (second == NULL) continue;
    if (second == first + 1 && strncmp(line, "0:", 2) == 0) {
      snprintf(mount, sizeof mount, "%s/fs/cgroup", sys_root);
      narrow_to_cgroups(room, mount, second + 1, &CGROUP_V2, swap_total);
    } else if (lists(first + 1, (size_t)(second - first - 1), "memory")) {
      snprintf(mount, sizeof mount, "%s/fs/cgroup/memory", sys_root);
      narrow_to_cgroups(room, mount, second + 1, &CGROUP_V1, swap_total);
    }
  }
}

void dli_memory_room_read(dli_memory_room* out) {
  out->available = DLI_MEMORY_UNKNOWN;
  out->ceiling = DLI_MEMORY_UNKNOWN;
  cgroup_room(out, machine_room(out));
}

int dli_memory_fits_now(uint64_t nbytes, uint64_t* available_out) {
  dli_memory_room room;
  *available_out = DLI_MEMORY_UNKNOWN;
  if (nbytes < DLI_MEMORY_CHECK_FROM) return 1;
  dli_memory_room_read(&room);
  *available_out = room.available;
  return nbytes <= room.available;
}

uint64_t dli_memory_ceiling(void) {
  uint64_t ceiling = atomic_load_explicit(&kept_ceiling, memory_order_relaxed);
  if (ceiling == 0) {
    dli_memory_room room;
    dli_memory_room_read(&room);
    ceiling = room.ceiling ? room.ceiling : DLI_MEMORY_UNKNOWN;
    atomic_store_explicit(&kept_ceiling, ceiling, memory_order_relaxed);
  }
  return ceiling;
}

int dli_memory_set_roots(const char* proc, const char* sys) {
  if (proc == NULL) proc = "/proc";
  if (sys == NULL) sys = "/sys";
  if (strlen(proc) >= sizeof proc_root || strlen(sys) >= sizeof sys_root) return -1;
  strcpy(proc_root, proc);
  strcpy(sys_root, sys);
  atomic_store(&kept_ceiling, 0);
  return 0;
}
