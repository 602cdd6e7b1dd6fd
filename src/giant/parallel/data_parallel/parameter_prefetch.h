// Sharded optimizer (ZeRO-1): the gather of a step's update runs behind the
// next forward, each layer waiting only for the buckets that hold its own
// parameters (and those gathered before them).
#pragma once

#include <vector>

#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/layer_list.h"

namespace giant::parallel {

// Hooks every layer of `chunks` (a rank's stages, in order) to wait for its
// parameters before it runs, adding the seconds waited to *wait_seconds.
// `parameters` are the reducer's, numbered chunk by chunk and layer by layer
// (checked: a programming error otherwise). The reducer and the counter
// must outlive the hooks.
void wait_for_parameters_layer_by_layer(GradientReducer& reducer, std::vector<LayerStack>& chunks,
                                        const std::vector<at::Tensor>& parameters, double* wait_seconds);

}  // namespace giant::parallel
