#include "giant/planner/pipeline_sim.h"

#include <algorithm>

#include "giant/base/error.h"

namespace giant::planner {

namespace {

struct Op {
  bool backward;
  int chunk;  // global model chunk
  int64_t micro;
};

// The order in which device d runs its passes.
std::vector<Op> device_order(const PipelineInput& in, int d) {
  const int p = in.stages, v = in.chunks_per_stage;
  const int64_t m = in.micro_batches;
  std::vector<Op> ops;
  ops.reserve(static_cast<size_t>(2 * m * v));
  if (in.schedule == Schedule::gpipe) {
    for (int64_t j = 0; j < m; ++j) ops.push_back({false, d, j});
    for (int64_t j = m - 1; j >= 0; --j) ops.push_back({true, d, j});
    return ops;
  }
  // Interleaved (1F1B is v = 1): the k-th forward of a device is chunk
  // (k / p) % v of micro-batch (k / (p v)) p + k % p; backwards walk the
  // chunks in reverse.
  const int64_t total = m * v;
  auto forward = [&](int64_t k) {
    const int local = static_cast<int>((k / p) % v);
    return Op{false, local * p + d, (k / (int64_t{p} * v)) * p + k % p};
  };
  auto backward = [&](int64_t k) {
    const int local = v - 1 - static_cast<int>((k / p) % v);
    return Op{true, local * p + d, (k / (int64_t{p} * v)) * p + k % p};
  };
  int64_t warmup = v == 1 ? std::min<int64_t>(p - d - 1, m)
                          : std::min<int64_t>(int64_t{p - d - 1} * 2 + int64_t{v - 1} * p, total);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back(forward(f));
  while (f < total) {
    ops.push_back(forward(f++));
    ops.push_back(backward(b++));
  }
  while (b < total) ops.push_back(backward(b++));
  return ops;
}

}  // namespace

PipelineResult simulate_pipeline(const PipelineInput& in) {
  const int p = in.stages, v = in.chunks_per_stage;
  const int chunks = p * v;
  const int64_t m = in.micro_batches;
  GIANT_CHECK(p >= 1 && v >= 1 && m >= 1, "bad pipeline p=", p, " v=", v, " m=", m);
  GIANT_CHECK(static_cast<int>(in.forward_s.size()) == chunks && static_cast<int>(in.backward_s.size()) == chunks,
              "expected ", chunks, " chunk times, got ", in.forward_s.size(), " and ", in.backward_s.size());
  GIANT_CHECK(v == 1 || m % p == 0, "interleaved needs m a multiple of p, got m=", m, " p=", p);

  std::vector<std::vector<Op>> orders(p);
  for (int d = 0; d < p; ++d) orders[d] = device_order(in, d);
  constexpr double kNotDone = -1;
  // Finish time of each pass, indexed [chunk * m + micro].
  std::vector<double> forward_done(static_cast<size_t>(chunks * m), kNotDone);
  std::vector<double> backward_done(forward_done.size(), kNotDone);
  std::vector<size_t> next(p, 0);
  std::vector<double> device_free(p, 0), busy(p, 0);
  const double transfer = p > 1 ? in.transfer_s : 0;

  // When its inputs are ready, or kNotDone if they are not produced yet.
  auto ready_at = [&](const Op& op) -> double {
    const size_t self = static_cast<size_t>(op.chunk * m + op.micro);
    if (!op.backward) {
      if (op.chunk == 0) return 0;
      const double prev = forward_done[self - m];
      return prev == kNotDone ? kNotDone : prev + transfer;
    }
    const double own = forward_done[self];
    if (own == kNotDone) return kNotDone;
    if (op.chunk == chunks - 1) return own;
    const double after = backward_done[self + m];
    return after == kNotDone ? kNotDone : std::max(own, after + transfer);
  };

  size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  while (remaining > 0) {
    size_t progressed = 0;
    for (int d = 0; d < p; ++d) {
      while (next[d] < orders[d].size()) {
        const Op& op = orders[d][next[d]];
        const double ready = ready_at(op);
        if (ready == kNotDone) break;
        const double duration = op.backward ? in.backward_s[op.chunk] : in.forward_s[op.chunk];
        const double finish = std::max(ready, device_free[d]) + duration;
        (op.backward ? backward_done : forward_done)[static_cast<size_t>(op.chunk * m + op.micro)] = finish;
        device_free[d] = finish;
        busy[d] += duration;
        ++next[d];
        ++progressed;
      }
    }
    GIANT_CHECK(progressed > 0, "pipeline schedule deadlocked (an internal error)");
    remaining -= progressed;
  }
  PipelineResult result;
  result.makespan_s = *std::max_element(device_free.begin(), device_free.end());
  result.busiest_device_s = *std::max_element(busy.begin(), busy.end());
  return result;
}

double pipeline_closed_form_s(int p, int v, int64_t m, Schedule schedule, double f, double b) {
  const double per_micro = f + b;
  if (schedule == Schedule::interleaved) return m * per_micro + (p - 1) * per_micro / v;
  return (m + p - 1) * per_micro;
}

}  // namespace giant::planner
