// Where this rank stands in the run: the mesh (with several ranks), its
// tensor-parallel group, and the small agreements a step needs across ranks.
#pragma once

#include <cstdint>
#include <memory>

#include "giant/parallel/layer_list.h"
#include "giant/parallel/mesh.h"

namespace giant::train {

struct RunTopology {
  std::unique_ptr<parallel::Mesh> mesh;  // with more than one rank; holds the world
  parallel::TensorParallelGroup tp;
  bool pipelined = false;  // parallel.pp > 1

  int dp_rank() const { return mesh ? mesh->dp_rank() : 0; }
  int pp_rank() const { return mesh ? mesh->pp_rank() : 0; }
  int world_rank() const { return mesh ? mesh->world().rank() : 0; }
  int64_t world_size() const { return mesh ? mesh->world().size() : 1; }

  // The mean over the data-parallel replicas (identical on every rank).
  double dp_mean(double value) const;
  // A value the last stage computed (`holds_loss`: this rank is on it), on
  // every stage (the others add zero: exact).
  double from_last_stage(double value, bool holds_loss) const;
  // The largest of the ranks' values: a signal some rank was asked to stop
  // by, the same on every rank (one small allreduce).
  int largest_on_any_rank(int value) const;
  // Whether `value` holds on every rank (one small allreduce).
  bool on_every_rank(bool value) const;
};

}  // namespace giant::train
