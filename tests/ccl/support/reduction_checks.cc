// Checks of allreduce, reduce_scatter and reduce; bitwise identity of
// results across ranks; errors for invalid arguments.
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "ccl/support/collective_checks.h"
#include "ccl/support/ranks.h"
#include "giant/base/error.h"

namespace giant::ccl::test {
namespace {

constexpr uint8_t kSentinel = 0xA5;

bool valid_pair(DType dtype, ReduceOp op) { return op != ReduceOp::avg || is_floating(dtype); }

uint32_t salt_of(DType dtype, ReduceOp op, size_t count, int extra = 0) {
  return static_cast<uint32_t>(count * 131 + static_cast<int>(op) * 17 + static_cast<int>(dtype) * 5 + extra);
}

std::string op_details(ReduceOp op, const std::string& more = "") {
  return std::string("op=") + reduce_op_name(op) + (more.empty() ? "" : " " + more);
}

void allreduce_case(Communicator& comm, Memory memory, DType dtype, ReduceOp op, size_t count, Algorithm algorithm,
                    bool in_place, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  const uint32_t salt = salt_of(dtype, op, count, static_cast<int>(algorithm));
  Buffer input(dtype, count);
  Buffer output(dtype, in_place ? 0 : count);
  input.fill([&](size_t i) { return reduction_input(dtype, op, rank, i, salt); });
  output.fill_bytes(kSentinel);
  AllreduceOptions options;
  options.memory = memory;
  options.input = input.data();
  options.output = in_place ? input.data() : output.data();
  options.count = count;
  options.dtype = dtype;
  options.op = op;
  options.algorithm = algorithm;
  const std::string name = case_name("allreduce", comm, dtype, count, in_place,
                                     op_details(op, std::string("algorithm=") + algorithm_name(algorithm)));
  if (!run_op(name, findings, [&] { return allreduce(comm, options); })) return;
  compare(in_place ? input : output, 0, count,
          [&](size_t i) { return reduction_expected(dtype, op, n, i, salt); }, op == ReduceOp::avg, name,
          findings);
  if (!in_place) {
    compare(input, 0, count, [&](size_t i) { return reduction_input(dtype, op, rank, i, salt); }, false,
            name + " (the input must stay untouched)", findings);
  }
}

void reduce_scatter_case(Communicator& comm, Memory memory, DType dtype, ReduceOp op, size_t count, bool in_place,
                         Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  const uint32_t salt = salt_of(dtype, op, count, 3);
  Buffer input(dtype, count * n);
  Buffer output(dtype, in_place ? 0 : count);
  input.fill([&](size_t j) { return reduction_input(dtype, op, rank, j, salt); });
  output.fill_bytes(kSentinel);
  ReduceScatterOptions options;
  options.memory = memory;
  options.input = input.data();
  options.output = in_place ? input.data() : output.data();  // in place: block 0 gets the result
  options.count = count;
  options.dtype = dtype;
  options.op = op;
  const std::string name = case_name("reduce_scatter", comm, dtype, count, in_place, op_details(op));
  if (!run_op(name, findings, [&] { return reduce_scatter(comm, options); })) return;
  compare(in_place ? input : output, 0, count,
          [&](size_t i) { return reduction_expected(dtype, op, n, rank * count + i, salt); },
          op == ReduceOp::avg, name, findings);
}

void reduce_case(Communicator& comm, Memory memory, DType dtype, ReduceOp op, size_t count, int root, bool in_place,
                 Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  const uint32_t salt = salt_of(dtype, op, count, 11 + root);
  Buffer input(dtype, count);
  Buffer output(dtype, in_place ? 0 : count);
  input.fill([&](size_t i) { return reduction_input(dtype, op, rank, i, salt); });
  output.fill_bytes(kSentinel);
  ReduceOptions options;
  options.memory = memory;
  options.input = input.data();
  options.output = in_place ? input.data() : output.data();
  options.count = count;
  options.dtype = dtype;
  options.op = op;
  options.root = root;
  const std::string name =
      case_name("reduce", comm, dtype, count, in_place, op_details(op, "root=" + std::to_string(root)));
  if (!run_op(name, findings, [&] { return reduce(comm, options); })) return;
  const Buffer& result = in_place ? input : output;
  if (rank == root) {
    compare(result, 0, count, [&](size_t i) { return reduction_expected(dtype, op, n, i, salt); },
            op == ReduceOp::avg, name, findings);
  } else if (in_place) {
    compare(input, 0, count, [&](size_t i) { return reduction_input(dtype, op, rank, i, salt); }, false,
            name + " (a non-root's buffer must not be written)", findings);
  } else {
    compare_untouched(output, 0, count, kSentinel, name + " (a non-root's output)", findings);
  }
}

}  // namespace

void check_allreduce(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  for (size_t count : plan.counts)
    for (DType dtype : plan.dtypes)
      for (ReduceOp op : plan.ops)
        if (valid_pair(dtype, op))
          for (Algorithm algorithm : allreduce_algorithms(comm, plan))
            for (bool in_place : {false, true})
              allreduce_case(comm, plan.memory, dtype, op, count, algorithm, in_place, findings);
  bool first = true;
  for (const auto& [dtype, op] : plan.big_cases) {
    for (Algorithm algorithm : allreduce_algorithms(comm, plan)) {
      allreduce_case(comm, plan.memory, dtype, op, kBigCount, algorithm, false, findings);
      if (first) allreduce_case(comm, plan.memory, dtype, op, kBigCount, algorithm, true, findings);
    }
    first = false;
  }
}

void check_reduce_scatter(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  for (size_t count : plan.counts)
    for (DType dtype : plan.dtypes)
      for (ReduceOp op : plan.ops)
        if (valid_pair(dtype, op))
          for (bool in_place : {false, true}) {
            reduce_scatter_case(comm, plan.memory, dtype, op, count, in_place, findings);
          }
  bool first = true;
  for (const auto& [dtype, op] : plan.big_cases) {
    reduce_scatter_case(comm, plan.memory, dtype, op, kBigCount, false, findings);
    if (first) reduce_scatter_case(comm, plan.memory, dtype, op, kBigCount, true, findings);
    first = false;
  }
}

void check_reduce(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  for (int root = 0; root < comm.size(); ++root)
    for (size_t count : plan.counts)
      for (DType dtype : plan.dtypes)
        for (ReduceOp op : plan.ops)
          if (valid_pair(dtype, op))
            for (bool in_place : {false, true}) {
              reduce_case(comm, plan.memory, dtype, op, count, root, in_place, findings);
            }
  for (const auto& [dtype, op] : plan.big_cases) {
    reduce_case(comm, plan.memory, dtype, op, kBigCount, comm.size() - 1, false, findings);
  }
}

namespace {

// Random non-integer values of the dtype in [-2, 2], different on every rank.
Buffer random_values(DType dtype, size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  Buffer buffer(dtype, count);
  for (size_t i = 0; i < count; ++i) buffer.set(i, uniform(generator));
  return buffer;
}

// Gathers every rank's 64-bit hash and records which ranks differ from this one.
void expect_same_hash_everywhere(Communicator& comm, Memory memory, uint64_t hash, const std::string& name,
                                 Findings& findings) {
  const int n = comm.size();
  std::vector<uint64_t> hashes(n, 0);
  AllgatherOptions options;
  options.memory = memory;
  options.input = &hash;
  options.output = hashes.data();
  options.count = 8;
  options.dtype = DType::u8;
  if (!run_op(name + " (gathering result hashes)", findings, [&] { return allgather(comm, options); })) return;
  std::string differing;
  for (int r = 0; r < n; ++r)
    if (hashes[r] != hash) differing += " " + std::to_string(r);
  if (!differing.empty()) {
    findings.add(name + ": result differs bitwise from that of rank(s)" + differing);
  }
}

// allreduce of random floats at two counts, every dtype, op and algorithm:
// the same bits on every rank, close to the exact sum.
void check_random_allreduce(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  const DType floats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  // 70001 elements: above the default halving-doubling limit, so automatic picks the ring.
  for (size_t count : {size_t{1000}, size_t{70001}}) {
    for (DType dtype : floats) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
        for (Algorithm algorithm : allreduce_algorithms(comm, plan)) {
          const uint32_t seed = 7919u * rank + salt_of(dtype, op, count, static_cast<int>(algorithm));
          Buffer input = random_values(dtype, count, seed);
          Buffer output(dtype, count);
          AllreduceOptions options;
          options.memory = plan.memory;
          options.input = input.data();
          options.output = output.data();
          options.count = count;
          options.dtype = dtype;
          options.op = op;
          options.algorithm = algorithm;
          const std::string name =
              case_name("allreduce (random floats)", comm, dtype, count, false,
                        op_details(op, std::string("algorithm=") + algorithm_name(algorithm)));
          if (!run_op(name, findings, [&] { return allreduce(comm, options); })) continue;
          expect_same_hash_everywhere(comm, plan.memory, fnv1a(output.data(), output.nbytes()), name, findings);
          if (op == ReduceOp::prod) continue;
          // Sanity: close to the sum in double (the order of additions is the library's).
          Buffer exact(DType::f64, count);
          for (int r = 0; r < n; ++r) {
            Buffer theirs =
                random_values(dtype, count, 7919u * r + salt_of(dtype, op, count, static_cast<int>(algorithm)));
            for (size_t i = 0; i < count; ++i) exact.set(i, exact.get(i) + theirs.get(i));
          }
          const double divisor = op == ReduceOp::avg ? n : 1;
          const double tolerance = 2 * n * ulp(dtype, 2.0 * n);
          for (size_t i = 0; i < count; ++i) {
            const double want = exact.get(i) / divisor;
            if (!(std::fabs(output.get(i) - want) <= tolerance)) {
              findings.add(name + ": element " + std::to_string(i) + " is " + std::to_string(output.get(i)) +
                           ", far from the exact " + std::to_string(want));
              break;
            }
          }
        }
      }
    }
  }
}

// Large: f32 sum at 2^20+3 elements, the same bits on every rank.
void check_large_allreduce(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int rank = comm.rank();
  for (Algorithm algorithm : allreduce_algorithms(comm, plan)) {
    Buffer input = random_values(DType::f32, kBigCount, 104729u * (rank + 1));
    Buffer output(DType::f32, kBigCount);
    AllreduceOptions options;
    options.memory = plan.memory;
    options.input = input.data();
    options.output = output.data();
    options.count = kBigCount;
    options.algorithm = algorithm;
    const std::string name = case_name("allreduce (random floats)", comm, DType::f32, kBigCount, false,
                                       std::string("op=sum algorithm=") + algorithm_name(algorithm));
    if (run_op(name, findings, [&] { return allreduce(comm, options); }))
      expect_same_hash_everywhere(comm, plan.memory, fnv1a(output.data(), output.nbytes()), name, findings);
  }
}

// reduce_scatter: repeatable bit for bit.
void check_repeatable_reduce_scatter(Communicator& comm, Memory memory, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  const DType floats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  for (DType dtype : floats) {
    const size_t count = 1001;
    Buffer input = random_values(dtype, count * n, 31u * rank + static_cast<uint32_t>(dtype));
    Buffer first(dtype, count);
    Buffer second(dtype, count);
    ReduceScatterOptions options;
    options.memory = memory;
    options.input = input.data();
    options.count = count;
    options.dtype = dtype;
    const std::string name = case_name("reduce_scatter (random floats, twice)", comm, dtype, count, false);
    options.output = first.data();
    if (!run_op(name, findings, [&] { return reduce_scatter(comm, options); })) continue;
    options.output = second.data();
    if (!run_op(name, findings, [&] { return reduce_scatter(comm, options); })) continue;
    if (first.bytes() != second.bytes()) findings.add(name + ": the two results differ bitwise");
  }
}

// allgather moves raw bytes: NaN payloads, subnormals, -0 and infinities survive.
void check_raw_allgather(Communicator& comm, Memory memory, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  const DType floats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  for (DType dtype : floats) {
    const size_t count = 4099;
    auto raw_bytes = [&](int r) {
      Buffer b(dtype, count);
      std::mt19937 generator(977u * r + static_cast<uint32_t>(dtype));
      for (size_t i = 0; i < b.nbytes(); ++i) static_cast<uint8_t*>(b.data())[i] = generator() & 0xff;
      return b;
    };
    Buffer input = raw_bytes(rank);
    Buffer output(dtype, count * n);
    AllgatherOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.dtype = dtype;
    const std::string name = case_name("allgather (random bytes)", comm, dtype, count, false);
    if (!run_op(name, findings, [&] { return allgather(comm, options); })) continue;
    for (int r = 0; r < n; ++r) {
      Buffer theirs = raw_bytes(r);
      if (theirs.nbytes() > 0 && std::memcmp(output.at(r * count), theirs.data(), theirs.nbytes()) != 0) {
        findings.add(name + ": block " + std::to_string(r) + " is not bitwise equal to rank " +
                     std::to_string(r) + "'s input");
      }
    }
  }
}

}  // namespace

void check_bitwise_identical(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  check_random_allreduce(comm, plan, findings);
  check_large_allreduce(comm, plan, findings);
  check_repeatable_reduce_scatter(comm, plan.memory, findings);
  check_raw_allgather(comm, plan.memory, findings);
}

namespace {

// Records a finding unless issue() throws a plain giant::Error (not a
// communication fault) right away.
void expect_issue_error(const std::string& name, Findings& findings, const std::function<Work()>& issue) {
  Work work;
  try {
    work = issue();
  } catch (...) {
    ErrorInfo info = ErrorInfo::from(std::current_exception());
    if (info.kind != "Error") findings.add(name + ": expected a giant::Error when issued, got " + info.describe());
    return;
  }
  try {
    work.wait(std::chrono::milliseconds(3000));
    findings.add(name + ": expected a giant::Error when issued; the operation was accepted and succeeded");
  } catch (...) {
    findings.add(name + ": expected a giant::Error when issued; it was accepted, then failed with " +
                 ErrorInfo::from(std::current_exception()).describe());
  }
}

}  // namespace

namespace {

// avg of integers, and a reduce to a root that does not exist.
void check_invalid_reductions(Communicator& comm, Memory memory, const Buffer& input, Buffer& output, size_t count,
                              Findings& findings) {
  const int n = comm.size();
  for (DType dtype : {DType::i32, DType::i64, DType::u8}) {
    AllreduceOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.dtype = dtype;
    options.op = ReduceOp::avg;
    expect_issue_error(case_name("allreduce avg", comm, dtype, count, false), findings,
                       [&] { return allreduce(comm, options); });
  }
  {
    ReduceScatterOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.dtype = DType::i32;
    options.op = ReduceOp::avg;
    expect_issue_error(case_name("reduce_scatter avg", comm, DType::i32, count, false), findings,
                       [&] { return reduce_scatter(comm, options); });
  }
  {
    ReduceOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.dtype = DType::u8;
    options.op = ReduceOp::avg;
    expect_issue_error(case_name("reduce avg", comm, DType::u8, count, false), findings,
                       [&] { return reduce(comm, options); });
    options.op = ReduceOp::sum;
    options.root = n;
    expect_issue_error(case_name("reduce", comm, "root=size"), findings, [&] { return reduce(comm, options); });
  }
}

// Roots out of range.
void check_invalid_roots(Communicator& comm, Memory memory, const Buffer& input, Buffer& output, size_t count,
                         Findings& findings) {
  const int n = comm.size();
  for (int root : {-1, n}) {
    BroadcastOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.root = root;
    expect_issue_error(case_name("broadcast", comm, "root=" + std::to_string(root)), findings,
                       [&] { return broadcast(comm, options); });
  }
  {
    GatherOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.root = n;
    expect_issue_error(case_name("gather", comm, "root=size"), findings, [&] { return gather(comm, options); });
  }
  {
    ScatterOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.root = -1;
    expect_issue_error(case_name("scatter", comm, "root=-1"), findings, [&] { return scatter(comm, options); });
  }
}

// Count lists of the wrong length, peers out of range, a null buffer.
void check_invalid_lists_and_peers(Communicator& comm, Memory memory, const Buffer& input, Buffer& output, size_t count,
                                   Findings& findings) {
  const int n = comm.size();
  {
    AllgathervOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.counts.assign(n + 1, 1);
    expect_issue_error(case_name("allgatherv", comm, "counts.size()=size+1"), findings,
                       [&] { return allgatherv(comm, options); });
  }
  {
    AlltoallvOptions options;
    options.memory = memory;
    options.input = input.data();
    options.output = output.data();
    options.send_counts.assign(n + 1, 1);
    options.recv_counts.assign(n, 1);
    expect_issue_error(case_name("alltoallv", comm, "send_counts.size()=size+1"), findings,
                       [&] { return alltoallv(comm, options); });
  }
  {
    SendOptions send_options;
    send_options.buffer = input.data();
    send_options.nbytes = 8;
    send_options.peer = n;
    expect_issue_error(case_name("send", comm, "peer=size"), findings, [&] { return send(comm, send_options); });
    RecvOptions recv_options;
    recv_options.buffer = output.data();
    recv_options.nbytes = 8;
    recv_options.peer = -1;
    expect_issue_error(case_name("recv", comm, "peer=-1"), findings, [&] { return recv(comm, recv_options); });
  }
  {
    AllreduceOptions options;  // a null input with a non-zero count
    options.memory = memory;
    options.output = output.data();
    options.count = count;
    expect_issue_error(case_name("allreduce", comm, "input=nullptr count=7"), findings,
                       [&] { return allreduce(comm, options); });
  }
}

}  // namespace

void check_invalid_arguments(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const size_t count = 7;
  Buffer input(DType::i64, count * (n + 1));  // large enough for any dtype and layout below
  Buffer output(DType::i64, count * (n + 1));
  input.fill_bytes(1);
  check_invalid_reductions(comm, plan.memory, input, output, count, findings);
  check_invalid_roots(comm, plan.memory, input, output, count, findings);
  check_invalid_lists_and_peers(comm, plan.memory, input, output, count, findings);
  // The communicator still works: bad input is rejected before any work starts.
  allreduce_case(comm, plan.memory, DType::i32, ReduceOp::sum, 1000, Algorithm::automatic, false, findings);
}

}  // namespace giant::ccl::test
