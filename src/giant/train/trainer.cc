#include "giant/train/trainer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/timer.h"
#include "giant/base/utf8.h"
#include "giant/ccl/communicator.h"
#include "giant/checkpoint/loader.h"
#include "giant/data/tokenizer.h"
#include "giant/models/gpt.h"
#include "giant/optim/adamw.h"
#include "giant/optim/clipping.h"
#include "giant/optim/loss_scaler.h"
#include "giant/optim/lr_schedule.h"
#include "giant/optim/master_weights.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/data_parallel/parameter_prefetch.h"
#include "giant/parallel/mesh.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/parallel/tensor_parallel/layers.h"
#include "giant/train/checkpoint_state.h"
#include "giant/train/generate.h"
#include "giant/train/local_executor.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/memory_check.h"
#include "giant/train/memory_meter.h"
#include "giant/train/metrics_log.h"
#include "giant/train/micro_batches.h"
#include "giant/train/pipeline_step.h"
#include "giant/train/precision_choice.h"
#include "giant/train/progress.h"
#include "giant/train/resume_check.h"
#include "giant/train/run_checkpoints.h"
#include "giant/train/run_report.h"
#include "giant/train/sharded_model.h"
#include "giant/train/stage_model.h"
#include "giant/train/step_guard.h"
#include "giant/train/tensorboard_log.h"

namespace giant::train {

void check_layout(const RunConfig& c, int world_size) {
  const auto& p = c.parallel;
  if (p.automatic) {
    throw ConfigError("parallel.auto", "the layout must be chosen first (choose_layout)");
  }
  if (p.dp * p.pp * p.tp != world_size) {
    throw ConfigError("parallel.dp", "parallel.dp x parallel.pp x parallel.tp = " + std::to_string(p.dp) + " x " +
                                         std::to_string(p.pp) + " x " + std::to_string(p.tp) + " = " +
                                         std::to_string(p.dp * p.pp * p.tp) + ", but " +
                                         std::to_string(world_size) + " rank(s) were started" +
                                         (world_size == 1 ? " (start several with giant launch)" : ""));
  }
  models::check_tensor_parallel(c.model, static_cast<int>(p.tp));
  pipeline_shape_of(c);                            // the schedule's rules
  partition_stages(c, models::gpt_layer_list(c.model));  // no stage empty
}


struct Trainer::State {
  RunConfig config;
  std::ostream null_stream{nullptr};  // what ranks other than 0 print to
  std::ostream& out;
  Progress progress;
  TrainHooks hooks;
  MemoryMeter memory;  // first: it counts what the rank allocates from here on
  bool leader = true;  // world rank 0: prints and writes files
  std::unique_ptr<parallel::Mesh> mesh;  // with more than one rank; holds the world
  parallel::TensorParallelGroup tp;
  CommClock clock;
  std::unique_ptr<parallel::GradientSync> reducer;  // ZeRO 0-2: a GradientReducer; 3: ShardedParameters
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::unique_ptr<MicroBatches> batches;
  StageModel model;
  std::vector<bool> is_shard;
  std::unique_ptr<StepExecutor> executor;
  PipelineStepExecutor* pipeline = nullptr;  // the executor, under pp
  std::unique_ptr<optim::AdamW> optimizer;
  // What the optimizer updates: the parameters, or with a sharded optimizer
  // the stretches of them this rank owns (and whether each is a tp shard,
  // and which parameter it comes from); with mixed precision, their fp32
  // masters.
  std::vector<at::Tensor> updated;
  std::vector<bool> updated_is_shard;
  std::vector<size_t> updated_source;
  // What the gradient norm counts: `updated` less the tied head copy.
  std::vector<at::Tensor> norm_tensors;
  std::vector<bool> norm_is_shard;
  std::unique_ptr<optim::MasterWeights> masters;  // mixed precision only
  std::optional<optim::LossScaler> loss_scaler;
  bool mixed_precision() const { return config.train.precision != Precision::fp32; }
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardLog> tensorboard;
  std::filesystem::path out_dir;
  std::unique_ptr<RunCheckpoints> checkpoints;
  // Resumed from a checkpoint: the steps it had done and its scalars.
  int64_t start_step = 0;
  std::filesystem::path resumed_from;
  std::optional<checkpoint::TrainState> resumed;
  // The generator state to put back just before the first step (what runs
  // before it, such as the matmul probe, draws from the generator too).
  std::optional<std::vector<uint8_t>> resumed_generator;
  MatrixRates rates;  // measured once at start-up: the precision choice's and MFU's

  State(RunConfig c, std::ostream& o, bool live, TrainHooks h, bool is_leader)
      : config(std::move(c)),
        out(is_leader ? o : null_stream),
        progress(out, live && is_leader),
        hooks(std::move(h)),
        leader(is_leader) {}

  int dp_rank() const { return mesh ? mesh->dp_rank() : 0; }
  int pp_rank() const { return mesh ? mesh->pp_rank() : 0; }
  bool pipelined() const { return config.parallel.pp > 1; }
  bool sharded() const { return reducer && reducer->shards_optimizer(); }
  int64_t world_size() const { return mesh ? mesh->world().size() : 1; }
  const std::vector<at::Tensor>& parameters() const { return model.parameters; }

  // The mean over the data-parallel replicas (identical on every rank).
  double dp_mean(double value) const {
    if (!mesh || mesh->shape().dp == 1) return value;
    at::Tensor t = torch::full({1}, value, torch::kDouble);
    parallel::allreduce_(t, mesh->dp(), ccl::ReduceOp::avg);
    return t.item<double>();
  }

  // A value the last stage computed, on every stage (the others add zero:
  // exact).
  double from_last_stage(double value) const {
    if (!pipelined()) return value;
    at::Tensor t = torch::full({1}, executor->holds_loss() ? value : 0.0, torch::kDouble);
    parallel::allreduce_(t, mesh->pp());
    return t.item<double>();
  }

  // The signal some rank was asked to stop by, the same on every rank (one
  // small allreduce each step, so that all of them stop after the same step).
  int agreed_stop_signal() const {
    const int mine = hooks.stop_signal ? hooks.stop_signal() : 0;
    if (!mesh) return mine;
    at::Tensor t = torch::full({1}, mine, torch::kInt);
    parallel::allreduce_(t, mesh->world(), ccl::ReduceOp::max);
    return t.item<int>();
  }

  // Whether `value` holds on every rank (one small allreduce): a gradient
  // that overflowed on one rank skips the step on all of them.
  bool on_every_rank(bool value) const {
    if (!mesh) return value;
    at::Tensor t = torch::full({1}, value ? 1 : 0, torch::kInt);
    parallel::allreduce_(t, mesh->world(), ccl::ReduceOp::min);
    return t.item<int>() == 1;
  }

  // Each parameter's gradient as the update reads it (valid after backward).
  std::vector<at::Tensor> gradients() const {
    std::vector<at::Tensor> grads;
    if (reducer && reducer->zero_stage() >= 2) {  // no whole gradient outlives its reduction
      for (const auto& owned : reducer->owned_parameters()) grads.push_back(owned.grad());
      return grads;
    }
    for (size_t i = 0; i < parameters().size(); ++i) {
      grads.push_back(reducer ? reducer->grad_view(i) : parameters()[i].grad());
    }
    return grads;
  }

  // Casts the model's parameters to the compute dtype (every module holding
  // one sees it) and returns their fp32 initial values, for the masters.
  std::vector<at::Tensor> convert_to_compute_dtype() {
    std::vector<at::Tensor> initial;
    torch::NoGradGuard no_grad;
    for (auto& p : model.parameters) {
      initial.push_back(p.detach().clone());
      p.set_data(p.detach().to(scalar_type_of(config.train.precision)));
    }
    return initial;
  }

  void open_outputs(const std::string& config_toml);
  void open_logs();  // after the resume decision: a resumed run keeps its curves
  HeldTensors held() const;
  checkpoint::Manifest manifest_at(int64_t steps_done, const StepGuard& guard, int64_t loss_scale_skips) const;
  void resume_from(const std::filesystem::path& checkpoint_dir);
  void save_checkpoint(int64_t steps_done, const StepGuard& guard, int64_t loss_scale_skips);
  void build_model();
  void build_reducer();
  void build_optimizer(std::vector<at::Tensor> initial);
  void build_executor();
  // The tied weight's gradient as this rank's update reads it.
  std::vector<at::Tensor> tied_gradients() const;

  // The update after backward, or the decision to skip it (the same on
  // every rank). Fills the report's gradient norm and `skipped`; true when
  // the step was skipped as a loss-scale overflow.
  bool update(int64_t step, double loss, double loss_scale, StepGuard& step_guard, StepReport& report);

  double evaluate() {
    executor->set_training(false);
    const double loss = from_last_stage(executor->evaluate(config.train.eval_batches));
    executor->set_training(true);
    return loss;
  }
  void describe_run(const TrainSummary& summary);  // the layout and model lines at the start
  std::string write_sample();                      // generates the sample; rank 0 writes sample.txt
};

Trainer::Trainer(RunConfig config, std::string config_toml, std::ostream& out, bool live_progress,
                 TrainHooks hooks, std::shared_ptr<ccl::Communicator> world, std::optional<MatrixRates> rates)
    : state_(std::make_unique<State>(std::move(config), out, live_progress, std::move(hooks),
                                     world == nullptr || world->rank() == 0)) {
  State& s = *state_;
  const RunConfig& c = s.config;
  check_layout(c, world ? world->size() : 1);
  check_precision_runs(c.train);
  const bool precision_auto = c.train.precision_auto;
  s.rates = rates ? *rates
                  : measure_matrix_rates(precisions_to_measure(c.train), static_cast<int>(c.train.threads), world.get());
  const std::string precision_line = resolve_precision(s.config, s.rates);
  if (precision_auto) s.progress.line(precision_line);
  check_memory_fits(s.config, world ? world->size() : 1);  // before anything is built
  s.tokenizer = data::make_tokenizer(c.data.tokenizer);
  if (s.tokenizer->vocab_size() > c.model.vocab) {
    throw ConfigError("model.vocab", "is " + std::to_string(c.model.vocab) + " but tokenizer '" +
                                         s.tokenizer->name() + "' has " +
                                         std::to_string(s.tokenizer->vocab_size()) + " tokens");
  }
  const parallel::MeshShape shape = parallel::mesh_shape_of(planner_layout(c));
  // The data is checked before the mesh's collective work starts.
  const int dp_rank = world ? parallel::Mesh::coordinates_of(shape, world->rank()).dp : 0;
  data::DatasetOptions data_options{c.data.path, c.data.paths, c.data.val_fraction, c.model.seq_len,
                                    static_cast<uint64_t>(c.train.seed), c.model.vocab};
  s.batches = std::make_unique<MicroBatches>(c, data::open_datasets(data_options, *s.tokenizer), dp_rank);
  s.open_outputs(config_toml);

  torch::set_num_threads(static_cast<int>(c.train.threads));
  if (!retain_freed_memory(static_cast<size_t>(c.train.retain_memory_mb) << 20)) {
    s.progress.warning("the C library refused train.retain_memory_mb; freed memory goes back to the kernel");
  }
  if (world && world->size() > 1) {
    s.mesh = std::make_unique<parallel::Mesh>(std::move(world), shape);
    if (c.parallel.tp > 1) {
      s.tp = {&s.mesh->tp(), s.mesh->tp_rank(), static_cast<int>(c.parallel.tp), &s.clock.tensor_parallel_s};
    }
  }
  s.build_model();
  std::vector<at::Tensor> initial;
  if (s.mixed_precision()) initial = s.convert_to_compute_dtype();
  s.build_reducer();
  s.build_optimizer(std::move(initial));
  s.memory.watch({s.reducer.get(), s.parameters(), s.optimizer.get(), s.masters.get()});
  s.build_executor();
  if (c.train.dynamic_loss_scaling()) {
    s.loss_scaler.emplace(optim::LossScalerOptions{c.train.loss_scale_initial, c.train.loss_scale_window,
                                                   c.train.loss_scale_hysteresis});
  }
  s.checkpoints = std::make_unique<RunCheckpoints>(s.config, s.mesh ? &s.mesh->world() : nullptr, s.progress);
  if (const auto chosen = s.checkpoints->choose_resume()) s.resume_from(*chosen);
  s.open_logs();
}

void Trainer::State::open_outputs(const std::string& config_toml) {
  out_dir = config.train.out_dir;
  if (!leader) return;
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    throw ConfigError("train.out_dir", "cannot create '" + config.train.out_dir + "': " + error.message());
  }
  std::ofstream saved(out_dir / "config.toml", std::ios::trunc);
  saved << config_toml;
  if (!saved) throw ConfigError("train.out_dir", "cannot write '" + (out_dir / "config.toml").string() + "'");
}

void Trainer::State::open_logs() {
  if (!leader) return;
  std::optional<int64_t> resumed_step;
  if (resumed) resumed_step = start_step;
  metrics = std::make_unique<MetricsLog>((out_dir / "metrics.jsonl").string(), resumed_step);
  if (config.train.tensorboard) {
    tensorboard = std::make_unique<TensorBoardLog>((out_dir / "tensorboard").string(), resumed_step);
  }
}

void Trainer::State::build_model() {
  // Drawn in fp32 whatever the precision: the masters start from the exact
  // initialisation, the same in every precision and layout.
  const parallel::LayerList layers = run_layer_list(config);
  model = build_stage_model(config, layers, pp_rank(), tp);
  for (const auto& name : model.names) is_shard.push_back(parallel::is_tensor_parallel_shard(name));
  if (pipelined()) {
    for (const auto& line : describe_stages(config, layers, model.bounds)) progress.line(line);
  }
}

void Trainer::State::build_reducer() {
  const RunConfig& c = config;
  const auto bucket_bytes = static_cast<int64_t>(c.parallel.bucket_mb * (1 << 20));
  const auto grad_dtype = scalar_type_of(c.train.grad_dtype);
  std::vector<size_t> alone;
  if (model.tied_index >= 0) alone.push_back(static_cast<size_t>(model.tied_index));
  if (mesh && c.parallel.dp > 1) {
    if (c.parallel.zero == 3) {
      reducer = build_sharded_parameters(c, model, mesh->dp_grads(), &clock.parameter_wait_s);
      return;
    }
    auto buckets = std::make_unique<parallel::GradientReducer>(model.parameters, mesh->dp_grads(), bucket_bytes,
                                                               static_cast<int>(c.parallel.zero), grad_dtype, alone);
    if (buckets->shards_optimizer()) {
      parallel::wait_for_parameters_layer_by_layer(*buckets, model.chunks, model.parameters,
                                                   &clock.parameter_wait_s);
    }
    reducer = std::move(buckets);
  } else if (mixed_precision()) {
    // One replica: the buckets only accumulate the micro-batches in grad_dtype.
    reducer = std::make_unique<parallel::GradientReducer>(model.parameters, bucket_bytes, grad_dtype);
  }
}

void Trainer::State::build_optimizer(std::vector<at::Tensor> initial) {
  const RunConfig& c = config;
  optim::AdamWOptions adam;
  adam.beta1 = c.train.beta1;
  adam.beta2 = c.train.beta2;
  adam.weight_decay = c.train.weight_decay;
  // What the update reads and writes in the compute dtype, with decay flags,
  // fp32 initial values and gradients for the masters.
  std::vector<at::Tensor> compute, compute_initial, compute_grads;
  std::vector<bool> decay;
  if (sharded()) {
    // Flat stretches: each takes its parameter's tp marking and decay.
    compute = reducer->owned_parameters();
    updated_source = reducer->owned_parameter_source();
    for (size_t j = 0; j < compute.size(); ++j) {
      const size_t source = updated_source[j];
      decay.push_back(optim::AdamW::decays(parameters()[source]));
      compute_grads.push_back(compute[j].grad());
      if (!initial.empty()) {
        compute_initial.push_back(
            initial[source].reshape({-1}).narrow(0, reducer->owned_parameter_offset()[j], compute[j].numel()));
      }
    }
  } else {
    compute = parameters();
    for (size_t i = 0; i < compute.size(); ++i) {
      updated_source.push_back(i);
      decay.push_back(optim::AdamW::decays(compute[i]));
      if (reducer) compute_grads.push_back(reducer->grad_view(i));
    }
    compute_initial = std::move(initial);
  }
  if (mixed_precision()) {
    masters = std::make_unique<optim::MasterWeights>(compute, compute_initial, compute_grads);
    updated = masters->masters();
  } else {
    updated = compute;
  }
  for (size_t j = 0; j < updated.size(); ++j) {
    const size_t source = updated_source[j];
    updated_is_shard.push_back(is_shard[source]);
    if (model.tied_copy && static_cast<int>(source) == model.tied_index) continue;
    norm_tensors.push_back(updated[j]);
    norm_is_shard.push_back(is_shard[source]);
  }
  optimizer = std::make_unique<optim::AdamW>(updated, decay, adam);
}

std::vector<at::Tensor> Trainer::State::tied_gradients() const {
  const auto tied = static_cast<size_t>(model.tied_index);
  if (!sharded()) return {reducer ? reducer->grad_view(tied) : parameters()[tied].grad()};
  std::vector<at::Tensor> stretches;  // its bucket is its own: the same elements on both holders
  for (size_t j = 0; j < reducer->owned_parameters().size(); ++j) {
    if (reducer->owned_parameter_source()[j] == tied) stretches.push_back(reducer->owned_parameters()[j].grad());
  }
  return stretches;
}

void Trainer::State::build_executor() {
  StepParts parts;
  parts.batches = batches.get();
  parts.tp = tp;
  parts.reducer = reducer.get();
  parts.parameters = parameters();
  parts.clock = &clock;
  if (!pipelined()) {
    executor = std::make_unique<LocalExecutor>(std::move(parts), model.chunks.front());
    return;
  }
  TiedGradients tied;
  if (model.tied_index >= 0) {
    tied.comm = mesh->tied_embedding();
    GIANT_CHECK(tied.comm != nullptr, "pp rank ", pp_rank(), " holds the tied embedding but is not in its group");
    tied.tensors = [this] { return tied_gradients(); };
  }
  auto pipeline_executor = std::make_unique<PipelineStepExecutor>(config, std::move(parts), mesh->pp(),
                                                                  model.stages, model.chunks, std::move(tied));
  pipeline = pipeline_executor.get();
  executor = std::move(pipeline_executor);
}

HeldTensors Trainer::State::held() const {
  HeldTensors h;
  h.parameters = parameters();
  h.names = model.names;
  for (const auto& chunk : model.chunks) {
    for (const auto& [name, split] : parallel::tensor_parallel_splits(*chunk)) h.splits[name] = split;
  }
  h.updated = updated;
  h.updated_source = updated_source;
  if (sharded()) h.updated_offset = reducer->owned_parameter_offset();
  if (reducer && reducer->zero_stage() == 3) h.owned_compute = reducer->owned_parameters();
  h.separate_masters = masters != nullptr;
  h.optimizer = optimizer.get();
  h.tp_rank = tp.rank;
  h.tp_size = tp.size;
  h.dp_rank = dp_rank();
  if (model.tied_copy) h.tied_copy = model.tied_index;
  return h;
}

checkpoint::Manifest Trainer::State::manifest_at(int64_t steps_done, const StepGuard& guard,
                                                 int64_t loss_scale_skips) const {
  checkpoint::Manifest m;
  m.model = config.model;
  m.tokenizer = config.data.tokenizer;
  m.run_keys = run_keys_of(config);
  m.step = steps_done;
  m.consumed_samples = batches->first_sample_of(steps_done);
  m.layout = checkpoints->layout();
  auto& t = m.train;
  t.optimizer_steps = optimizer->steps_taken();
  if (loss_scaler) {
    const auto state = loss_scaler->state();
    t.loss_scaling = true;
    t.loss_scale = state.scale;
    t.loss_scale_good_steps = state.good_steps;
    t.loss_scale_hysteresis_left = state.hysteresis_left;
    t.loss_scale_overflows = state.overflows;
  }
  t.bad_steps_in_a_row = guard.bad_in_a_row();
  t.skipped_steps = guard.skipped_total();
  t.loss_scale_skips = loss_scale_skips;
  return m;
}

void Trainer::State::save_checkpoint(int64_t steps_done, const StepGuard& guard, int64_t loss_scale_skips) {
  if (reducer) reducer->wait_parameters();  // a ZeRO gather in flight writes the parameters
  const int world_rank = mesh ? mesh->world().rank() : 0;
  checkpoints->save(manifest_at(steps_done, guard, loss_scale_skips), slices_to_save(held()),
                    {generator_state_blob(world_rank)});
}

void Trainer::State::resume_from(const std::filesystem::path& checkpoint_dir) {
  Stopwatch load_watch;
  const checkpoint::CheckpointLoader loader(checkpoint_dir);
  const checkpoint::Manifest& m = loader.manifest();
  const std::vector<std::string> changes = resume_notes(checkpoint_dir, m, config);  // or refused
  const bool optimizer_state = m.has_optimizer_state();
  loader.load(slices_to_load(held(), optimizer_state));
  start_step = m.step;
  resumed_from = checkpoint_dir;
  batches->continue_from(m.step, m.consumed_samples);
  resumed = m.train;
  std::string notes;
  if (optimizer_state) {
    optimizer->restore_steps_taken(m.train.optimizer_steps);
  } else {
    notes += "; weights only: the optimizer starts afresh";
  }
  if (loss_scaler && m.train.loss_scaling) {
    loss_scaler->restore({m.train.loss_scale, m.train.loss_scale_good_steps, m.train.loss_scale_hysteresis_left,
                          m.train.loss_scale_overflows});
  }
  const checkpoint::SavedLayout layout = checkpoints->layout();
  const int world_rank = mesh ? mesh->world().rank() : 0;
  const auto generator = loader.read_blob("rng/" + std::to_string(world_rank));
  if (m.layout == layout && generator) {
    resumed_generator = generator;
  } else if (config.model.dropout > 0) {
    notes += "; saved in another layout: dropout draws new masks";
  }
  progress.line("resuming from " + checkpoint_dir.string() + " at step " + std::to_string(m.step) + " (saved at dp " +
                std::to_string(m.layout.dp) + " x pp " + std::to_string(m.layout.pp) + " x tp " +
                std::to_string(m.layout.tp) + ", ZeRO " + std::to_string(m.layout.zero) + ", " + m.layout.precision +
                notes + "; loaded in " + fixed(load_watch.seconds(), 2) + " s)");
  for (const auto& line : changes) progress.line(line);
}

Trainer::~Trainer() = default;

std::vector<at::Tensor> Trainer::parameters() const { return state_->parameters(); }
std::vector<std::string> Trainer::parameter_names() const { return state_->model.names; }
std::vector<at::Tensor> Trainer::whole_parameters() const {
  const WholeParameters whole(state_->reducer.get());
  std::vector<at::Tensor> copies;
  for (const auto& p : state_->parameters()) copies.push_back(p.detach().clone());
  return copies;
}
const optim::AdamW& Trainer::optimizer() const { return *state_->optimizer; }
std::vector<at::Tensor> Trainer::updated_tensors() const { return state_->updated; }

bool Trainer::State::update(int64_t step, double loss, double loss_scale, StepGuard& step_guard,
                            StepReport& report) {
  RECORD_USER_SCOPE("giant::optimizer");
  const bool shards = sharded();
  optim::GradNormGroups groups;
  if (mesh) {
    groups.tensor_parallel = &mesh->tp();
    if (shards) groups.partition = &mesh->dp_grads();
    if (pipelined()) groups.pipeline = &mesh->pp();
  }
  report.grad_norm = optim::global_grad_norm(norm_tensors, norm_is_shard, groups) / loss_scale;
  const bool finite = on_every_rank(std::isfinite(loss) && std::isfinite(report.grad_norm));
  // With loss scaling, gradients that overflowed (from a finite loss) lower the scale.
  const bool overflowed = loss_scaler && std::isfinite(loss) && !finite;
  const bool applied = !overflowed && step_guard.accept(step + 1, finite, loss, report.grad_norm);
  if (loss_scaler) loss_scaler->update(overflowed);
  report.skipped = !applied;
  if (!applied) return overflowed;
  // Unscaling and clipping inside the update's own pass over the gradients.
  optimizer->step(report.lr, optim::clip_coefficient(report.grad_norm, config.train.grad_clip) / loss_scale);
  if (masters) masters->copy_to_compute();
  if (shards) reducer->gather_parameters_async();  // waited for by the next forward
  return false;
}

void Trainer::State::describe_run(const TrainSummary& summary) {
  const auto& t = config.train;
  const auto& p = config.parallel;
  std::string pipeline;
  if (pipelined()) {
    pipeline = " x pp " + std::to_string(p.pp) + " (" + p.schedule +
               (p.virtual_stages > 1 ? ", " + std::to_string(p.virtual_stages) + " virtual stages" : "") + ")";
  }
  progress.line("layout: dp " + std::to_string(p.dp) + pipeline + " x tp " + std::to_string(p.tp) + " on " +
                std::to_string(world_size()) + " rank(s), " + std::to_string(batches->per_step()) +
                " micro-batch(es) of " + std::to_string(t.micro_batch) + " per rank per step" +
                (reducer ? ", " + std::to_string(reducer->num_buckets()) + " gradient bucket(s)" : ""));
  progress.line("model: " + std::to_string(config.model.parameter_count()) + " parameters, " +
                fixed(summary.model_flops_per_step / 1e9, 1) + " GFLOP per step; matmul reference " +
                fixed(summary.matmul_flops / 1e9, 1) + " GFLOP/s in " + summary.precision + " on " +
                std::to_string(t.threads) + " thread(s); data: " + batches->datasets().description);
}

std::string Trainer::State::write_sample() {
  const auto& t = config.train;
  SampleOptions options;
  options.prompt = t.sample_prompt;
  options.tokens = t.sample_tokens;
  options.temperature = t.sample_temperature;
  options.vocab = config.model.vocab;
  options.seq_len = config.model.seq_len;
  options.seed = static_cast<uint64_t>(t.seed);
  const WholeParameters whole(reducer.get());  // generation reads them outside the layers' forward
  executor->set_training(false);
  // Without a pipeline this rank holds the whole model (its tp shard of
  // it): a key-value cache; a pipeline runs the whole window each token.
  const ContextLogits logits =
      pipeline ? windowed_logits(pipeline->next_logits(config.model.padded_vocab()), config.model.seq_len)
               : cached_model_logits(model.chunks.front(), tp);
  // A byte-level model samples any bytes: the text everyone sees is valid
  // UTF-8 without terminal controls (the console, sample.txt, metrics.jsonl).
  std::string sample = printable_utf8(generate(logits, *tokenizer, options).text);
  executor->set_training(true);
  if (leader) std::ofstream(out_dir / "sample.txt", std::ios::trunc) << sample << '\n';
  return sample;
}

TrainSummary Trainer::run() {
  State& s = *state_;
  const RunConfig& c = s.config;
  const auto& t = c.train;
  const optim::LrSchedule schedule{t.lr, t.min_lr, t.warmup_steps, t.steps};
  StepGuard step_guard(t.max_bad_steps);
  int64_t loss_scale_skips = 0;
  if (s.resumed) {
    step_guard.restore(s.resumed->bad_steps_in_a_row, s.resumed->skipped_steps);
    loss_scale_skips = s.resumed->loss_scale_skips;
  }

  TrainSummary summary;
  summary.precision = precision_name(t.precision);
  summary.matmul_flops = s.rates.of(t.precision);
  summary.model_flops_per_step = c.model.train_flops_per_sequence() * static_cast<double>(t.global_batch);
  const double tokens_per_step = static_cast<double>(t.global_batch * c.model.seq_len);
  s.describe_run(summary);
  RunReporter reporter(s.progress, s.metrics.get(), s.tensorboard.get(), t.steps);

  // MFU: model FLOPs per second per rank against one rank's rate.
  const double rank_flops_per_step = summary.model_flops_per_step / static_cast<double>(s.world_size());
  std::unique_ptr<torch::autograd::profiler::RecordProfile> trace;
  if (t.trace && t.trace_steps > 0 && s.leader) {
    trace = std::make_unique<torch::autograd::profiler::RecordProfile>((s.out_dir / "trace.json").string());
  }
  Stopwatch run_watch;
  s.memory.bind_this_thread();
  s.executor->set_training(true);
  if (s.resumed_generator) {
    restore_generator_state(*s.resumed_generator);
  } else {
    // What dropout draws from, seeded by the run (start-up probes drew from it too).
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_current_seed(static_cast<uint64_t>(t.seed));
  }
  for (int64_t step = s.start_step; step < t.steps; ++step) {
    Stopwatch step_watch;
    StepReport report;
    report.step = step + 1;
    report.total_steps = t.steps;
    report.lr = schedule.at(step);
    report.loss_scale = s.loss_scaler ? s.loss_scaler->scale() : 0.0;
    const double loss_scale = s.loss_scaler ? report.loss_scale : 1.0;
    report.checkpoint_writing = s.checkpoints->in_flight();
    s.memory.begin_step();
    const StepLoss accumulated = s.executor->train_step(step, loss_scale, report);
    if (s.hooks.after_backward) s.hooks.after_backward(step, s.gradients());

    Stopwatch optimizer_watch;
    report.loss = s.from_last_stage(s.dp_mean(accumulated.loss));
    const bool overflowed = s.update(step, report.loss, loss_scale, step_guard, report);
    if (overflowed) ++loss_scale_skips;
    report.optimizer_s = optimizer_watch.seconds();
    report.memory = s.memory.end_step();
    report.step_s = step_watch.seconds();
    if (trace && step + 1 == t.trace_steps) {
      trace.reset();  // writes the file
      s.progress.line("trace of the first " + std::to_string(t.trace_steps) + " steps: " +
                      (s.out_dir / "trace.json").string());
    }
    report.tokens_per_s = tokens_per_step / report.step_s;
    report.mfu = rank_flops_per_step / report.step_s / summary.matmul_flops;
    report.elapsed_s = run_watch.seconds();
    reporter.step(report, accumulated.comm_wait_s, overflowed, s.loss_scaler ? s.loss_scaler->scale() : 0.0);

    if (step + 1 == t.steps || (t.eval_every > 0 && (step + 1) % t.eval_every == 0)) {
      summary.val_loss = s.evaluate();
      reporter.evaluation(step + 1, report.loss, summary.val_loss, run_watch.seconds());
    }
    const bool saved = s.checkpoints->due(step + 1);
    if (saved) {
      s.save_checkpoint(step + 1, step_guard, loss_scale_skips);
    } else {
      s.checkpoints->poll();
    }
    summary.last_step = step + 1;
    if (step + 1 < t.steps && (summary.stop_signal = s.agreed_stop_signal()) != 0) {
      s.progress.line("stopping after step " + std::to_string(step + 1) + " (asked by signal " +
                      std::to_string(summary.stop_signal) + "); saving a checkpoint to resume from");
      if (!saved) s.save_checkpoint(step + 1, step_guard, loss_scale_skips);
      break;
    }
  }
  if (s.start_step == t.steps) {
    summary.last_step = t.steps;
    s.progress.line(nothing_left_to_train(s.resumed_from, t.steps));
    summary.val_loss = s.evaluate();
    // Its state is saved in checkpoint.dir unless it came from there: a
    // checkpoint loaded into this layout and saved again.
    namespace fs = std::filesystem;
    if (fs::weakly_canonical(s.resumed_from.parent_path()) != fs::weakly_canonical(c.checkpoint.dir)) {
      s.save_checkpoint(t.steps, step_guard, loss_scale_skips);
    }
  }
  s.checkpoints->finish();
  if (s.reducer) s.reducer->wait_parameters();
  trace.reset();
  s.progress.finish();
  summary.steps = summary.last_step - s.start_step;
  summary.skipped_steps = step_guard.skipped_total() + loss_scale_skips;
  if (s.loss_scaler) summary.final_loss_scale = s.loss_scaler->scale();
  reporter.fill(summary);
  summary.seconds = run_watch.seconds();

  if (t.sample_tokens > 0 && summary.stop_signal == 0) summary.sample = s.write_sample();
  if (s.metrics) s.metrics->summary(summary);
  return summary;
}

}  // namespace giant::train
