/*
 * A Tensor's element values as Python objects, read in C: one element (a new bool, int,
 * float or complex; a tuple of its lanes for a vector type) and nested or flat lists of
 * the elements over any shape and strides (negative and zero ones too), straight from
 * host memory, with no contiguous copy; and one element as a C number (dli_scalar_at),
 * which float(t), int(t) and bool(t) convert without a Python object in between.
 *
 * Every DLPack data type dlinterop has is read here: the integer, float and complex types
 * by their C types; float16 widened to double (values_formats.h); bfloat16 as the top half of a
 * float32 (bcomplex32 as two); the float8, float6 and float4 formats through a table of
 * the double value of each code, which the caller fills (core/values.pxi fills them from
 * dlinterop._lib.minifloat's decode); the sub-byte integers from their two's complement
 * codes. Sub-byte types are packed, little bit-endian, as DLPack lays them out: lane i
 * (element e's lane j is lane e * lanes + j) lies in bits [i * bits, (i + 1) * bits)
 * from the element-0 address, which a view with negative strides reads below.
 *
 * Included by dlinterop/core/values.pxi (dlinterop._core only).
 */
#ifndef DLINTEROP_VALUES_H_
#define DLINTEROP_VALUES_H_

/* The parts, each one concern: */
#include "values_formats.h" /* the number formats' bits as C numbers */
#include "values_lists.h"   /* nested and flat lists of the elements */
#include "values_reader.h"  /* a type's reader: one lane, one element */
#include "values_scalars.h" /* one element as a C number, without a reader */

#endif /* DLINTEROP_VALUES_H_ */
