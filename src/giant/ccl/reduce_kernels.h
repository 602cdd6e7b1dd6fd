// Element-wise reduction kernels over raw buffers. 16-bit floats are
// computed in float and rounded back (round to nearest even) after every
// operation, so a result depends only on the order of operands.
#pragma once

#include <cstddef>
#include <cstdint>

#include "giant/ccl/types.h"

namespace giant::ccl {

uint16_t float_to_half(float value);
float half_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);
float bfloat16_to_float(uint16_t bits);

// out[i] = a[i] op b[i]; avg reduces as sum (finish_average divides later).
// out may alias a or b.
void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
// data[i] /= n, for the avg of n ranks (floating dtypes only).
void finish_average(void* data, size_t count, DType dtype, int n);

}  // namespace giant::ccl
