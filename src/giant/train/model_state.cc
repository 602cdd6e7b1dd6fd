#include "giant/train/model_state.h"

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/units.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/data_parallel/parameter_prefetch.h"
#include "giant/parallel/tensor_parallel/layers.h"
#include "giant/train/precision_choice.h"
#include "giant/train/run_device.h"
#include "giant/train/run_report.h"
#include "giant/train/sharded_model.h"

namespace giant::train {
namespace {

bool mixed_precision(const RunConfig& c) { return c.train.precision != Precision::fp32; }

// Casts the model's parameters to the compute dtype (every module holding
// one sees it) and returns their fp32 initial values, for the masters.
std::vector<at::Tensor> convert_to_compute_dtype(std::vector<at::Tensor>& parameters, Precision precision) {
  std::vector<at::Tensor> initial;
  torch::NoGradGuard no_grad;
  for (auto& p : parameters) {
    initial.push_back(p.detach().clone());
    p.set_data(p.detach().to(scalar_type_of(precision)));
  }
  return initial;
}

// The wire for data-parallel gradients between hosts, when
// parallel.grad_wire asks for one and the dp group spans hosts (otherwise
// the key is a no-op, said here): an elementwise codec's allreduce, or the
// rank of a low-rank (PowerSGD) wire.
struct GradWireParts {
  std::shared_ptr<ccl::HostCompressedAllreduce> compressed;
  int low_rank = 0;
};

GradWireParts make_grad_wire(const RunConfig& c, ccl::Communicator* dp_comm, Progress& progress) {
  const ccl::GradWire wire = c.layout.grad_wire;
  if (wire == ccl::GradWire::none) return {};
  const std::string setting = std::string("parallel.grad_wire = ") + ccl::grad_wire_name(wire);
  if (dp_comm == nullptr || dp_comm->topology().num_hosts() == 1) {
    progress.line(setting + ": no data-parallel gradient crosses hosts here, so nothing is compressed");
    return {};
  }
  if (!run_device(c.train).is_cpu()) {
    throw ConfigError("parallel.grad_wire", "compresses gradients in host memory, and this run's are on " +
                                                c.train.device + "; use none there");
  }
  if (ccl::low_rank_of(wire) > 0) {
    progress.line(setting + ": data-parallel gradients cross hosts compressed (each matrix's average as a rank-" +
                  std::to_string(ccl::low_rank_of(wire)) + " approximation, error feedback kept per rank)");
    return {nullptr, ccl::low_rank_of(wire)};
  }
  progress.line(setting + ": data-parallel gradients cross hosts compressed (" + fixed(ccl::grad_wire_ratio(wire), 1) +
                "x fewer bytes, error feedback kept per rank), inside a host in fp32");
  return {std::make_shared<ccl::HostCompressedAllreduce>(*dp_comm, wire), 0};
}

std::unique_ptr<parallel::GradientSync> make_gradient_sync(const RunConfig& c, StageModel& model,
                                                           const RunTopology& topology, CommClock& clock,
                                                           Progress& progress) {
  const auto bucket_bytes = static_cast<int64_t>(c.parallel.bucket_mb * (1 << 20));
  const auto grad_dtype = scalar_type_of(c.train.grad_dtype);
  std::vector<size_t> alone;
  if (model.tied_index >= 0) alone.push_back(static_cast<size_t>(model.tied_index));
  const bool replicas = topology.mesh && c.layout.dp > 1;
  auto wire = make_grad_wire(c, replicas ? &topology.mesh->dp_grads() : nullptr, progress);
  if (replicas) {
    ccl::Communicator& comm = topology.mesh->dp_grads();
    if (c.layout.zero == 3) return build_sharded_parameters(c, model, comm, &clock.parameter_wait_s);
    auto buckets = std::make_unique<parallel::GradientReducer>(
        model.parameters, comm, bucket_bytes, c.layout.zero, grad_dtype, alone, std::move(wire.compressed),
        wire.low_rank);
    if (buckets->shards_optimizer()) {
      parallel::wait_for_parameters_layer_by_layer(*buckets, model.chunks, model.parameters,
                                                   &clock.parameter_wait_s);
    }
    return buckets;
  }
  if (mixed_precision(c)) {
    // One replica: the buckets only accumulate the micro-batches in grad_dtype.
    return std::make_unique<parallel::GradientReducer>(model.parameters, bucket_bytes, grad_dtype);
  }
  return nullptr;
}

// The optimizer over the pieces the engine hands it (with mixed precision,
// over their fp32 masters, started from `initial`).
void build_optimizer(ModelState& s, const RunConfig& c, const std::vector<at::Tensor>& initial) {
  optim::AdamWOptions adam;
  adam.beta1 = c.train.beta1;
  adam.beta2 = c.train.beta2;
  adam.weight_decay = c.train.weight_decay;
  s.pieces = s.sync ? s.sync->update_pieces() : parallel::whole_pieces(s.parameters());
  // Each piece takes its parameter's decay, tp marking and initial value.
  std::vector<at::Tensor> compute, compute_initial, compute_grads;
  std::vector<bool> decay;
  for (const auto& piece : s.pieces) {
    compute.push_back(piece.tensor);
    decay.push_back(optim::AdamW::decays(s.parameters()[piece.parameter]));
    if (s.sync) compute_grads.push_back(piece.current_gradient());
    if (!initial.empty()) compute_initial.push_back(piece.piece_of(initial[piece.parameter]));
  }
  if (mixed_precision(c)) {
    s.masters = std::make_unique<optim::MasterWeights>(compute, compute_initial, compute_grads);
    s.updated = s.masters->masters();
  } else {
    s.updated = compute;
  }
  for (size_t j = 0; j < s.updated.size(); ++j) {
    const size_t source = s.pieces[j].parameter;
    if (s.model.tied_copy && static_cast<int>(source) == s.model.tied_index) continue;
    s.norm.tensors.push_back(s.updated[j]);
    s.norm.is_shard.push_back(s.is_shard[source]);
  }
  s.optimizer = std::make_unique<optim::AdamW>(s.updated, decay, adam);
}

}  // namespace

std::unique_ptr<ModelState> build_model_state(const RunConfig& config, const RunTopology& topology, CommClock& clock,
                                              Progress& progress) {
  auto s = std::make_unique<ModelState>();
  // Drawn in fp32 whatever the precision: the masters start from the exact
  // initialisation, the same in every precision and layout.
  const parallel::LayerList layers = run_layer_list(config);
  s->model = build_stage_model(config, layers, topology.pp_rank(), topology.tp, run_device(config.train));
  for (const auto& name : s->model.names) s->is_shard.push_back(parallel::is_tensor_parallel_shard(name));
  if (topology.pipelined) {
    for (const auto& line : describe_stages(config, layers, s->model.bounds)) progress.line(line);
  }
  std::vector<at::Tensor> initial;
  if (mixed_precision(config)) {
    initial = convert_to_compute_dtype(s->model.parameters, config.train.precision);
  }
  s->sync = make_gradient_sync(config, s->model, topology, clock, progress);
  build_optimizer(*s, config, initial);
  const auto& t = config.train;
  if (t.dynamic_loss_scaling()) {
    s->loss_scaler.emplace(optim::LossScalerOptions{t.loss_scale_initial, t.loss_scale_window,
                                                    t.loss_scale_hysteresis});
  }
  return s;
}

std::vector<at::Tensor> ModelState::gradients() const {
  if (sync) return sync->gradients();
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters()) grads.push_back(p.grad());
  return grads;
}

std::vector<at::Tensor> ModelState::tied_gradients() const {
  std::vector<at::Tensor> grads;  // sharded, its bucket is its own: the same elements on both holders
  for (const auto& piece : pieces) {
    if (static_cast<int>(piece.parameter) == model.tied_index) grads.push_back(piece.current_gradient());
  }
  return grads;
}

}  // namespace giant::train
