/*
 * PyTorch's exported bit readers (at::native::is_neg / is_conj,
 * c10::TensorImpl::requires_grad), looked up in libtorch once it is loaded: their type and
 * the symbol lookup, which never loads a library. Always NULL on Windows.
 *
 * Included by dlinterop/core/torch_bits.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_TORCH_BITS_H_
#define DLINTEROP_TORCH_BITS_H_

#include <stdbool.h>
#include <stddef.h>

typedef bool (*dli_torch_bit_fn)(const void* tensor);
#if defined(_WIN32)
static void* dli_torch_symbol(const char* lib, const char* name) {
  (void)lib;
  (void)name;
  return NULL;
}
#else
#include <dlfcn.h>
/* A symbol of an already loaded library; never loads one. */
static void* dli_torch_symbol(const char* lib, const char* name) {
  void* handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
  void* symbol;
  if (handle == NULL) {
    (void)dlerror();
    return NULL;
  }
  symbol = dlsym(handle, name);
  (void)dlerror();
  /* torch._C links the library, and extension modules are never unloaded, so the
     symbol outlives this reference. */
  dlclose(handle);
  return symbol;
}
#endif

#endif /* DLINTEROP_TORCH_BITS_H_ */
