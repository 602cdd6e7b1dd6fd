#include "giant/train/checkpoint_state.h"

#include <cstring>
#include <mutex>

#include <ATen/ATen.h>

#include "giant/base/error.h"
#include "giant/train/run_device.h"

namespace giant::train {
namespace {

using checkpoint::TensorSlice;

parallel::TensorSplit split_of(const HeldTensors& held, size_t parameter) {
  const auto found = held.splits.find(held.names.at(parameter));
  return found == held.splits.end() ? parallel::TensorSplit{} : found->second;
}

// The slices of tensor `t`, shaped like updated[j] (a whole parameter or a
// stretch of one), under the global name `name`.
std::vector<TensorSlice> slices_like_updated(const HeldTensors& held, size_t j, const std::string& name,
                                             const at::Tensor& t) {
  const size_t source = held.updated_source.at(j);
  const parallel::TensorSplit split = split_of(held, source);
  if (held.updated_offset.empty()) return checkpoint::slices_of(name, t, split, held.tp_rank, held.tp_size);
  return checkpoint::slices_of_stretch(name, t, held.updated_offset.at(j), held.parameters.at(source).sizes().vec(),
                                       split, held.tp_rank, held.tp_size);
}

void append(std::vector<TensorSlice>& to, std::vector<TensorSlice> from) {
  for (auto& slice : from) to.push_back(std::move(slice));
}

std::string global_name(const HeldTensors& held, size_t parameter) {
  return checkpoint::global_parameter_name(held.names.at(parameter));
}

}  // namespace

std::vector<TensorSlice> slices_to_save(const HeldTensors& held) {
  std::vector<TensorSlice> slices;
  const bool sharded = !held.updated_offset.empty();
  for (size_t j = 0; j < held.updated.size(); ++j) {
    const size_t source = held.updated_source[j];
    if (static_cast<int>(source) == held.tied_copy) continue;
    const bool replicated_over_tp = split_of(held, source).replicated();
    if ((!sharded && held.dp_rank != 0) || (replicated_over_tp && held.tp_rank != 0)) continue;
    const std::string name = global_name(held, source);
    append(slices, slices_like_updated(held, j, "model/" + name, held.updated[j]));
    append(slices, slices_like_updated(held, j, "optim/exp_avg/" + name, held.optimizer->first_moment(j)));
    append(slices, slices_like_updated(held, j, "optim/exp_avg_sq/" + name, held.optimizer->second_moment(j)));
  }
  return slices;
}

std::vector<TensorSlice> slices_to_load(const HeldTensors& held, bool optimizer_state) {
  std::vector<TensorSlice> slices;
  for (size_t i = 0; held.owned_compute.empty() && i < held.parameters.size(); ++i) {
    append(slices, checkpoint::slices_of("model/" + global_name(held, i), held.parameters[i], split_of(held, i),
                                         held.tp_rank, held.tp_size));
  }
  for (size_t j = 0; j < held.updated.size(); ++j) {
    const std::string name = global_name(held, held.updated_source[j]);
    if (!held.owned_compute.empty()) {
      append(slices, slices_like_updated(held, j, "model/" + name, held.owned_compute.at(j)));
    }
    if (held.separate_masters) append(slices, slices_like_updated(held, j, "model/" + name, held.updated[j]));
    if (!optimizer_state) continue;
    append(slices, slices_like_updated(held, j, "optim/exp_avg/" + name, held.optimizer->first_moment(j)));
    append(slices, slices_like_updated(held, j, "optim/exp_avg_sq/" + name, held.optimizer->second_moment(j)));
  }
  return slices;
}

std::string wire_feedback_blob_name(int world_rank) { return "grad_wire/" + std::to_string(world_rank); }

std::string generator_blob_name(int world_rank, c10::Device device) {
  const std::string kind = device.is_cpu() ? "rng/" : "rng_" + c10::DeviceTypeName(device.type(), true) + "/";
  return kind + std::to_string(world_rank);
}

checkpoint::Blob generator_state_blob(int world_rank, c10::Device device) {
  at::Generator generator = device_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor state = generator.get_state();
  const auto* bytes = state.data_ptr<uint8_t>();
  return {generator_blob_name(world_rank, device), std::vector<uint8_t>(bytes, bytes + state.numel())};
}

void restore_generator_state(const std::vector<uint8_t>& bytes, c10::Device device) {
  at::Generator generator = device_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  at::Tensor state = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  try {
    generator.set_state(state);
  } catch (const c10::Error& e) {
    throw Error(std::string("the checkpoint's generator state does not fit this build of libtorch: ") +
                e.what_without_backtrace());
  }
}

}  // namespace giant::train
