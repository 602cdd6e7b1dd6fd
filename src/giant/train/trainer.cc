#include "giant/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/timer.h"
#include "giant/base/utf8.h"
#include "giant/ccl/communicator.h"
#include "giant/data/corpus.h"
#include "giant/data/sampler.h"
#include "giant/data/tokenizer.h"
#include "giant/models/gpt.h"
#include "giant/optim/adamw.h"
#include "giant/optim/clipping.h"
#include "giant/optim/loss_scaler.h"
#include "giant/optim/lr_schedule.h"
#include "giant/optim/master_weights.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/mesh.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/parallel/tensor_parallel/layers.h"
#include "giant/train/generate.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/metrics_log.h"
#include "giant/train/precision_choice.h"
#include "giant/train/progress.h"
#include "giant/train/step_guard.h"
#include "giant/train/tensorboard_log.h"

namespace giant::train {
namespace {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// Validation draws from its own order, so it never depends on training length.
constexpr uint64_t kValidationSeedOffset = 0x5eed0001;

}  // namespace

void check_layout(const RunConfig& c, int world_size) {
  const auto& p = c.parallel;
  if (p.automatic) {
    throw ConfigError("parallel.auto", "the layout must be chosen first (choose_layout)");
  }
  if (p.pp > 1) {
    throw ConfigError("parallel.pp", "pipeline parallelism is not available yet (parallel.pp must be 1)");
  }
  if (p.dp * p.pp * p.tp != world_size) {
    throw ConfigError("parallel.dp", "parallel.dp x parallel.pp x parallel.tp = " + std::to_string(p.dp) + " x " +
                                         std::to_string(p.pp) + " x " + std::to_string(p.tp) + " = " +
                                         std::to_string(p.dp * p.pp * p.tp) + ", but " +
                                         std::to_string(world_size) + " rank(s) were started" +
                                         (world_size == 1 ? " (start several with giant launch)" : ""));
  }
  models::check_tensor_parallel(c.model, static_cast<int>(p.tp));
}

struct Trainer::State {
  RunConfig config;
  std::ostream null_stream{nullptr};  // what ranks other than 0 print to
  std::ostream& out;
  Progress progress;
  TrainHooks hooks;
  bool leader = true;  // world rank 0: prints and writes files
  std::unique_ptr<parallel::Mesh> mesh;  // with more than one rank; holds the world
  parallel::TensorParallelGroup tp;
  double tp_comm_seconds = 0;  // accumulated by the tensor-parallel layers
  std::unique_ptr<parallel::GradientReducer> reducer;
  double parameter_wait_seconds = 0;  // sharded optimizer: forward's wait for the gather
  std::vector<std::string> parameter_names;
  std::vector<bool> is_shard;
  std::unique_ptr<data::Tokenizer> tokenizer;
  data::TokenCorpus corpus;
  std::optional<data::SequenceSampler> train_sampler, val_sampler;
  parallel::LayerStack model{nullptr};
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<optim::AdamW> optimizer;
  // What the optimizer updates: the parameters, or with a sharded optimizer
  // the stretches of them this rank owns (and whether each is a tp shard);
  // with mixed precision, their fp32 masters.
  std::vector<at::Tensor> updated;
  std::vector<bool> updated_is_shard;
  std::unique_ptr<optim::MasterWeights> masters;  // mixed precision only
  std::optional<optim::LossScaler> loss_scaler;
  bool mixed_precision() const { return config.train.precision != Precision::fp32; }
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardLog> tensorboard;
  std::filesystem::path out_dir;

  State(RunConfig c, std::ostream& o, bool live, TrainHooks h, bool is_leader)
      : config(std::move(c)),
        out(is_leader ? o : null_stream),
        progress(out, live && is_leader),
        hooks(std::move(h)),
        leader(is_leader) {}

  int dp_rank() const { return mesh ? mesh->dp_rank() : 0; }
  bool sharded() const { return reducer && reducer->shards_optimizer(); }
  int64_t world_size() const { return mesh ? mesh->world().size() : 1; }

  // The mean over the data-parallel replicas (identical on every rank).
  double dp_mean(double value) const {
    if (!mesh || mesh->shape().dp == 1) return value;
    at::Tensor t = torch::full({1}, value, torch::kDouble);
    parallel::allreduce_(t, mesh->dp(), ccl::ReduceOp::avg);
    return t.item<double>();
  }

  // Whether `value` holds on every rank (one small allreduce): a gradient
  // that overflowed on one rank skips the step on all of them.
  bool on_every_rank(bool value) const {
    if (!mesh) return value;
    at::Tensor t = torch::full({1}, value ? 1 : 0, torch::kInt);
    parallel::allreduce_(t, mesh->world(), ccl::ReduceOp::min);
    return t.item<int>() == 1;
  }

  // train.precision = auto is probed on each rank: they must agree.
  void require_one_precision() const {
    if (!mesh) return;
    at::Tensor t = torch::full({2}, static_cast<int>(config.train.precision), torch::kInt);
    t[1].neg_();
    parallel::allreduce_(t, mesh->world(), ccl::ReduceOp::max);
    if (t[0].item<int>() != -t[1].item<int>()) {
      throw ConfigError("train.precision", "the ranks chose different precisions for auto (their matrix product "
                                           "rates differ); set train.precision to fp32 or bf16");
    }
  }

  // Each parameter's gradient as the update reads it (valid after backward).
  std::vector<at::Tensor> gradients() const {
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < parameters.size(); ++i) {
      grads.push_back(reducer ? reducer->grad_view(i) : parameters[i].grad());
    }
    return grads;
  }

  // Casts the model's parameters to the compute dtype (every module holding
  // one sees it) and returns their fp32 initial values, for the masters.
  std::vector<at::Tensor> convert_to_compute_dtype() {
    std::vector<at::Tensor> initial;
    torch::NoGradGuard no_grad;
    for (auto& p : parameters) {
      initial.push_back(p.detach().clone());
      p.set_data(p.detach().to(scalar_type_of(config.train.precision)));
    }
    return initial;
  }

  void build_optimizer(std::vector<at::Tensor> initial);

  // Forward and backward over the step's micro-batches: fills the report's
  // phase times and returns this rank's mean loss and its communication wait.
  struct Accumulated {
    double loss = 0, comm_wait_s = 0;
  };
  Accumulated accumulate_gradients(int64_t step, double loss_scale, StepReport& report);

  // The update after backward, or the decision to skip it (the same on
  // every rank). Fills the report's gradient norm and `skipped`; true when
  // the step was skipped as a loss-scale overflow.
  bool update(int64_t step, double loss, double loss_scale, StepGuard& step_guard, StepReport& report);

  void describe_run(const TrainSummary& summary);  // the layout and model lines at the start
  std::string write_sample();                      // generates the sample; rank 0 writes sample.txt

  // Fills one micro-batch of global sample indices [first, first + count).
  void load_batch(const data::SequenceSampler& sampler, const std::vector<int32_t>& tokens,
                  int64_t first, int64_t count, torch::Tensor& inputs, torch::Tensor& targets) {
    const int64_t seq = config.model.seq_len;
    inputs = torch::empty({count, seq}, torch::kLong);
    targets = torch::empty({count, seq}, torch::kLong);
    sampler.fill(tokens, first, count, inputs.data_ptr<int64_t>(), targets.data_ptr<int64_t>());
  }

  // Sharded optimizer: the gather of a step's update runs behind the next
  // forward, each layer waiting only for the buckets that hold its own
  // parameters (and those gathered before them). Parameters are numbered
  // layer by layer, in order.
  void wait_for_parameters_layer_by_layer() {
    std::vector<int64_t> layer_last_parameter;  // the last each layer needs (-1: none yet)
    int64_t through = -1;
    for (size_t i = 0; i < model->size(); ++i) {
      for (const auto& p : model->layer(i).ptr()->parameters()) {
        ++through;
        GIANT_CHECK(through < static_cast<int64_t>(parameters.size()) &&
                        p.unsafeGetTensorImpl() == parameters[through].unsafeGetTensorImpl(),
                    "layer ", model->layer_name(i), "'s parameters are not numbered in layer order");
      }
      layer_last_parameter.push_back(through);
    }
    GIANT_CHECK(through + 1 == static_cast<int64_t>(parameters.size()), "the layers hold ", through + 1, " of ",
                parameters.size(), " parameters");
    model->set_before_layer([this, layer_last_parameter = std::move(layer_last_parameter)](size_t layer) {
      const int64_t last = layer_last_parameter[layer];
      if (last >= 0) parameter_wait_seconds += reducer->wait_parameters_through(static_cast<size_t>(last));
    });
  }

  double evaluate() {
    torch::NoGradGuard no_grad;
    model->eval();
    const auto& t = config.train;
    double total = 0.0;
    for (int64_t b = 0; b < t.eval_batches; ++b) {
      torch::Tensor inputs, targets;
      load_batch(*val_sampler, corpus.val, b * t.micro_batch, t.micro_batch, inputs, targets);
      total += models::gpt_loss(model->forward(inputs), targets, tp).item<double>();
    }
    model->train();
    return total / static_cast<double>(t.eval_batches);
  }
};

Trainer::Trainer(RunConfig config, std::string config_toml, std::ostream& out, bool live_progress,
                 TrainHooks hooks, std::shared_ptr<ccl::Communicator> world)
    : state_(std::make_unique<State>(std::move(config), out, live_progress, std::move(hooks),
                                     world == nullptr || world->rank() == 0)) {
  State& s = *state_;
  const RunConfig& c = s.config;
  check_layout(c, world ? world->size() : 1);
  if (c.train.precision_auto) {
    s.progress.line(resolve_precision(s.config));
  } else {
    resolve_precision(s.config);  // checks the device runs it
  }
  s.tokenizer = data::make_tokenizer(c.data.tokenizer);
  if (s.tokenizer->vocab_size() > c.model.vocab) {
    throw ConfigError("model.vocab", "is " + std::to_string(c.model.vocab) + " but tokenizer '" +
                                         s.tokenizer->name() + "' has " +
                                         std::to_string(s.tokenizer->vocab_size()) + " tokens");
  }
  s.corpus = data::TokenCorpus::load(c.data.path, *s.tokenizer, c.data.val_fraction);
  const auto seed = static_cast<uint64_t>(c.train.seed);
  s.train_sampler.emplace(static_cast<int64_t>(s.corpus.train.size()), c.model.seq_len, seed, "train");
  s.val_sampler.emplace(static_cast<int64_t>(s.corpus.val.size()), c.model.seq_len,
                        seed + kValidationSeedOffset, "validation");

  s.out_dir = c.train.out_dir;
  if (s.leader) {
    std::error_code error;
    std::filesystem::create_directories(s.out_dir, error);
    if (error) {
      throw ConfigError("train.out_dir", "cannot create '" + c.train.out_dir + "': " + error.message());
    }
    std::ofstream saved(s.out_dir / "config.toml", std::ios::trunc);
    saved << config_toml;
    if (!saved) {
      throw ConfigError("train.out_dir", "cannot write '" + (s.out_dir / "config.toml").string() + "'");
    }
    s.metrics = std::make_unique<MetricsLog>((s.out_dir / "metrics.jsonl").string());
    if (c.train.tensorboard) s.tensorboard = std::make_unique<TensorBoardLog>((s.out_dir / "tensorboard").string());
  }

  torch::set_num_threads(static_cast<int>(c.train.threads));
  if (!retain_freed_memory(static_cast<size_t>(c.train.retain_memory_mb) << 20)) {
    s.progress.line("warning: the C library refused train.retain_memory_mb; freed memory goes back to the kernel");
  }
  if (world && world->size() > 1) {
    s.mesh = std::make_unique<parallel::Mesh>(
        std::move(world), parallel::MeshShape{static_cast<int>(c.parallel.dp), static_cast<int>(c.parallel.pp),
                                     static_cast<int>(c.parallel.tp)});
    if (c.parallel.tp > 1) {
      s.tp = {&s.mesh->tp(), s.mesh->tp_rank(), static_cast<int>(c.parallel.tp), &s.tp_comm_seconds};
    }
  }
  s.require_one_precision();
  // Drawn in fp32 whatever the precision: the masters start from the exact
  // initialisation, the same in every precision and layout.
  s.model = models::gpt_layer_list(c.model).build_all(seed, torch::TensorOptions().dtype(torch::kFloat), s.tp);
  for (const auto& item : s.model->named_parameters()) {
    s.parameter_names.push_back(item.key());
    s.parameters.push_back(item.value());
    s.is_shard.push_back(parallel::is_tensor_parallel_shard(item.key()));
  }
  std::vector<at::Tensor> initial;
  if (s.mixed_precision()) initial = s.convert_to_compute_dtype();
  const auto bucket_bytes = static_cast<int64_t>(c.parallel.bucket_mb * (1 << 20));
  const auto grad_dtype = scalar_type_of(c.train.grad_dtype);
  if (s.mesh && c.parallel.dp > 1) {
    s.reducer = std::make_unique<parallel::GradientReducer>(s.parameters, s.mesh->dp_grads(), bucket_bytes,
                                                            c.parallel.zero == 1, grad_dtype);
  } else if (s.mixed_precision()) {
    // One replica: the buckets only accumulate the micro-batches in grad_dtype.
    s.reducer = std::make_unique<parallel::GradientReducer>(s.parameters, bucket_bytes, grad_dtype);
  }
  s.build_optimizer(std::move(initial));
  if (c.train.dynamic_loss_scaling()) {
    s.loss_scaler.emplace(optim::LossScalerOptions{c.train.loss_scale_initial, c.train.loss_scale_window,
                                                   c.train.loss_scale_hysteresis});
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
    for (size_t j = 0; j < compute.size(); ++j) {
      const size_t source = reducer->owned_parameter_source()[j];
      updated_is_shard.push_back(is_shard[source]);
      decay.push_back(optim::AdamW::decays(parameters[source]));
      compute_grads.push_back(compute[j].grad());
      if (!initial.empty()) {
        compute_initial.push_back(
            initial[source].reshape({-1}).narrow(0, reducer->owned_parameter_offset()[j], compute[j].numel()));
      }
    }
    wait_for_parameters_layer_by_layer();
  } else {
    compute = parameters;
    updated_is_shard = is_shard;
    for (size_t i = 0; i < parameters.size(); ++i) {
      decay.push_back(optim::AdamW::decays(parameters[i]));
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
  optimizer = std::make_unique<optim::AdamW>(updated, decay, adam);
}

Trainer::~Trainer() = default;

std::vector<at::Tensor> Trainer::parameters() const { return state_->parameters; }
std::vector<std::string> Trainer::parameter_names() const { return state_->parameter_names; }
const optim::AdamW& Trainer::optimizer() const { return *state_->optimizer; }
std::vector<at::Tensor> Trainer::updated_tensors() const { return state_->updated; }

Trainer::State::Accumulated Trainer::State::accumulate_gradients(int64_t step, double loss_scale,
                                                                  StepReport& report) {
  const auto& t = config.train;
  const int64_t dp = config.parallel.dp, micro_batches = t.micro_batches(dp);
  const int64_t rank_first_sample = dp_rank() * (t.global_batch / dp);
  tp_comm_seconds = 0;
  parameter_wait_seconds = 0;
  if (reducer) {
    reducer->zero_grad();
  } else {
    optimizer->zero_grad();  // fp32 on one replica: the parameters are what it updates
  }
  double loss_sum = 0;
  for (int64_t m = 0; m < micro_batches; ++m) {
    torch::Tensor inputs, targets, loss;
    {
      RECORD_USER_SCOPE("giant::data");
      Stopwatch watch;
      load_batch(*train_sampler, corpus.train, step * t.global_batch + rank_first_sample + m * t.micro_batch,
                 t.micro_batch, inputs, targets);
      report.data_s += watch.seconds();
    }
    {
      RECORD_USER_SCOPE("giant::forward");
      Stopwatch watch;
      loss = models::gpt_loss(model->forward(inputs), targets, tp);
      report.forward_s += watch.seconds();
    }
    {
      RECORD_USER_SCOPE("giant::backward");
      Stopwatch watch;
      if (reducer) reducer->begin_micro_batch(m + 1 == micro_batches);
      const double factor = loss_scale / static_cast<double>(micro_batches);
      (factor != 1.0 ? loss * factor : loss).backward();
      report.backward_s += watch.seconds();
    }
    loss_sum += loss.item<double>();
  }
  Accumulated result;
  result.loss = loss_sum / static_cast<double>(micro_batches);
  if (reducer) {
    RECORD_USER_SCOPE("giant::gradient_wait");
    result.comm_wait_s = reducer->finish();
    report.backward_s += result.comm_wait_s;
  }
  result.comm_wait_s += tp_comm_seconds + parameter_wait_seconds;
  return result;
}

bool Trainer::State::update(int64_t step, double loss, double loss_scale, StepGuard& step_guard,
                            StepReport& report) {
  RECORD_USER_SCOPE("giant::optimizer");
  const bool shards = sharded();
  report.grad_norm = optim::global_grad_norm(updated, updated_is_shard, mesh ? &mesh->tp() : nullptr,
                                             shards ? &mesh->dp_grads() : nullptr) /
                     loss_scale;
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
  progress.line("layout: dp " + std::to_string(config.parallel.dp) + " x tp " + std::to_string(config.parallel.tp) +
                " on " + std::to_string(world_size()) + " rank(s), " +
                std::to_string(t.micro_batches(config.parallel.dp)) + " micro-batch(es) of " +
                std::to_string(t.micro_batch) + " per rank per step" +
                (reducer ? ", " + std::to_string(reducer->num_buckets()) + " gradient bucket(s)" : ""));
  progress.line("model: " + std::to_string(config.model.parameter_count()) + " parameters, " +
                fixed(summary.model_flops_per_step / 1e9, 1) + " GFLOP per step; matmul reference " +
                fixed(summary.matmul_flops / 1e9, 1) + " GFLOP/s in " + summary.precision + " on " +
                std::to_string(t.threads) + " thread(s); data: " + std::to_string(corpus.train.size()) +
                " train and " + std::to_string(corpus.val.size()) + " validation tokens");
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
  // A byte-level model samples any bytes: the text everyone sees is valid
  // UTF-8 without terminal controls (the console, sample.txt, metrics.jsonl).
  std::string sample = printable_utf8(generate_text(model, *tokenizer, options, tp));
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

  TrainSummary summary;
  summary.precision = precision_name(t.precision);
  summary.matmul_flops = measure_matmul_flops(t.precision);
  summary.model_flops_per_step = c.model.train_flops_per_sequence() * static_cast<double>(t.global_batch);
  const double tokens_per_step = static_cast<double>(t.global_batch * c.model.seq_len);
  s.describe_run(summary);

  std::vector<double> tokens_per_s, mfu, step_seconds, comm_waits;
  const double world_flops = summary.matmul_flops * static_cast<double>(s.world_size());
  std::unique_ptr<torch::autograd::profiler::RecordProfile> trace;
  if (t.trace && t.trace_steps > 0 && s.leader) {
    trace = std::make_unique<torch::autograd::profiler::RecordProfile>((s.out_dir / "trace.json").string());
  }
  Stopwatch run_watch;
  s.model->train();
  for (int64_t step = 0; step < t.steps; ++step) {
    Stopwatch step_watch;
    StepReport report;
    report.step = step + 1;
    report.total_steps = t.steps;
    report.lr = schedule.at(step);
    const double loss_scale = s.loss_scaler ? s.loss_scaler->scale() : 1.0;
    const State::Accumulated accumulated = s.accumulate_gradients(step, loss_scale, report);
    const double comm_wait_s = accumulated.comm_wait_s;
    if (s.hooks.after_backward) s.hooks.after_backward(step, s.gradients());

    Stopwatch optimizer_watch;
    const double loss = s.dp_mean(accumulated.loss);
    const bool overflowed = s.update(step, loss, loss_scale, step_guard, report);
    if (overflowed) ++loss_scale_skips;
    report.optimizer_s = optimizer_watch.seconds();
    const double step_s = step_watch.seconds();
    if (trace && step + 1 == t.trace_steps) {
      trace.reset();  // writes the file
      s.progress.line("trace of the first " + std::to_string(t.trace_steps) + " steps: " +
                      (s.out_dir / "trace.json").string());
    }

    report.loss = loss;
    report.step_s = step_s;
    report.tokens_per_s = tokens_per_step / step_s;
    report.mfu = summary.model_flops_per_step / step_s / world_flops;
    report.elapsed_s = run_watch.seconds();
    report.loss_scale = s.loss_scaler ? loss_scale : 0.0;
    s.progress.step(report);
    if (overflowed) {
      s.progress.line("step " + std::to_string(step + 1) + " skipped: gradients overflowed at loss scale " +
                      fixed(loss_scale, 0) + " (now " + fixed(s.loss_scaler->scale(), 0) + ")");
    } else if (report.skipped) {
      s.progress.line("step " + std::to_string(step + 1) + " skipped: loss " + std::to_string(loss) +
                      ", gradient norm " + std::to_string(report.grad_norm) + " (not finite)");
    }
    if (s.metrics) s.metrics->step(report, comm_wait_s);
    if (s.tensorboard) s.tensorboard->step(report);
    if (step == 0) summary.first_loss = loss;
    summary.last_loss = loss;
    if (step > 0 || t.steps == 1) {  // the first step pays for warm-up
      tokens_per_s.push_back(report.tokens_per_s);
      mfu.push_back(report.mfu);
      step_seconds.push_back(step_s);
      comm_waits.push_back(comm_wait_s);
    }

    const bool last = step + 1 == t.steps;
    if (last || (t.eval_every > 0 && (step + 1) % t.eval_every == 0)) {
      summary.val_loss = s.evaluate();
      if (s.metrics) s.metrics->evaluation(step + 1, summary.val_loss);
      if (s.tensorboard) s.tensorboard->evaluation(step + 1, summary.val_loss);
      s.progress.line("step " + std::to_string(step + 1) + "/" + std::to_string(t.steps) +
                      "  train loss " + fixed(loss, 4) + "  val loss " + fixed(summary.val_loss, 4) +
                      "  " + fixed(median(tokens_per_s), 0) + " tok/s  MFU " +
                      fixed(100.0 * median(mfu), 1) + "%  elapsed " +
                      Progress::format_eta(run_watch.seconds()));
    }
  }
  if (s.reducer) s.reducer->wait_parameters();
  trace.reset();
  s.progress.finish();
  summary.steps = t.steps;
  summary.skipped_steps = step_guard.skipped_total() + loss_scale_skips;
  if (s.loss_scaler) summary.final_loss_scale = s.loss_scaler->scale();
  summary.tokens_per_s_median = median(tokens_per_s);
  summary.mfu_median = median(mfu);
  summary.step_s_median = median(step_seconds);
  summary.comm_wait_s_median = median(comm_waits);
  summary.seconds = run_watch.seconds();

  if (t.sample_tokens > 0) summary.sample = s.write_sample();
  if (s.metrics) s.metrics->summary(summary);
  return summary;
}

}  // namespace giant::train
