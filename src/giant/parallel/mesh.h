// Ranks laid out as (dp, pp, tp), one communicator per axis.
//
// The order is kTrainPlacement (layout/layout.h): tensor parallelism
// fastest, so a tp group is made of neighbouring ranks (on one host under
// the usual launchers), and pipeline stages slowest:
// rank = (pp_rank * dp + dp_rank) * tp + tp_rank.
#pragma once

#include <memory>

#include "giant/ccl/communicator.h"
#include "giant/layout/layout.h"

namespace giant::parallel {

struct MeshShape {
  int dp = 1, pp = 1, tp = 1;
  int size() const { return dp * pp * tp; }
};

// The mesh of a layout placed as kTrainPlacement (GIANT_CHECK), the only
// placement a mesh has.
MeshShape mesh_shape_of(const Layout& layout);

class Mesh {
 public:
  // Collective over `world`, whose size must be shape.size(). Splits a
  // communicator per axis and a second data-parallel one for gradients,
  // which autograd hooks use while the main thread uses dp() (operations are
  // matched by issue order per communicator, so two threads need two).
  // The axes' communicators have `group_config` (the world's, or with the
  // cluster's links: see planner::with_cluster_links).
  Mesh(std::shared_ptr<ccl::Communicator> world, MeshShape shape, const ccl::CommConfig& group_config);

  const MeshShape& shape() const { return shape_; }
  int rank() const { return world_->rank(); }
  int dp_rank() const { return dp_rank_; }
  int pp_rank() const { return pp_rank_; }
  int tp_rank() const { return tp_rank_; }

  ccl::Communicator& world() const { return *world_; }
  ccl::Communicator& dp() const { return *dp_; }
  ccl::Communicator& pp() const { return *pp_; }
  ccl::Communicator& tp() const { return *tp_; }
  ccl::Communicator& dp_grads() const { return *dp_grads_; }
  // With pp > 1, on the first and the last stage: the two ranks of those
  // stages with this rank's (dp, tp) coordinates, which both hold the tied
  // embedding (pp rank 0 is rank 0 of it). Null elsewhere.
  ccl::Communicator* tied_embedding() const { return tied_embedding_.get(); }

  static int rank_of(const MeshShape& shape, int dp_rank, int pp_rank, int tp_rank) {
    return (pp_rank * shape.dp + dp_rank) * shape.tp + tp_rank;
  }
  // The inverse of rank_of, known before the mesh is built (no collective).
  struct Coordinates {
    int dp = 0, pp = 0, tp = 0;
  };
  static Coordinates coordinates_of(const MeshShape& shape, int rank) {
    return {rank / shape.tp % shape.dp, rank / (shape.tp * shape.dp), rank % shape.tp};
  }
  // Aborts every communicator (a failed step must not leave peers waiting).
  void abort(const std::string& reason) const;

 private:
  MeshShape shape_;
  int dp_rank_ = 0, pp_rank_ = 0, tp_rank_ = 0;
  std::shared_ptr<ccl::Communicator> world_, dp_, pp_, tp_, dp_grads_, tied_embedding_;
};

}  // namespace giant::parallel
