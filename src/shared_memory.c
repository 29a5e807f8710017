#define _GNU_SOURCE
#include "shared_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory_limits.h"
#include "runtime.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#endif

/* How much of a segment is reserved between two checks that the rest still fits. */
#define RESERVE_STEP ((size_t)DLI_MEMORY_CHECK_FROM)

static _Atomic int pretend_no_memfd = 0;

static size_t page_size(void) {
  long size = sysconf(_SC_PAGESIZE);
  return size > 0 ? (size_t)size : 4096;
}

/* Reserves the segment's pages (fallocate gives a memfd zeroed pages without mapping them)
   RESERVE_STEP at a time, checking before each step that the rest still fits: where other
   processes take the memory meanwhile, this fails with DLI_SHM_NO_ROOM instead of the
   kernel's OOM killer choosing a process to end (the segment's pages count towards no
   process's size, so the one it chose would be another). 0 or an error. */
static int reserve(int fd, size_t length, uint64_t* available) {
  size_t done = 0;
  while (done < length) {
    size_t step = length - done < RESERVE_STEP ? length - done : RESERVE_STEP;
    if (done > 0 && !dli_memory_fits_now(length - done, available)) return DLI_SHM_NO_ROOM;
    if (fallocate(fd, 0, (off_t)done, (off_t)step) != 0) {
      if (errno == EINTR) continue; /* the kernel undid this step; its signal is handled */
      return errno == ENOSPC ? ENOMEM : errno;
    }
    done += step;
  }
  return 0;
}

int dli_shm_create(size_t nbytes, int* fd_out, void** base_out, size_t* length_out,
                   uint64_t* available_out) {
  size_t page = page_size();
  size_t length = nbytes == 0 ? page : (nbytes + page - 1) / page * page;
  void* base = NULL;
  int fd, err = 0;
  /* Refused before anything is made: what cannot fit never touches a page. */
  if (length < nbytes) length = SIZE_MAX; /* rounding up wrapped: more than any machine has */
  if (!dli_memory_fits_now(length, available_out) || length > (size_t)INT64_MAX) {
    return DLI_SHM_NO_ROOM;
  }
  if (atomic_load(&pretend_no_memfd)) return DLI_SHM_NO_MEMFD;
  fd = memfd_create("dlinterop", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return errno == ENOSYS || errno == EPERM ? DLI_SHM_NO_MEMFD : errno;
  if (ftruncate(fd, (off_t)length) != 0) err = errno;
  if (err == 0) err = reserve(fd, length, available_out);
  if (err == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    err = errno;
  }
  if (err == 0) {
    base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) err = errno;
  }
  if (err != 0) {
    close(fd);
    return err;
  }
  *fd_out = fd;
  *base_out = base;
  *length_out = length;
  dli_stats_allocated(length);
  return 0;
}

int dli_shm_attach(int fd, size_t length, void** base_out) {
  struct stat st;
  void* base;
  int seals;
  if (fstat(fd, &st) != 0) return errno;
  /* Only a segment no process can shrink may be mapped: a file shrunk under a mapping
     turns reads into SIGBUS. And only one whose pages are all there: touching a hole
     allocates a page, so a sparse segment of any size would make the receiver take the
     memory the sender never reserved. A plain file, a memfd without the seal, a sparse
     one: refused. */
  if (!S_ISREG(st.st_mode)) return DLI_SHM_NOT_SEGMENT;
  seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) return DLI_SHM_NOT_SEGMENT;
  if (length == 0 || st.st_size < 0 || (size_t)st.st_size < length) return DLI_SHM_TOO_SMALL;
  if ((uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) return DLI_SHM_NOT_SEGMENT;
  base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return errno;
  *base_out = base;
  dli_stats_allocated(length);
  return 0;
}

void dli_shm_release(int fd, void* base, size_t length) {
  if (base != NULL) {
    munmap(base, length);
    dli_stats_freed(length);
  }
  if (fd >= 0) close(fd);
}

void dli_shm_pretend_no_memfd(int on) { atomic_store(&pretend_no_memfd, on != 0); }
