// What a rank's optimizer updates, whatever the ZeRO stage: every parameter
// whole (stage 0, or no data parallelism), or the flat stretches of them in
// this rank's blocks (stages 1-3). A data-parallel engine hands the trainer
// one such list; the optimizer, the masters and the checkpoint read it alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace giant::parallel {

struct UpdatePiece {
  at::Tensor tensor;     // in the compute dtype: the parameter itself, or a flat view of its stretch
  size_t parameter = 0;  // the parameter it comes from
  int64_t offset = 0;    // where it starts in that parameter (elements, row-major)
  bool whole = true;     // the whole parameter in its shape, not a flat stretch
  // Where a whole parameter's gradient lands when that is not tensor.grad()
  // (a bucket's view in another dtype); undefined otherwise.
  at::Tensor gradient;

  // The gradient the update reads (valid after the engine's finish()).
  at::Tensor current_gradient() const { return gradient.defined() ? gradient : tensor.grad(); }
  // The same piece of a tensor shaped like the parameter (its fp32 initial
  // value, say): that tensor itself when the piece is whole.
  at::Tensor piece_of(const at::Tensor& like_parameter) const;
};

// Every parameter whole; `gradients` (when given, one per parameter) are
// where their gradients land.
std::vector<UpdatePiece> whole_pieces(const std::vector<at::Tensor>& parameters,
                                      const std::vector<at::Tensor>& gradients = {});

// A flat buffer of equal blocks (a ZeRO bucket or unit) holds members end to
// end; `member_offsets[k]` and `member_elements[k]` place member k in it.
// The parts of the members inside the block [block_begin, block_begin +
// block), in member order: buffer positions [begin, end) of member k.
struct BlockStretch {
  size_t member = 0;
  int64_t begin = 0, end = 0;
};
std::vector<BlockStretch> stretches_in_block(const std::vector<int64_t>& member_offsets,
                                             const std::vector<int64_t>& member_elements, int64_t block_begin,
                                             int64_t block);

}  // namespace giant::parallel
