#include "giant/train/memory_use.h"

#include <algorithm>

#include "giant/base/units.h"

namespace giant::train {

void MemoryUse::take_max(const MemoryUse& o) {
  parameters = std::max(parameters, o.parameters);
  gradients = std::max(gradients, o.gradients);
  optimizer_state = std::max(optimizer_state, o.optimizer_state);
  activations = std::max(activations, o.activations);
  comm_buffers = std::max(comm_buffers, o.comm_buffers);
  max_rss = std::max(max_rss, o.max_rss);
}

std::string describe_memory(const MemoryUse& u) {
  auto bytes = [](int64_t value) { return format_bytes(static_cast<double>(value)); };
  return "parameters " + bytes(u.parameters) + ", gradients " + bytes(u.gradients) + ", optimizer state " +
         bytes(u.optimizer_state) + ", activations " + bytes(u.activations) + ", comm buffers " +
         bytes(u.comm_buffers) + "; total " + bytes(u.total()) + "; peak RSS " + bytes(u.max_rss);
}

}  // namespace giant::train
