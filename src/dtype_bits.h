/*
 * A data type's bits as bytes, and whether its elements are packed, each said once for
 * dlinterop's C (the casts, the packing kernel of runtime.c) and its Cython, which declares
 * them: dlinterop/_lib/rules.pxd's item_bytes and storage_bytes, core/dtypes.pxi's
 * _is_packed_subbyte.
 */
#ifndef DLINTEROP_DTYPE_BITS_H_
#define DLINTEROP_DTYPE_BITS_H_

#include <stdint.h>

#include "dlpack/dlpack.h"

/* The bytes that hold `bits` bits (not negative), rounded up. */
static inline int64_t dli_bytes_of_bits(int64_t bits) { return (bits + 7) >> 3; }

/* The bytes one element of dt takes, rounded up: 1 for a packed type, whose elements share
   bytes. */
static inline int64_t dli_item_bytes(DLDataType dt) {
  return dli_bytes_of_bits((int64_t)dt.bits * dt.lanes);
}

/* Whether dt's elements are packed: narrower than a byte, so that several share one, as
   DLPack lays sub-byte types out (little bit-endian) and dlinterop holds them. */
static inline int dli_is_packed(DLDataType dt) { return (int64_t)dt.bits * dt.lanes < 8; }

#endif /* DLINTEROP_DTYPE_BITS_H_ */
