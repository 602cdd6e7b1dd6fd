// What every rank of a communicator agrees on, in one small blocking
// allreduce: whether something holds on every rank, and the largest of the
// ranks' values. A communicator that is null or of one rank is this process
// alone.
#pragma once

#include <ATen/ATen.h>

#include "giant/ccl/communicator.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

inline bool on_every_rank(bool value, ccl::Communicator* comm) {
  if (comm == nullptr || comm->size() == 1) return value;
  at::Tensor flag = at::full({1}, value ? 1 : 0, at::kInt);
  allreduce_(flag, *comm, ccl::ReduceOp::min);
  return flag.item<int>() == 1;
}

inline int largest_on_any_rank(int value, ccl::Communicator* comm) {
  if (comm == nullptr || comm->size() == 1) return value;
  at::Tensor largest = at::full({1}, value, at::kInt);
  allreduce_(largest, *comm, ccl::ReduceOp::max);
  return largest.item<int>();
}

}  // namespace giant::parallel
