#define _GNU_SOURCE
#include "shared_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* 1 once memfd_create has been seen to work in this process, -1 once it has been seen to
   be missing (ENOSYS): then segments are POSIX shared-memory objects, which cannot be
   sealed, and attach cannot require seals. 0 until known. */
static _Atomic int have_memfd = 0;

/* Whether this kernel has memfd_create, asked once. */
static int memfd_available(void) {
  int known = atomic_load(&have_memfd);
  if (known == 0) {
    int fd = memfd_create("dlinterop-probe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    known = fd >= 0 || (errno != ENOSYS && errno != EINVAL) ? 1 : -1;
    if (fd >= 0) close(fd);
    atomic_store(&have_memfd, known);
  }
  return known == 1;
}

static size_t page_size(void) {
  long size = sysconf(_SC_PAGESIZE);
  return size > 0 ? (size_t)size : 4096;
}

/* A POSIX shared-memory object no other process can open: unlinked as soon as made. */
static int anonymous_shm(void) {
  static _Atomic unsigned long counter = 0;
  char name[64];
  for (int attempt = 0; attempt < 16; attempt++) {
    snprintf(name, sizeof name, "/dlinterop-%ld-%lu", (long)getpid(),
             atomic_fetch_add(&counter, 1));
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      shm_unlink(name);
      if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
      }
      return fd;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

int dli_shm_create(size_t nbytes, int* fd_out, void** base_out, size_t* length_out) {
  size_t page = page_size();
  size_t length = nbytes == 0 ? page : (nbytes + page - 1) / page * page;
  int fd, err;
  void* base;
  if (length < nbytes || length > (size_t)INT64_MAX) return ENOMEM;
  fd = memfd_create("dlinterop", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd >= 0) {
    atomic_store(&have_memfd, 1);
  } else if (errno == ENOSYS || errno == EINVAL) {
    atomic_store(&have_memfd, -1);
    fd = anonymous_shm();
    if (fd < 0) return errno;
  } else {
    return errno;
  }
  if (ftruncate(fd, (off_t)length) != 0) goto fail;
  /* Reserve the pages now: out of memory is then ENOSPC/ENOMEM here, not SIGBUS at first
     write. Where fallocate is not supported the pages come on demand, as with any mmap. */
  err = posix_fallocate(fd, 0, (off_t)length);
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL && err != ENOSYS) {
    errno = err == ENOSPC ? ENOMEM : err;
    goto fail;
  }
  if (atomic_load(&have_memfd) == 1 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    goto fail;
  }
  base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) goto fail;
  *fd_out = fd;
  *base_out = base;
  *length_out = length;
  dli_stats_allocated(length);
  return 0;
fail:
  err = errno;
  close(fd);
  return err;
}

int dli_shm_attach(int fd, size_t length, void** base_out) {
  struct stat st;
  void* base;
  if (fstat(fd, &st) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return DLI_SHM_NOT_SEALED;
  if (memfd_available()) {
    /* Only a segment no process can shrink may be mapped: a shrunk file under a mapping
       turns reads into SIGBUS. A plain file, or a memfd without the seal, is refused. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) return DLI_SHM_NOT_SEALED;
  }
  if (length == 0 || st.st_size < 0 || (size_t)st.st_size < length) return DLI_SHM_TOO_SMALL;
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
