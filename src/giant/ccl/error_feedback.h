// Top-k gradient compression with error feedback.
//
// Each call sends only the k = max(1, ratio * count) entries of largest
// magnitude of (gradient + residual), as (index, value) pairs; whatever was
// not sent stays in the residual and is added to the next call's gradient,
// so no part of a gradient is lost, only delayed (error feedback). Over many
// steps the running sum of the compressed results follows the dense one: the
// two differ by the sum of the ranks' residuals, which stays bounded.
//
// Bandwidth, per rank and call, for n ranks and count floats:
//   dense ring allreduce      8 * count * (n-1)/n bytes sent
//   topk_allreduce            8 * k * (n-1) bytes (an allgather of 4-byte
//                             index + 4-byte value pairs)
// so it saves a factor 1 / (ratio * n): worth it when ratio < 1/n, e.g.
// ratio 0.01 on 8 ranks sends 12.5 times fewer bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "giant/ccl/communicator.h"

namespace giant::ccl {

// The pairs one call keeps, indices ascending.
struct SparseGradient {
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

class TopKCompressor {
 public:
  // 0 < ratio <= 1 (throws giant::Error otherwise).
  explicit TopKCompressor(double ratio);

  double ratio() const { return ratio_; }
  // max(1, floor(ratio * count)), at most count.
  size_t k_for(size_t count) const;

  // acc = grad + residual; keeps the k entries of acc of largest magnitude
  // (ties: the lower index; NaN counts as largest) and makes the others the
  // new residual, so kept values + new residual == acc exactly. count must be
  // the same on every call until reset() (it is fixed by the first call).
  const SparseGradient& compress(const float* grad, size_t count);

  const std::vector<float>& residual() const { return residual_; }
  void reset();

 private:
  double ratio_;
  std::vector<float> residual_;
  std::vector<uint32_t> order_;
  SparseGradient kept_;
};

// Sums a gradient of `count` floats over every rank of comm through top-k
// compression, into the dense output (count floats; may equal grad): each
// rank compresses with its own compressor, the pairs are allgathered, and
// every rank adds them in rank order (bitwise identical on every rank).
// Blocks until done. Every rank must pass the same count and the same ratio.
// Divide by comm.size() for the mean.
void topk_allreduce(Communicator& comm, TopKCompressor& compressor, const float* grad, float* output, size_t count,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace giant::ccl
