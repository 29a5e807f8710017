/*
 * Anonymous shared memory for Tensors that cross process boundaries (Linux): a memfd (or,
 * where the kernel has none, a POSIX shared-memory object unlinked at once), sealed against
 * shrinking and growing so that no process can truncate it under another's mapping, with
 * its pages reserved up front so that running out of memory is an error at creation rather
 * than a SIGBUS at first touch. Plain C: no Python, no GIL needed.
 */
#ifndef DLINTEROP_SHARED_MEMORY_H_
#define DLINTEROP_SHARED_MEMORY_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Besides errno values (positive), what dli_shm_attach reports (negative). */
#define DLI_SHM_NOT_SEALED (-1) /* not a segment sealed against shrinking (a plain file) */
#define DLI_SHM_TOO_SMALL (-2)  /* smaller than the length it was sent with */

/* A new segment of at least nbytes (a whole number of pages, one at least), mapped read and
   write: *fd_out, *base_out (page aligned) and *length_out. 0, or an errno value. */
int dli_shm_create(size_t nbytes, int* fd_out, void** base_out, size_t* length_out);

/* Maps a segment another process sent (its descriptor, received as ours) of `length`
   bytes, after checking that it is one: 0 with *base_out set, an errno value, or
   DLI_SHM_NOT_SEALED / DLI_SHM_TOO_SMALL. The descriptor is not closed on failure. */
int dli_shm_attach(int fd, size_t length, void** base_out);

/* Unmaps and closes a segment made or attached above. */
void dli_shm_release(int fd, void* base, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* DLINTEROP_SHARED_MEMORY_H_ */
