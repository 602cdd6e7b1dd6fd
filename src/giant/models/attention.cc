#include "giant/models/attention.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "giant/base/error.h"

namespace giant::models {

at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t heads, double dropout,
                                 bool training) {
  GIANT_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0,
              "attention input must be [batch, seq, 3 x hidden] with hidden a multiple of ",
              heads, " heads, got ", qkv.sizes());
  const int64_t batch = qkv.size(0), seq = qkv.size(1), hidden = qkv.size(2) / 3;
  const int64_t head_dim = hidden / heads;
  // Each of q, k, v as [batch * heads, seq, head_dim] for batched matrix
  // products. One unbind: its backward stacks the three gradients at once,
  // where indexing each would fill a zeroed copy of the whole input thrice.
  const auto parts = qkv.view({batch, seq, 3, heads, head_dim}).unbind(2);
  auto heads_first = [&](const at::Tensor& part) {
    return part.transpose(1, 2).reshape({batch * heads, seq, head_dim});
  };
  at::Tensor q = heads_first(parts[0]), k = heads_first(parts[1]), v = heads_first(parts[2]);

  // Scores scaled and masked in the product itself: beta * mask + alpha * q k^T,
  // with the mask -inf above the diagonal (a position sees itself and the past).
  at::Tensor mask = at::full({seq, seq}, -std::numeric_limits<double>::infinity(), qkv.options())
                        .triu_(1)
                        .expand({batch * heads, seq, seq});
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  at::Tensor weights = at::baddbmm(mask, q, k.transpose(1, 2), 1.0, scale).softmax(-1);
  if (training && dropout > 0.0) {
    weights = at::dropout(weights, dropout, true);
  }
  at::Tensor out = at::bmm(weights, v);  // [batch * heads, seq, head_dim]
  return out.view({batch, heads, seq, head_dim}).transpose(1, 2).reshape({batch, seq, hidden});
}

}  // namespace giant::models
