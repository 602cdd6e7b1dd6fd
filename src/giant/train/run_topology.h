// Where this rank stands in the run: the mesh (with several ranks), its
// tensor-parallel group, and the small agreements a step needs across ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "giant/parallel/layer_list.h"
#include "giant/parallel/mesh.h"
#include "giant/train/run_config.h"

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

// The mesh of `shape` over `world` (collective). Its axis groups' ccl
// chooses algorithms on the links of parallel.known_cluster where there is
// one and ccl.model.* were not set by hand, and `note` then says so (else
// it is left empty).
std::unique_ptr<parallel::Mesh> make_mesh(std::shared_ptr<ccl::Communicator> world, parallel::MeshShape shape,
                                          const ParallelSettings& parallel, std::string& note);

}  // namespace giant::train
