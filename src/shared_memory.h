/*
 * Anonymous shared memory for Tensors that cross process boundaries (Linux): a memfd,
 * sealed against shrinking and growing so that no process can truncate it under another's
 * mapping, with its pages reserved up front (within what the machine and its cgroups can
 * give, memory_limits.h) so that running out of memory is an error at creation rather
 * than a SIGBUS, or the OOM killer, at first touch. Where there is no memfd (Linux before
 * 3.17, a sandbox that forbids it) there is no shared memory: a POSIX shared-memory object
 * cannot be sealed, and any process holding it could shrink it under the others. Plain C:
 * no Python, no GIL needed.
 */
#ifndef DLINTEROP_SHARED_MEMORY_H_
#define DLINTEROP_SHARED_MEMORY_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Besides errno values (positive), what the functions below report (negative). */
#define DLI_SHM_NOT_SEGMENT (-1) /* not a memfd sealed against shrinking, all pages there */
#define DLI_SHM_TOO_SMALL (-2)   /* smaller than the length it was sent with */
#define DLI_SHM_NO_MEMFD (-3)    /* this system has no memfd_create, or refuses it */
#define DLI_SHM_NO_ROOM (-4)     /* more than this process can have now (memory_limits.h) */

/* A new segment of at least nbytes (a whole number of pages, one at least), mapped read and
   write: *fd_out, *base_out (page aligned) and *length_out. 0, an errno value,
   DLI_SHM_NO_ROOM (with *available_out the bytes there were room for) or DLI_SHM_NO_MEMFD. */
int dli_shm_create(size_t nbytes, int* fd_out, void** base_out, size_t* length_out,
                   uint64_t* available_out);

/* Maps a segment another process sent (its descriptor, received as ours) of `length`
   bytes, after checking that it is one: 0 with *base_out set, an errno value, or
   DLI_SHM_NOT_SEGMENT / DLI_SHM_TOO_SMALL. The descriptor is not closed on failure. */
int dli_shm_attach(int fd, size_t length, void** base_out);

/* Unmaps and closes a segment made or attached above. */
void dli_shm_release(int fd, void* base, size_t length);

/* Makes dli_shm_create behave as on a system without memfd_create (nonzero), or as it is
   (0): how the tests reach that path on any kernel. */
void dli_shm_pretend_no_memfd(int on);

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_SHARED_MEMORY_H_ */
