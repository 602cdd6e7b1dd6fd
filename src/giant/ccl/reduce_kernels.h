// Element-wise reduction kernels over raw buffers. 16-bit floats are
// computed in float and rounded back (float16.h) after every operation, so
// a result depends only on the order of operands.
#pragma once

#include <cstddef>
#include <cstdint>

#include "giant/ccl/float16.h"  // the 16-bit float conversions
#include "giant/ccl/types.h"

namespace giant::ccl {

// out[i] = a[i] op b[i]; avg reduces as sum (finish_average divides later).
// out may alias a or b.
void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);
// data[i] /= n, for the avg of n ranks (floating dtypes only).
void finish_average(void* data, size_t count, DType dtype, int n);

}  // namespace giant::ccl
