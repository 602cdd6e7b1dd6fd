// ModelSpec and ClusterSpec to and from TOML. A model file is a trainer
// config ([model] keys plus train.global_batch), so `giant plan --model
// run.toml` plans the run that config describes. Unknown keys in the tables
// the planner reads are errors naming the key.
#pragma once

#include <string>

#include "giant/planner/cluster_spec.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

ModelSpec parse_model_toml(const std::string& text, const std::string& source = "model");
ModelSpec load_model_toml(const std::string& path);
std::string model_to_toml(const ModelSpec& model);

ClusterSpec parse_cluster_toml(const std::string& text, const std::string& source = "cluster");
ClusterSpec load_cluster_toml(const std::string& path);
std::string cluster_to_toml(const ClusterSpec& cluster);

// A preset name, or a path to a TOML file (anything with '/' or ending .toml).
ModelSpec model_from_argument(const std::string& name_or_path);
ClusterSpec cluster_from_argument(const std::string& name_or_path);

}  // namespace giant::planner
