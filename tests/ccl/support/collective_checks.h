// Checks of every collective, shared by the ranks-as-threads and the
// ranks-as-processes tests. Each check runs many cases on one communicator
// and records mismatches in Findings instead of stopping, so every rank
// keeps issuing the same sequence of operations. Every rank must call the
// same checks with the same plan, in the same order.
#pragma once

#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ccl/support/dtypes.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/ccl/work.h"

namespace giant::ccl::test {

constexpr size_t kBigCount = (size_t{1} << 20) + 3;

struct CollectivePlan {
  std::vector<size_t> counts = {0, 1, 7, 1000};
  std::vector<DType> dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)};
  std::vector<ReduceOp> ops = {std::begin(kAllReduceOps), std::end(kAllReduceOps)};
  std::vector<Algorithm> algorithms = {Algorithm::automatic, Algorithm::ring,
                                       Algorithm::halving_doubling};
  // Also run shm (one host) or hierarchical (several) where the
  // communicator can (see allreduce_algorithms).
  bool shared_memory_algorithms = true;
  // Cases at kBigCount elements (per rank, or per peer): a few dtype/op
  // pairs only, to keep the suite fast.
  std::vector<std::pair<DType, ReduceOp>> big_cases = {
      {DType::f32, ReduceOp::sum}, {DType::i32, ReduceOp::max}, {DType::bf16, ReduceOp::avg}};
  // Used by the barrier check to see that no rank leaves early; shared by
  // all ranks (a MemoryStore for threads, the group's store for processes).
  std::shared_ptr<Store> store;
  // Keeps the keys of one run apart from those of another on the same store.
  std::string store_prefix = "check";
  // The memory every operation says its buffers are in: device runs them
  // on the communicator's device backend (a test's, on host buffers).
  Memory memory = Memory::host;
};

using CheckFunction = void (*)(Communicator& comm, const CollectivePlan& plan, Findings& findings);

// Reductions (reduction_checks.cc).
void check_allreduce(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_reduce_scatter(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_reduce(Communicator& comm, const CollectivePlan& plan, Findings& findings);  // every root
// Random non-integer floats: allreduce (every algorithm) and allgather give
// bitwise identical results on every rank; reduce_scatter is repeatable.
void check_bitwise_identical(Communicator& comm, const CollectivePlan& plan, Findings& findings);
// avg on integer dtypes, bad roots, wrong vector sizes...: giant::Error when
// the operation is issued, and the communicator still works afterwards.
void check_invalid_arguments(Communicator& comm, const CollectivePlan& plan, Findings& findings);

// Data movement (movement_checks.cc).
void check_allgather(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_allgatherv(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_alltoall(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_alltoallv(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_broadcast(Communicator& comm, const CollectivePlan& plan, Findings& findings);  // every root
void check_gather(Communicator& comm, const CollectivePlan& plan, Findings& findings);     // every root
void check_scatter(Communicator& comm, const CollectivePlan& plan, Findings& findings);    // every root
void check_barrier(Communicator& comm, const CollectivePlan& plan, Findings& findings);
void check_send_recv(Communicator& comm, const CollectivePlan& plan, Findings& findings);

struct NamedCheck {
  const char* name;
  CheckFunction function;
};
// Every check above, in a fixed order.
const std::vector<NamedCheck>& all_checks();

// Helpers shared by the checks.
// plan.algorithms, plus shm or hierarchical where comm can run them.
std::vector<Algorithm> allreduce_algorithms(const Communicator& comm, const CollectivePlan& plan);
// "allreduce n=3 rank=1 ..." followed by the given details.
std::string case_name(const char* collective, const Communicator& comm, const std::string& details);
std::string case_name(const char* collective, const Communicator& comm, DType dtype, size_t count,
                      bool in_place, const std::string& more = "");
// Issues an operation and waits for it. Records a finding (and returns
// false) if it threw at issue or at wait.
bool run_op(const std::string& context, Findings& findings, const std::function<Work()>& issue);
// The counts of the cases: plan.counts, plus kBigCount when `big` is set.
std::vector<size_t> counts_of(const CollectivePlan& plan, bool big);

}  // namespace giant::ccl::test
