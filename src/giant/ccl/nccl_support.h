// Small helpers of the NCCL backend (internal): errors and type mappings.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "giant/ccl/types.h"

namespace giant::ccl::detail {

// Throw giant::Error naming the call and CUDA's or NCCL's message.
void check_cuda(cudaError_t status, const char* call);
void check_nccl(ncclResult_t result, const char* call);

ncclDataType_t nccl_dtype(DType dtype);
ncclRedOp_t nccl_op(ReduceOp op);

}  // namespace giant::ccl::detail
