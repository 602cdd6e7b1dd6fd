#include "giant/parallel/data_parallel/low_rank_wire.h"

#include <cmath>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/base/byte_record.h"
#include "giant/base/error.h"
#include "giant/parallel/data_parallel/bucket_layout.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {
namespace {

constexpr uint64_t kStateMagic = 0x57524c47;  // "GLRW"
const char* const kState = "powersgd wire state";

// Every rank draws matrix i's first factor from the same seed.
constexpr uint64_t kFactorSeed = 0x9e3779b97f4a7c15ull;

// A flat f32 buffer the host's ranks may read in place (empty: a plain one).
at::Tensor flat_buffer(ccl::Communicator& comm, int64_t elements) {
  const auto options = at::TensorOptions().dtype(at::kFloat);
  if (elements == 0) return torch::zeros({0}, options);
  return bucket_storage(&comm, elements, options);
}

void average_over(at::Tensor& flat, ccl::Communicator& comm) {
  if (flat.numel() > 0 && comm.size() > 1) allreduce_async(flat, comm, ccl::ReduceOp::avg).wait();
}

}  // namespace

void orthonormalize_columns(at::Tensor& p) {
  at::NoGradGuard no_grad;
  for (int64_t j = 0; j < p.size(1); ++j) {
    at::Tensor column = p.select(1, j);
    const double before = column.norm().item<double>();
    for (int64_t k = 0; k < j; ++k) {
      const at::Tensor done = p.select(1, k);
      column.sub_(done * at::dot(done, column));
    }
    const double norm = column.norm().item<double>();
    // What is left of a column inside the span of the others is rounding:
    // normalising it would make a direction of noise.
    if (std::isfinite(norm) && norm > 1e-6 * before) {
      column.div_(norm);
    } else if (std::isfinite(norm)) {
      column.zero_();
    } else {
      column.fill_(std::numeric_limits<float>::quiet_NaN());
    }
  }
}

LowRankWire::LowRankWire(const std::vector<at::Tensor>& parameters, ccl::Communicator& comm, int rank)
    : comm_(comm), rank_(rank) {
  GIANT_CHECK(rank >= 1, "a low-rank gradient wire needs a rank of at least 1, not ", rank);
  int64_t p_elements = 0, q_elements = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const at::Tensor& p = parameters[i];
    elements_ += p.numel();
    const int64_t rows = p.dim() >= 2 ? p.size(0) : 0;
    const int64_t cols = rows > 0 ? p.numel() / rows : 0;
    if (rows > 0 && 2 * rank * (rows + cols) <= rows * cols) {
      matrices_.push_back({i, rows, cols, p_elements, q_elements, torch::zeros({rows, cols}, at::kFloat)});
      p_elements += rows * rank;
      q_elements += cols * rank;
    } else {
      whole_.push_back(i);
    }
  }
  for (size_t i : whole_) p_elements += parameters[i].numel();
  p_ = flat_buffer(comm_, p_elements);
  q_ = flat_buffer(comm_, q_elements);
  for (const Matrix& m : matrices_) draw_factor(m);
}

at::Tensor LowRankWire::p_of(const Matrix& m) const {
  return p_.narrow(0, m.p_offset, m.rows * rank_).view({m.rows, rank_});
}

at::Tensor LowRankWire::q_of(const Matrix& m) const {
  return q_.narrow(0, m.q_offset, m.cols * rank_).view({m.cols, rank_});
}

void LowRankWire::draw_factor(const Matrix& m) {
  auto generator = at::detail::createCPUGenerator(kFactorSeed + m.parameter);
  q_of(m).copy_(at::randn({m.cols, rank_}, generator, at::TensorOptions().dtype(at::kFloat)));
}

void LowRankWire::average(const std::vector<at::Tensor>& gradients) {
  at::NoGradGuard no_grad;
  int64_t whole_offset = matrices_.empty() ? 0 : matrices_.back().p_offset + matrices_.back().rows * rank_;
  for (const Matrix& m : matrices_) {
    at::Tensor p = p_of(m);
    m.residual.add_(gradients.at(m.parameter).view({m.rows, m.cols}));
    at::mm_out(p, m.residual, q_of(m));
  }
  std::vector<at::Tensor> whole_slices;
  for (size_t i : whole_) {
    const at::Tensor& g = gradients.at(i);
    whole_slices.push_back(p_.narrow(0, whole_offset, g.numel()));
    whole_slices.back().copy_(g.view(-1));
    whole_offset += g.numel();
  }
  average_over(p_, comm_);
  for (size_t w = 0; w < whole_.size(); ++w) gradients[whole_[w]].view(-1).copy_(whole_slices[w]);

  for (const Matrix& m : matrices_) {
    at::Tensor p = p_of(m), q = q_of(m);
    orthonormalize_columns(p);
    at::mm_out(q, m.residual.t(), p);
  }
  average_over(q_, comm_);

  for (const Matrix& m : matrices_) {
    at::Tensor g = gradients[m.parameter].view({m.rows, m.cols});
    at::mm_out(g, p_of(m), q_of(m).t());
    if (std::isfinite(q_of(m).sum().item<float>())) {
      m.residual.sub_(g);
    } else {
      g.fill_(std::numeric_limits<float>::quiet_NaN());
      m.residual.zero_();
      draw_factor(m);
    }
  }
}

double LowRankWire::ratio() const {
  const int64_t sent = p_.numel() + q_.numel();
  return sent > 0 ? static_cast<double>(elements_) / static_cast<double>(sent) : 1.0;
}

int64_t LowRankWire::held_bytes() const {
  int64_t bytes = p_.nbytes() + q_.nbytes();
  for (const Matrix& m : matrices_) bytes += m.residual.nbytes();
  return bytes;
}

std::vector<uint8_t> LowRankWire::save() const {
  std::vector<uint8_t> out;
  put_u64(out, kStateMagic);
  put_u64(out, static_cast<uint64_t>(rank_));
  put_u64(out, matrices_.size());
  for (const Matrix& m : matrices_) {
    put_u64(out, m.parameter);
    put_u64(out, static_cast<uint64_t>(m.rows));
    put_u64(out, static_cast<uint64_t>(m.cols));
    put_floats(out, q_of(m).contiguous().data_ptr<float>(), static_cast<size_t>(m.cols * rank_));
    put_floats(out, m.residual.data_ptr<float>(), static_cast<size_t>(m.rows * m.cols));
  }
  return out;
}

void LowRankWire::restore(const std::vector<uint8_t>& bytes) {
  size_t at = 0;
  GIANT_CHECK(take_u64(bytes, at, kState) == kStateMagic, "not a powersgd gradient wire state");
  const uint64_t rank = take_u64(bytes, at, kState);
  GIANT_CHECK(rank == static_cast<uint64_t>(rank_), "the powersgd state is of rank ", rank, ", this wire's ", rank_);
  GIANT_CHECK(take_u64(bytes, at, kState) == matrices_.size(), "the powersgd state holds another number of matrices");
  std::vector<at::Tensor> factors, residuals;
  for (const Matrix& m : matrices_) {
    const uint64_t parameter = take_u64(bytes, at, kState), rows = take_u64(bytes, at, kState),
                   cols = take_u64(bytes, at, kState);
    GIANT_CHECK(parameter == m.parameter && rows == static_cast<uint64_t>(m.rows) &&
                    cols == static_cast<uint64_t>(m.cols),
                "the powersgd state does not match parameter ", m.parameter, " (", m.rows, " x ", m.cols, ")");
    factors.push_back(torch::empty({m.cols, rank_}, at::kFloat));
    take_floats(bytes, at, factors.back().data_ptr<float>(), static_cast<size_t>(m.cols * rank_), kState);
    residuals.push_back(torch::empty({m.rows, m.cols}, at::kFloat));
    take_floats(bytes, at, residuals.back().data_ptr<float>(), static_cast<size_t>(m.rows * m.cols), kState);
  }
  GIANT_CHECK(at == bytes.size(), "the powersgd state has trailing bytes");
  for (size_t i = 0; i < matrices_.size(); ++i) {
    q_of(matrices_[i]).copy_(factors[i]);
    matrices_[i].residual.copy_(residuals[i]);
  }
}

}  // namespace giant::parallel
