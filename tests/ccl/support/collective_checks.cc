#include "ccl/support/collective_checks.h"

#include <algorithm>
#include <sstream>

#include "ccl/support/ranks.h"

namespace giant::ccl::test {

std::vector<Algorithm> allreduce_algorithms(const Communicator& comm, const CollectivePlan& plan) {
  std::vector<Algorithm> algorithms = plan.algorithms;
  if (plan.shared_memory_algorithms && comm.shared_memory() && comm.size() > 1) {
    bool one_host = comm.topology().num_hosts() == 1;
    Algorithm extra = one_host ? Algorithm::shm : Algorithm::hierarchical;
    // hierarchical needs the same number of ranks on every host.
    bool uniform = comm.size() % comm.topology().num_hosts() == 0 &&
                   comm.topology().local_size * comm.topology().num_hosts() == comm.size();
    if ((one_host || uniform) && std::find(algorithms.begin(), algorithms.end(), extra) == algorithms.end()) {
      algorithms.push_back(extra);
    }
  }
  return algorithms;
}

std::string case_name(const char* collective, const Communicator& comm, const std::string& details) {
  std::ostringstream out;
  out << collective << " n=" << comm.size() << " rank=" << comm.rank();
  if (!details.empty()) out << " " << details;
  return out.str();
}

std::string case_name(const char* collective, const Communicator& comm, DType dtype, size_t count,
                      bool in_place, const std::string& more) {
  std::ostringstream out;
  out << "dtype=" << dtype_name(dtype) << " count=" << count << (in_place ? " in-place" : " out-of-place");
  if (!more.empty()) out << " " << more;
  return case_name(collective, comm, out.str());
}

bool run_op(const std::string& context, Findings& findings, const std::function<Work()>& issue) {
  Work work;
  try {
    work = issue();
  } catch (...) {
    findings.add(context + ": threw when issued: " + ErrorInfo::from(std::current_exception()).describe());
    return false;
  }
  try {
    work.wait();
  } catch (...) {
    findings.add(context + ": failed: " + ErrorInfo::from(std::current_exception()).describe());
    return false;
  }
  return true;
}

std::vector<size_t> counts_of(const CollectivePlan& plan, bool big) {
  std::vector<size_t> counts = plan.counts;
  if (big) counts.push_back(kBigCount);
  return counts;
}

const std::vector<NamedCheck>& all_checks() {
  static const std::vector<NamedCheck> checks = {
      {"allreduce", check_allreduce},
      {"reduce_scatter", check_reduce_scatter},
      {"reduce", check_reduce},
      {"allgather", check_allgather},
      {"allgatherv", check_allgatherv},
      {"alltoall", check_alltoall},
      {"alltoallv", check_alltoallv},
      {"broadcast", check_broadcast},
      {"gather", check_gather},
      {"scatter", check_scatter},
      {"barrier", check_barrier},
      {"send_recv", check_send_recv},
      {"bitwise_identical", check_bitwise_identical},
      {"invalid_arguments", check_invalid_arguments},  // last: a library that accepts bad input may break the rest
  };
  return checks;
}

}  // namespace giant::ccl::test
