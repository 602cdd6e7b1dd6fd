#include "giant/parallel/data_parallel/update_piece.h"

#include <algorithm>

namespace giant::parallel {

at::Tensor UpdatePiece::piece_of(const at::Tensor& like_parameter) const {
  if (whole) return like_parameter;
  return like_parameter.reshape({-1}).narrow(0, offset, tensor.numel());
}

std::vector<UpdatePiece> whole_pieces(const std::vector<at::Tensor>& parameters,
                                      const std::vector<at::Tensor>& gradients) {
  std::vector<UpdatePiece> pieces;
  for (size_t i = 0; i < parameters.size(); ++i) {
    UpdatePiece piece;
    piece.tensor = parameters[i];
    piece.parameter = i;
    if (!gradients.empty()) piece.gradient = gradients.at(i);
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::vector<BlockStretch> stretches_in_block(const std::vector<int64_t>& member_offsets,
                                             const std::vector<int64_t>& member_elements, int64_t block_begin,
                                             int64_t block) {
  std::vector<BlockStretch> stretches;
  const int64_t block_end = block_begin + block;
  for (size_t k = 0; k < member_offsets.size(); ++k) {
    const int64_t offset = member_offsets[k];
    const int64_t begin = std::max(offset, block_begin), end = std::min(offset + member_elements[k], block_end);
    if (begin < end) stretches.push_back({k, begin, end});
  }
  return stretches;
}

}  // namespace giant::parallel
