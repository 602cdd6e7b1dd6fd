#include "giant/parallel/data_parallel/sharded_parameters.h"

#include <deque>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/parallel/data_parallel/accumulated_hook.h"
#include "giant/parallel/data_parallel/sharded_unit.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {
namespace {

// The stretches of each unit's parameters in this rank's block.
std::vector<UpdatePiece> owned_pieces(const std::vector<ShardedUnit>& units) {
  std::vector<UpdatePiece> pieces;
  for (const ShardedUnit& unit : units) {
    const int64_t mine_begin = unit.rank() * unit.block();
    std::vector<int64_t> offsets, elements;
    for (size_t k = 0; k < unit.parameters().size(); ++k) {
      offsets.push_back(unit.offset(k));
      elements.push_back(unit.parameters()[k].numel());
    }
    for (const BlockStretch& stretch : stretches_in_block(offsets, elements, mine_begin, unit.block())) {
      const int64_t length = stretch.end - stretch.begin;
      UpdatePiece piece;
      piece.tensor = unit.owned().narrow(0, stretch.begin - mine_begin, length);
      piece.tensor.mutable_grad() = unit.grad_shard().narrow(0, stretch.begin - mine_begin, length);
      piece.parameter = unit.indices()[stretch.member];
      piece.offset = stretch.begin - offsets[stretch.member];
      piece.whole = false;
      pieces.push_back(std::move(piece));
    }
  }
  return pieces;
}

}  // namespace

// The hooks' order of events decides the order of collectives on comm_,
// which ccl matches by issue order: every rank runs the same layers and the
// same autograd graph (the engine runs it in a deterministic order), so the
// gathers and reductions below are issued in the same order everywhere.
struct ShardedParameters::State {
  struct Reduction {  // a unit's flat gradient of one micro-batch, being reduce-scattered
    size_t unit;
    at::Tensor flat_grad;
    ccl::Work work;
  };
  struct Layer {
    std::vector<size_t> units;  // its own parameters' unit first, then tied weights it registers
  };

  ccl::Communicator& comm;
  ShardedParametersOptions options;
  double* wait_seconds;
  std::vector<LayerStack> chunks;
  std::vector<at::Tensor> parameters;
  std::vector<ShardedUnit> units;
  std::vector<bool> unit_alone;        // a tied weight: kept from its forward through its backward
  std::vector<Layer> layers;           // every chunk's, in order
  std::vector<size_t> first_layer_of;  // chunk -> its first position in layers
  std::vector<size_t> unit_of, position_in_unit;  // per parameter
  // Gradient assembly: the unit's flat gradient of the micro-batch, the
  // parameters in it, whether the shard holds this step's sum yet.
  std::vector<at::Tensor> flat_grads;
  std::vector<std::vector<bool>> in_flat;
  std::vector<size_t> ready;
  std::vector<bool> shard_has_step;
  std::deque<Reduction> in_flight;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> hook_keys;
  bool last_micro_batch = true;
  bool hold_all = false;
  HeldBytesReport held;

  State(ccl::Communicator& c, ShardedParametersOptions o, double* w) : comm(c), options(std::move(o)), wait_seconds(w) {}

  void account() {
    HeldBytes& now = held.now;
    now = {};
    for (const auto& u : units) {
      now.parameters += u.owned_bytes();
      if (u.residency() != ShardedUnit::Residency::freed) now.parameters += u.whole_bytes();
      now.gradients += u.grad_bytes();
    }
    for (const auto& g : flat_grads) {
      if (g.defined()) now.comm_buffers += g.numel() * static_cast<int64_t>(g.element_size());
    }
    for (const auto& r : in_flight) now.comm_buffers += r.flat_grad.numel() * static_cast<int64_t>(r.flat_grad.element_size());
    held.peak.parameters = std::max(held.peak.parameters, now.parameters);
    held.peak.gradients = std::max(held.peak.gradients, now.gradients);
    held.peak.comm_buffers = std::max(held.peak.comm_buffers, now.comm_buffers);
  }

  // Starts the gathers of the prefetch_layers layers after `position`
  // (before it, for backward), across chunks, clipped to the model.
  void prefetch(size_t position, bool forward) {
    for (int k = 1; k <= options.prefetch_layers; ++k) {
      const int64_t p = static_cast<int64_t>(position) + (forward ? k : -k);
      if (p < 0 || p >= static_cast<int64_t>(layers.size())) break;
      for (size_t u : layers[p].units) units[u].start_gather(comm);
    }
    account();
  }

  void wait_layer(size_t position) {
    Stopwatch watch;
    bool waited = false;
    for (size_t u : layers[position].units) waited = units[u].wait_gathered(comm) || waited;
    if (waited && wait_seconds != nullptr) *wait_seconds += watch.seconds();
  }

  void before_forward(size_t position) {
    wait_layer(position);
    prefetch(position, true);
  }

  void after_forward(size_t chunk, size_t position, const at::Tensor& output) {
    const bool training = at::GradMode::is_enabled();
    if (training && output.requires_grad()) {
      // Runs when the output's gradient arrives, before the layer's backward.
      output.register_hook([this, position](const at::Tensor&) { before_backward(position); });
    }
    if (hold_all) return;
    const bool chunk_ends = position + 1 == first_layer_of[chunk] + chunks[chunk]->size();
    if (!training) {
      // A tied weight may be read by a later layer of the chunk (the head).
      for (size_t u : layers[position].units) {
        if (!unit_alone[u]) units[u].release();
      }
      if (chunk_ends) {
        for (size_t p = first_layer_of[chunk]; p <= position; ++p) {
          for (size_t u : layers[p].units) units[u].release();
        }
      }
    } else if (options.regather_each_micro_batch) {
      for (size_t u : layers[position].units) {
        if (!unit_alone[u]) units[u].release();
      }
    }
    account();
  }

  void before_backward(size_t position) {
    wait_layer(position);
    prefetch(position, false);
  }

  void mark_ready(size_t parameter);
  void launch(size_t unit);
  void complete_front();
  void complete_finished();
};

void ShardedParameters::State::mark_ready(size_t parameter) {
  const size_t u = unit_of[parameter], k = position_in_unit[parameter];
  ShardedUnit& unit = units[u];
  at::Tensor& grad = parameters[parameter].mutable_grad();
  if (!grad.defined()) return;
  // A parameter seen twice before its unit completed (another parameter
  // of the unit got no gradient): the earlier micro-batch is reduced first.
  if (in_flat[u][k]) launch(u);
  at::NoGradGuard no_grad;
  if (!flat_grads[u].defined()) {
    flat_grads[u] = torch::zeros({unit.elements()}, unit.owned().options().dtype(unit.grad_dtype()));
  }
  flat_grads[u].narrow(0, unit.offset(k), grad.numel()).copy_(grad.reshape({-1}));
  grad.reset();
  in_flat[u][k] = true;
  if (++ready[u] == unit.parameters().size()) {
    launch(u);
    // The unit's backward is done: its parameters are not read again this
    // micro-batch (held through the step without regathering).
    if (!hold_all && (options.regather_each_micro_batch || last_micro_batch)) unit.release();
  }
  account();
}

void ShardedParameters::State::launch(size_t u) {
  if (!flat_grads[u].defined()) return;
  for (const auto& r : in_flight) {
    if (r.unit == u) {  // an earlier micro-batch's reduction folds into the shard first
      while (in_flight.front().unit != u) complete_front();
      complete_front();
      break;
    }
  }
  Reduction r{u, std::move(flat_grads[u]), {}};
  flat_grads[u] = at::Tensor();
  if (comm.size() > 1) r.work = reduce_scatter_blocks_async(r.flat_grad, comm, ccl::ReduceOp::avg);
  in_flight.push_back(std::move(r));
  ready[u] = 0;
  std::fill(in_flat[u].begin(), in_flat[u].end(), false);
  complete_finished();
}

// Folds the oldest reduction into its shard: copied for the step's first
// micro-batch, added for later ones, then its flat gradient is dropped.
void ShardedParameters::State::complete_front() {
  Reduction r = std::move(in_flight.front());
  in_flight.pop_front();
  r.work.wait();
  ShardedUnit& unit = units[r.unit];
  at::NoGradGuard no_grad;
  const at::Tensor mine = r.flat_grad.narrow(0, unit.rank() * unit.block(), unit.block());
  if (shard_has_step[r.unit]) {
    unit.grad_shard().add_(mine);
  } else {
    unit.grad_shard().copy_(mine);
    shard_has_step[r.unit] = true;
  }
}

void ShardedParameters::State::complete_finished() {
  while (!in_flight.empty() && in_flight.front().work.test()) complete_front();
}

ShardedParameters::ShardedParameters(std::vector<LayerStack>& chunks, std::vector<at::Tensor> parameters,
                                     ccl::Communicator& comm, ShardedParametersOptions options, double* wait_seconds)
    : state_(std::make_unique<State>(comm, std::move(options), wait_seconds)) {
  State& s = *state_;
  GIANT_CHECK(s.options.prefetch_layers >= 0, "parallel.zero3_prefetch must be at least 0, not ",
              s.options.prefetch_layers);
  s.chunks = chunks;
  s.parameters = std::move(parameters);
  const size_t n = s.parameters.size();
  std::vector<bool> is_alone(n);
  for (size_t i : s.options.alone) is_alone.at(i) = true;
  s.unit_of.resize(n);
  s.position_in_unit.resize(n);
  auto add_unit = [&](std::vector<size_t> indices, bool alone) {
    std::vector<at::Tensor> members;
    for (size_t i : indices) {
      s.unit_of[i] = s.units.size();
      s.position_in_unit[i] = members.size();
      members.push_back(s.parameters[i]);
    }
    const at::ScalarType grad_dtype = s.options.grad_dtype.value_or(members.front().scalar_type());
    s.in_flat.emplace_back(indices.size());
    s.units.emplace_back(std::move(members), std::move(indices), comm.rank(), comm.size(), grad_dtype);
    s.unit_alone.push_back(alone);
    return s.units.size() - 1;
  };
  size_t next = 0;
  for (LayerStack& chunk : s.chunks) {
    s.first_layer_of.push_back(s.layers.size());
    for (size_t l = 0; l < chunk->size(); ++l) {
      std::vector<size_t> own, alone;
      for (const auto& p : chunk->layer(l).ptr()->parameters()) {
        GIANT_CHECK(next < n && p.unsafeGetTensorImpl() == s.parameters[next].unsafeGetTensorImpl(), "layer ",
                    chunk->layer_name(l), "'s parameters are not numbered in layer order");
        (is_alone[next] ? alone : own).push_back(next);
        ++next;
      }
      State::Layer layer;
      if (!own.empty()) layer.units.push_back(add_unit(std::move(own), false));
      for (size_t i : alone) layer.units.push_back(add_unit({i}, true));
      s.layers.push_back(std::move(layer));
    }
  }
  GIANT_CHECK(next == n, "the layers hold ", next, " of ", n, " parameters");
  const size_t unit_count = s.units.size();
  s.flat_grads.resize(unit_count);
  s.ready.assign(unit_count, 0);
  s.shard_has_step.assign(unit_count, false);
  // The stretches of each parameter in this rank's block, for the optimizer.
  pieces_ = owned_pieces(s.units);
  for (size_t i = 0; i < n; ++i) {
    State* state = state_.get();
    AccumulatedHook hook = on_gradient_accumulated(s.parameters[i], i, [state, i] { state->mark_ready(i); });
    s.hook_keys.push_back(hook.key);
    s.accumulators.push_back(std::move(hook.accumulator));
  }
  for (size_t c = 0; c < s.chunks.size(); ++c) {
    State* state = state_.get();
    const size_t first = s.first_layer_of[c];
    s.chunks[c]->set_before_layer([state, first](size_t l) { state->before_forward(first + l); });
    s.chunks[c]->set_after_layer(
        [state, c, first](size_t l, const at::Tensor& output) { state->after_forward(c, first + l, output); });
  }
  s.account();
  s.held.peak = s.held.now;
}

ShardedParameters::~ShardedParameters() {
  State& s = *state_;
  for (auto& chunk : s.chunks) {
    chunk->set_before_layer({});
    chunk->set_after_layer({});
  }
  for (size_t i = 0; i < s.accumulators.size(); ++i) s.accumulators[i]->del_post_hook(s.hook_keys[i]);
  bool pending = !s.in_flight.empty();
  for (const auto& unit : s.units) pending = pending || unit.residency() == ShardedUnit::Residency::gathering;
  if (pending) {
    // The peers are told; our buffers must outlive the operations.
    s.comm.abort("ZeRO-3 parameters destroyed while a gather or reduction was in flight");
  }
  for (auto& r : s.in_flight) {
    try {
      r.work.wait();
    } catch (...) {
    }
  }
  for (auto& unit : s.units) {
    try {
      unit.release();
    } catch (...) {
    }
  }
}

void ShardedParameters::zero_grad() {
  State& s = *state_;
  GIANT_CHECK(s.in_flight.empty(), "zero_grad while a gradient reduction is in flight (call finish first)");
  for (auto& p : s.parameters) p.mutable_grad().reset();
  for (size_t u = 0; u < s.units.size(); ++u) {
    s.flat_grads[u] = at::Tensor();
    s.ready[u] = 0;
    std::fill(s.in_flat[u].begin(), s.in_flat[u].end(), false);
  }
  std::fill(s.shard_has_step.begin(), s.shard_has_step.end(), false);
  s.account();
}

void ShardedParameters::begin_micro_batch(bool last) { state_->last_micro_batch = last; }

double ShardedParameters::finish() {
  State& s = *state_;
  Stopwatch watch;
  // Units some of whose parameters got no gradient, in unit order (the
  // same on every rank).
  for (size_t u = 0; u < s.units.size(); ++u) s.launch(u);
  while (!s.in_flight.empty()) s.complete_front();
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < s.units.size(); ++u) {
    if (!s.shard_has_step[u]) s.units[u].grad_shard().zero_();
    s.shard_has_step[u] = true;
  }
  // The update writes the owned blocks: nothing gathered may outlive it.
  if (!s.hold_all) {
    for (auto& unit : s.units) unit.release();
  }
  s.account();
  return watch.seconds();
}

std::vector<at::Tensor> ShardedParameters::gradients() const {
  std::vector<at::Tensor> grads;
  for (const auto& piece : pieces_) grads.push_back(piece.tensor.grad());
  return grads;
}

const at::Tensor& ShardedParameters::grad_view(size_t) const {
  throw Error("at ZeRO stage 3 no whole gradient outlives its reduction (read update_pieces())");
}

double ShardedParameters::wait_parameters() {
  State& s = *state_;
  Stopwatch watch;
  bool waited = false;
  for (auto& unit : s.units) {
    if (unit.residency() == ShardedUnit::Residency::gathering) waited = unit.wait_gathered(s.comm) || waited;
  }
  return waited ? watch.seconds() : 0.0;
}

size_t ShardedParameters::num_buckets() const { return state_->units.size(); }

HeldBytesReport ShardedParameters::held_bytes() const { return state_->held; }

void ShardedParameters::reset_peaks() { state_->held.peak = state_->held.now; }

void ShardedParameters::gather_all() {
  State& s = *state_;
  for (auto& unit : s.units) unit.start_gather(s.comm);
  for (auto& unit : s.units) unit.wait_gathered(s.comm);
  s.hold_all = true;
  s.account();
}

void ShardedParameters::release_all() {
  State& s = *state_;
  s.hold_all = false;
  for (auto& unit : s.units) unit.release();
  s.account();
}

}  // namespace giant::parallel
