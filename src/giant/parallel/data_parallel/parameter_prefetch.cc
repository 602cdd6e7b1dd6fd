#include "giant/parallel/data_parallel/parameter_prefetch.h"

#include "giant/base/error.h"

namespace giant::parallel {

void wait_for_parameters_layer_by_layer(GradientReducer& reducer, std::vector<LayerStack>& chunks,
                                        const std::vector<at::Tensor>& parameters, double* wait_seconds) {
  int64_t through = -1;
  for (LayerStack& chunk : chunks) {
    std::vector<int64_t> layer_last_parameter;  // the last each layer needs (-1: none yet)
    for (size_t i = 0; i < chunk->size(); ++i) {
      for (const auto& p : chunk->layer(i).ptr()->parameters()) {
        ++through;
        GIANT_CHECK(through < static_cast<int64_t>(parameters.size()) &&
                        p.unsafeGetTensorImpl() == parameters[through].unsafeGetTensorImpl(),
                    "layer ", chunk->layer_name(i), "'s parameters are not numbered in layer order");
      }
      layer_last_parameter.push_back(through);
    }
    chunk->set_before_layer([&reducer, wait_seconds, last = std::move(layer_last_parameter)](size_t layer) {
      if (last[layer] >= 0) *wait_seconds += reducer.wait_parameters_through(static_cast<size_t>(last[layer]));
    });
  }
  GIANT_CHECK(through + 1 == static_cast<int64_t>(parameters.size()), "the layers hold ", through + 1, " of ",
              parameters.size(), " parameters");
}

}  // namespace giant::parallel
