// Cutting a layer list into pipeline stages (parallel.partition), the
// methods veGiantModel offers. Torch-free: it works on each layer's type
// name and parameter count, so the planner and the trainer share it.
//
//   uniform           layers per stage as equal as they can be (the first
//                     stages take one more when they do not divide)
//   parameters        minimise the largest stage's parameter count
//   type:REGEX        minimise the largest number of layers whose type name
//                     matches REGEX (std::regex, ECMAScript, whole name) on
//                     one stage
//   manual:N0,N1,...  N_s layers on stage s (one count per stage)
//
// parameters and type: are exact (the minimum over every contiguous split,
// not a greedy one). Among the splits reaching it, each next rule keeps
// the best by (a sum of squares is smaller the more even the stages are):
//
//   parameters  the sum of squares of stage parameter counts; the sum of
//               squares of stage layer counts; the earlier stages taking
//               more layers (so all-zero parameters give uniform's split)
//   type:REGEX  the largest stage parameter count; the sums of squares of
//               matching counts, then of parameter counts, then of layer
//               counts; the earlier stages taking more layers
//
// So with a large embedding, `parameters` may give it a stage of its own
// and still spread the blocks evenly over the others, and type:GptBlock
// puts the embedding with the fewer blocks when they do not divide. No
// stage is ever empty. The embedding and the head count as layers (a head
// tied to the embedding has 0 parameters: the embedding counts them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace giant::planner {

struct PartitionLayer {
  std::string type_name;
  int64_t parameters = 0;
};

// The layers of stage s are [bounds[s], bounds[s + 1]); bounds has stages + 1
// entries, from 0 to the layer count.
using StageBounds = std::vector<size_t>;

// ConfigError naming `key` (parallel.partition, or parallel.pp when there
// are more stages than layers) for an unknown method, an empty or bad
// regex, a regex matching no layer, manual counts that are not positive
// integers or do not sum to the layer count or do not give one count per
// stage. stages < 1 or a negative parameter count is a caller's bug
// (giant::Error). Time O(layers^2 x stages), for the planner's few hundred
// layers and up to 64 stages.
StageBounds partition_layers(const std::vector<PartitionLayer>& layers, int stages, const std::string& method,
                             const std::string& key = "parallel.partition");

}  // namespace giant::planner
