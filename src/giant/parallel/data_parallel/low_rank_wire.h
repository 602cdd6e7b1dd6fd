// PowerSGD (Vogels et al., 2019): data-parallel gradients averaged as a
// low-rank approximation, for links too slow for even int4 codecs
// (parallel.grad_wire = powersgd:R).
//
// Each parameter of two or more dimensions is a matrix M (its first
// dimension by the rest) with a residual E (what earlier steps dropped) and
// a right factor Q (m x R, the same on every rank, kept between steps):
//   M = G + E;  P = avg_ranks(M Q);  P = orthonormal columns of P;
//   Q = avg_ranks(M^T P);  G = P Q^T;  E = M - G.
// Since Q is shared the averages are averages of M, so G is the same rank-R
// approximation of the average of M on every rank (bitwise: ccl's results
// are), and each rank keeps what the approximation missed of its own M.
// The step sends R (n + m) elements per matrix instead of n m, in two
// allreduces; vectors, and matrices that would not shrink at least 2x, are
// averaged whole in the first. A matrix whose average is not finite comes
// out NaN (the step's non-finite check sees it) and restarts clean: no
// residual, Q drawn again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/ccl/communicator.h"

namespace giant::parallel {

class LowRankWire {
 public:
  // parameters: their shapes (f32 gradients); collective over comm (its
  // buffers are shared with the host's ranks). rank: 1 or more.
  LowRankWire(const std::vector<at::Tensor>& parameters, ccl::Communicator& comm, int rank);
  LowRankWire(const LowRankWire&) = delete;
  LowRankWire& operator=(const LowRankWire&) = delete;

  // gradients[i]: parameter i's gradient on this rank (f32, contiguous),
  // replaced in place by the approximation of the average over the ranks.
  void average(const std::vector<at::Tensor>& gradients);

  int rank() const { return rank_; }
  // The gradients' elements over the elements one step sends.
  double ratio() const;
  int64_t held_bytes() const;

  // The residuals and factors (for checkpoints), and back: restore throws
  // giant::Error, keeping its state, for bytes not made by a wire of this
  // rank over these shapes.
  std::vector<uint8_t> save() const;
  void restore(const std::vector<uint8_t>& bytes);

 private:
  struct Matrix {
    size_t parameter;
    int64_t rows, cols;
    int64_t p_offset, q_offset;  // in p_ and q_
    at::Tensor residual;         // rows x cols
  };
  void draw_factor(const Matrix& m);  // a fresh Q (the same on every rank)
  at::Tensor p_of(const Matrix& m) const;
  at::Tensor q_of(const Matrix& m) const;

  ccl::Communicator& comm_;
  const int rank_;
  std::vector<Matrix> matrices_;
  std::vector<size_t> whole_;  // parameters averaged whole, after the P factors
  int64_t elements_ = 0;       // of every parameter
  at::Tensor p_, q_;           // flat: [P of each matrix, whole parameters], [Q of each matrix]
};

// Orthonormalises the columns of p (n x R) in place, by Gram-Schmidt in
// column order; a column that is (numerically) zero stays zero.
void orthonormalize_columns(at::Tensor& p);

}  // namespace giant::parallel
