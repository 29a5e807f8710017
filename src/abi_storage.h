/* Where dlinterop._capi keeps the table of its stable ABI (dlinterop/abi.h). A normal
   build's storage is the table itself. A DLINTEROP_TEST_ABI_SHIFT build (test-only, see
   CMakeLists.txt) appends one entry and says minor version + 1, as a later release whose
   table grew would: extensions built against a normal build must run on it unchanged. */
#ifndef DLINTEROP_ABI_STORAGE_H_
#define DLINTEROP_ABI_STORAGE_H_

#include "dlinterop/abi.h"

typedef struct {
  DLInteropABI table;
#ifdef DLINTEROP_TEST_ABI_SHIFT
  int (*test_appended)(void); /* the entry a later minor version appended */
#endif
} dli_abi_storage;

#ifdef DLINTEROP_TEST_ABI_SHIFT
static int dli_abi_test_appended(void) { return 1; }
#endif

/* Sets what the storage adds to the table its caller filled: its size, and in a test
   build the appended entry and the minor version that has it. */
static void dli_abi_finish(dli_abi_storage* storage) {
  storage->table.size = sizeof(*storage);
#ifdef DLINTEROP_TEST_ABI_SHIFT
  storage->table.minor = DLINTEROP_ABI_MINOR + 1;
  storage->test_appended = dli_abi_test_appended;
#endif
}

#endif /* DLINTEROP_ABI_STORAGE_H_ */
