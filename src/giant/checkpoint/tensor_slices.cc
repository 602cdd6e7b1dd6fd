#include "giant/checkpoint/tensor_slices.h"

#include <algorithm>
#include <optional>

#include <ATen/ATen.h>

#include "giant/base/error.h"
#include "giant/models/gpt.h"

namespace giant::checkpoint {
namespace {

// A box of a tensor's index space: where it starts and its extent.
struct Box {
  std::vector<int64_t> start, size;
};

// The boxes of the local tensor a split cuts, with where each starts in
// the global tensor.
struct ShardBox {
  Box local;
  std::vector<int64_t> global_start;
};

std::vector<ShardBox> shard_boxes(const std::vector<int64_t>& local_shape, const parallel::TensorSplit& split,
                                  int rank, int size) {
  const std::vector<int64_t> zeros(local_shape.size(), 0);
  if (split.replicated()) return {{{zeros, local_shape}, zeros}};
  const auto dim = static_cast<size_t>(split.dim);
  GIANT_CHECK(dim < local_shape.size() && local_shape[dim] % split.stacked == 0, "a split along dimension ",
              split.dim, " in ", split.stacked, " blocks does not fit a shard of shape ", local_shape.size(),
              " dimension(s)");
  const int64_t block = local_shape[dim] / split.stacked;  // per block on this rank
  std::vector<ShardBox> boxes;
  for (int64_t j = 0; j < split.stacked; ++j) {
    ShardBox box{{zeros, local_shape}, zeros};
    box.local.start[dim] = j * block;
    box.local.size[dim] = block;
    // Global block j holds every rank's block j, in rank order.
    box.global_start[dim] = (j * size + rank) * block;
    boxes.push_back(box);
  }
  return boxes;
}

std::vector<int64_t> global_shape_of(std::vector<int64_t> local_shape, const parallel::TensorSplit& split, int size) {
  if (!split.replicated()) local_shape[static_cast<size_t>(split.dim)] *= size;
  return local_shape;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) strides[k - 1] = strides[k] * shape[k];
  return strides;
}

// The boxes, each contiguous in row-major order, that elements [begin, end)
// of `shape` cut into, in order. `start` fixes the dimensions before `dim`.
void contiguous_boxes(int64_t begin, int64_t end, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& strides, size_t dim, std::vector<int64_t> start,
                      std::vector<Box>& out) {
  if (begin >= end) return;
  auto box_of = [&](size_t d, int64_t from, int64_t count) {
    Box box{start, std::vector<int64_t>(shape.size(), 1)};
    box.start[d] = from;
    box.size[d] = count;
    for (size_t k = d + 1; k < shape.size(); ++k) {
      box.start[k] = 0;
      box.size[k] = shape[k];
    }
    return box;
  };
  const int64_t row = strides[dim];  // elements per index of this dimension
  int64_t first = begin / row;
  const int64_t last = end / row;  // the row holding `end` (maybe past the end)
  auto within_row = [&](int64_t index, int64_t from, int64_t to) {
    std::vector<int64_t> fixed = start;
    fixed[dim] = index;
    contiguous_boxes(from, to, shape, strides, dim + 1, fixed, out);
  };
  if (first == last) return within_row(first, begin - first * row, end - first * row);
  if (begin % row != 0) {
    within_row(first, begin % row, row);
    ++first;
  }
  if (last > first) out.push_back(box_of(dim, first, last - first));
  if (end % row != 0) within_row(last, 0, end % row);
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  Box box{a.start, a.size};
  for (size_t k = 0; k < a.start.size(); ++k) {
    const int64_t from = std::max(a.start[k], b.start[k]);
    const int64_t to = std::min(a.start[k] + a.size[k], b.start[k] + b.size[k]);
    if (to <= from) return std::nullopt;
    box.start[k] = from;
    box.size[k] = to - from;
  }
  return box;
}

at::Tensor narrow_to(at::Tensor tensor, const Box& whole, const Box& part) {
  for (size_t k = 0; k < whole.start.size(); ++k) {
    tensor = tensor.narrow(static_cast<int64_t>(k), part.start[k] - whole.start[k], part.size[k]);
  }
  return tensor;
}

TensorSlice slice_of(const std::string& name, const std::vector<int64_t>& global_shape, const ShardBox& shard,
                     const Box& part, at::Tensor view) {
  TensorSlice slice{name, global_shape, part.start, std::move(view)};
  for (size_t k = 0; k < part.start.size(); ++k) {
    slice.offset[k] = part.start[k] - shard.local.start[k] + shard.global_start[k];
  }
  return slice;
}

}  // namespace

std::string global_parameter_name(const std::string& local_name) {
  const models::TiedWeightNames tied;
  if (local_name == tied.copy) return global_parameter_name(tied.owner);
  const size_t last = local_name.rfind('.');
  const size_t part = last == std::string::npos ? 0 : last + 1;
  if (local_name.compare(part, 3, "tp_") == 0) return local_name.substr(0, part) + local_name.substr(part + 3);
  return local_name;
}

std::vector<TensorSlice> slices_of(const std::string& name, const at::Tensor& local,
                                   const parallel::TensorSplit& split, int rank, int size) {
  const std::vector<int64_t> local_shape = local.sizes().vec();
  const std::vector<ShardBox> shards = shard_boxes(local_shape, split, rank, size);
  const std::vector<int64_t> global_shape = global_shape_of(local_shape, split, size);
  const Box whole{std::vector<int64_t>(local_shape.size(), 0), local_shape};
  std::vector<TensorSlice> slices;
  for (const auto& shard : shards) {
    slices.push_back(slice_of(name, global_shape, shard, shard.local, narrow_to(local, whole, shard.local)));
  }
  return slices;
}

std::vector<TensorSlice> slices_of_stretch(const std::string& name, const at::Tensor& stretch, int64_t flat_offset,
                                           const std::vector<int64_t>& local_shape,
                                           const parallel::TensorSplit& split, int rank, int size) {
  GIANT_CHECK(stretch.dim() == 1, "a stretch is flat, got ", stretch.sizes());
  const std::vector<ShardBox> shards = shard_boxes(local_shape, split, rank, size);
  const std::vector<int64_t> global_shape = global_shape_of(local_shape, split, size);
  const std::vector<int64_t> strides = strides_of(local_shape);
  std::vector<Box> boxes;
  if (local_shape.empty()) {
    boxes.push_back({{}, {}});
  } else {
    contiguous_boxes(flat_offset, flat_offset + stretch.numel(), local_shape, strides, 0,
                     std::vector<int64_t>(local_shape.size(), 0), boxes);
  }
  std::vector<TensorSlice> slices;
  for (const Box& box : boxes) {
    int64_t first = 0, count = 1;
    for (size_t k = 0; k < box.start.size(); ++k) {
      first += box.start[k] * strides[k];
      count *= box.size[k];
    }
    const at::Tensor view = stretch.narrow(0, first - flat_offset, count).view(box.size);
    for (const auto& shard : shards) {
      if (const auto part = intersect(box, shard.local)) {
        slices.push_back(slice_of(name, global_shape, shard, *part, narrow_to(view, box, *part)));
      }
    }
  }
  return slices;
}

}  // namespace giant::checkpoint
