#include "giant/parallel/mesh.h"

#include "giant/base/error.h"

namespace giant::parallel {

MeshShape mesh_shape_of(const Layout& layout) {
  GIANT_CHECK(layout.order == kTrainPlacement, "a mesh places ranks ", Layout{}.placement(), ", not ",
              layout.placement());
  return {layout.dp, layout.pp, layout.tp};
}

Mesh::Mesh(std::shared_ptr<ccl::Communicator> world, MeshShape shape, const ccl::CommConfig& group_config)
    : shape_(shape), world_(std::move(world)) {
  GIANT_CHECK(world_ != nullptr, "a mesh needs a world communicator");
  GIANT_CHECK(shape_.dp >= 1 && shape_.pp >= 1 && shape_.tp >= 1, "mesh axes must be at least 1, got dp ",
              shape_.dp, " pp ", shape_.pp, " tp ", shape_.tp);
  GIANT_CHECK(shape_.size() == world_->size(), "mesh dp x pp x tp = ", shape_.dp, " x ", shape_.pp, " x ",
              shape_.tp, " = ", shape_.size(), " ranks, but the world has ", world_->size());
  const int rank = world_->rank();
  const Coordinates mine = coordinates_of(shape_, rank);
  dp_rank_ = mine.dp;
  pp_rank_ = mine.pp;
  tp_rank_ = mine.tp;
  // Every rank splits in the same order (split is collective on the world).
  const auto& c = group_config;
  tp_ = world_->split(pp_rank_ * shape_.dp + dp_rank_, tp_rank_, c);
  dp_ = world_->split(pp_rank_ * shape_.tp + tp_rank_, dp_rank_, c);
  pp_ = world_->split(dp_rank_ * shape_.tp + tp_rank_, pp_rank_, c);
  dp_grads_ = world_->split(pp_rank_ * shape_.tp + tp_rank_, dp_rank_, c);
  if (shape_.pp > 1) {
    const bool holds = pp_rank_ == 0 || pp_rank_ == shape_.pp - 1;
    tied_embedding_ = world_->split(holds ? dp_rank_ * shape_.tp + tp_rank_ : -1, pp_rank_, c);
  }
}

void Mesh::abort(const std::string& reason) const {
  for (const auto& comm : {tied_embedding_, dp_grads_, tp_, dp_, pp_, world_}) {
    if (comm) comm->abort(reason);
  }
}

}  // namespace giant::parallel
