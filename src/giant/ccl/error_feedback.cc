#include "giant/ccl/error_feedback.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "giant/base/error.h"
#include "giant/ccl/collectives.h"

namespace giant::ccl {

TopKCompressor::TopKCompressor(double ratio) : ratio_(ratio) {
  GIANT_CHECK(ratio > 0.0 && ratio <= 1.0, "TopKCompressor: ratio must be in (0, 1], got ", ratio);
}

size_t TopKCompressor::k_for(size_t count) const {
  size_t k = static_cast<size_t>(ratio_ * static_cast<double>(count));
  return std::min(count, std::max<size_t>(1, k));
}

void TopKCompressor::reset() {
  residual_.clear();
  kept_ = SparseGradient();
}

const SparseGradient& TopKCompressor::compress(const float* grad, size_t count) {
  GIANT_CHECK(count <= std::numeric_limits<uint32_t>::max(), "TopKCompressor: ", count,
              " elements do not fit 32-bit indices");
  GIANT_CHECK(residual_.empty() || residual_.size() == count, "TopKCompressor: the residual holds ",
              residual_.size(), " elements, this gradient ", count, " (call reset() to change the size)");
  GIANT_CHECK(count == 0 || grad != nullptr, "TopKCompressor: grad must not be null");
  residual_.resize(count, 0.0f);
  for (size_t i = 0; i < count; ++i) residual_[i] += grad[i];  // the residual now holds acc
  const size_t k = k_for(count);
  order_.resize(count);
  std::iota(order_.begin(), order_.end(), 0u);
  auto magnitude = [&](uint32_t i) {
    float m = std::fabs(residual_[i]);
    return std::isnan(m) ? std::numeric_limits<float>::infinity() : m;
  };
  auto before = [&](uint32_t a, uint32_t b) {  // a strict total order: larger first, then lower index
    float ma = magnitude(a), mb = magnitude(b);
    return ma > mb || (ma == mb && a < b);
  };
  if (k < count) std::nth_element(order_.begin(), order_.begin() + k, order_.end(), before);
  std::sort(order_.begin(), order_.begin() + k);
  kept_.indices.assign(order_.begin(), order_.begin() + k);
  kept_.values.resize(k);
  for (size_t j = 0; j < k; ++j) {
    kept_.values[j] = residual_[kept_.indices[j]];
    residual_[kept_.indices[j]] = 0.0f;  // sent whole: nothing of it stays behind
  }
  return kept_;
}

void topk_allreduce(Communicator& comm, TopKCompressor& compressor, const float* grad, float* output, size_t count,
                    std::chrono::milliseconds timeout) {
  GIANT_CHECK(count == 0 || output != nullptr, "topk_allreduce: output must not be null");
  const SparseGradient& kept = compressor.compress(grad, count);
  const size_t k = kept.indices.size();
  struct Pair {
    uint32_t index;
    float value;
  };
  static_assert(sizeof(Pair) == 8, "pair layout");
  std::vector<Pair> mine(k), all(k * comm.size());
  for (size_t j = 0; j < k; ++j) mine[j] = {kept.indices[j], kept.values[j]};
  // A fixed k per rank: ranks that disagree on k (count or ratio) get a mismatch error.
  AllgatherOptions o;
  o.input = mine.data();
  o.output = all.data();
  o.count = k * sizeof(Pair);
  o.dtype = DType::u8;
  o.timeout = timeout;
  allgather(comm, o).wait();
  std::fill(output, output + count, 0.0f);
  for (const Pair& p : all) {  // rank order, then index order: the same additions everywhere
    GIANT_CHECK(p.index < count, "topk_allreduce: index ", p.index, " out of range (count ", count,
                "): the ranks passed different counts");
    output[p.index] += p.value;
  }
}

}  // namespace giant::ccl
