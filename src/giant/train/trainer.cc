#include "giant/train/trainer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/timer.h"
#include "giant/base/units.h"
#include "giant/base/utf8.h"
#include "giant/ccl/communicator.h"
#include "giant/data/tokenizer.h"
#include "giant/models/gpt.h"
#include "giant/optim/adamw.h"
#include "giant/optim/clipping.h"
#include "giant/optim/lr_schedule.h"
#include "giant/train/checkpoint_assembly.h"
#include "giant/train/fault_injection.h"
#include "giant/train/generate.h"
#include "giant/train/hang_watchdog.h"
#include "giant/train/local_executor.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/memory_check.h"
#include "giant/train/memory_meter.h"
#include "giant/train/micro_batches.h"
#include "giant/train/model_state.h"
#include "giant/train/pipeline_step.h"
#include "giant/train/precision_choice.h"
#include "giant/train/resume_check.h"
#include "giant/train/run_checkpoints.h"
#include "giant/train/run_device.h"
#include "giant/train/run_outputs.h"
#include "giant/train/run_report.h"
#include "giant/train/run_topology.h"
#include "giant/train/sharded_model.h"
#include "giant/train/stage_model.h"
#include "giant/train/step_guard.h"

namespace giant::train {

void check_layout(const RunConfig& c, int world_size) {
  if (c.parallel.automatic) {
    throw ConfigError("parallel.auto", "the layout must be chosen first (choose_layout)");
  }
  const Layout& l = c.layout;
  const int64_t devices = int64_t{l.dp} * l.pp * l.tp;  // each may be up to INT_MAX
  if (devices != world_size) {
    throw ConfigError("parallel.dp", "parallel.dp x parallel.pp x parallel.tp = " + std::to_string(l.dp) + " x " +
                                         std::to_string(l.pp) + " x " + std::to_string(l.tp) + " = " +
                                         std::to_string(devices) + ", but " +
                                         std::to_string(world_size) + " rank(s) were started" +
                                         (world_size == 1 ? " (start several with giant launch)" : ""));
  }
  models::check_tensor_parallel(c.model, l.tp);
  pipeline_shape_of(c);                            // the schedule's rules
  partition_stages(c, models::gpt_layer_list(c.model));  // no stage empty
}

namespace {

// The communicators a hang report lists: the mesh's groups of more than
// one rank.
NamedCommunicators mesh_communicators(const parallel::Mesh* mesh) {
  if (mesh == nullptr) return {};
  NamedCommunicators all = {{"world", &mesh->world()}, {"dp", &mesh->dp()},
                            {"pp", &mesh->pp()},       {"tp", &mesh->tp()},
                            {"dp gradients", &mesh->dp_grads()}};
  if (mesh->tied_embedding() != nullptr) all.emplace_back("tied embedding", mesh->tied_embedding());
  NamedCommunicators shared;
  for (const auto& named : all) {
    if (named.second->size() > 1) shared.push_back(named);
  }
  return shared;
}

}  // namespace

// One process's run, by responsibility: what it writes (outputs), where it
// stands among the ranks (topology), the model and what updates it (the
// model state), the data, the step executor and the checkpoints.
struct Trainer::State {
  RunConfig config;
  RunOutputs outputs;
  Progress& progress;
  TrainHooks hooks;
  MemoryMeter memory;  // before what it counts: what the rank allocates from here on
  RunTopology topology;
  CommClock clock;
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::unique_ptr<MicroBatches> batches;
  std::unique_ptr<ModelState> model;
  std::unique_ptr<StepExecutor> executor;
  PipelineStepExecutor* pipeline = nullptr;  // the executor, under pp
  std::unique_ptr<RunCheckpoints> checkpoints;
  ResumePoint resumed;  // start_step 0 and nothing else: a fresh run
  StepPhases phases;  // train.fault's injector, armed on the rank and restart it names
  MatrixRates rates;    // measured once at start-up: the precision choice's and MFU's
  std::unique_ptr<HangWatchdog> watchdog;  // while the steps run; last, so it goes before what it reads

  State(RunConfig c, std::ostream& o, bool live, TrainHooks h, bool is_leader)
      : config(std::move(c)), outputs(o, live, is_leader), progress(outputs.progress), hooks(std::move(h)) {
    topology.pipelined = config.layout.pp > 1;
  }

  CheckpointedParts checkpointed() { return {config, topology, *model, *batches, *checkpoints, progress}; }
  double from_last_stage(double value) const { return topology.from_last_stage(value, executor->holds_loss()); }
  // The signal some rank was asked to stop by, the same on every rank (one
  // small allreduce each step, so that all of them stop after the same step).
  int agreed_stop_signal() const {
    return topology.largest_on_any_rank(hooks.stop_signal ? hooks.stop_signal() : 0);
  }

  void build_executor();
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

  struct Loop;
  // Describes the run, starts the trace, the clocks and the generator.
  std::unique_ptr<Loop> start_loop();
  // One step: forward, backward, update, report, evaluation, checkpoint;
  // false when a stop signal ends the run after it.
  bool run_step(int64_t step, Loop& loop);
  // Saves the checkpoint of step `step` into the tier, as the hang
  // watchdog's checkpoint phase.
  void save_step(int64_t step, Loop& loop, RunCheckpoints::Tier tier = RunCheckpoints::Tier::durable);
  void finish_done_run(Loop& loop);
};

Trainer::Trainer(RunConfig config, std::string config_toml, std::ostream& out, bool live_progress,
                 TrainHooks hooks, std::shared_ptr<ccl::Communicator> world, std::optional<MatrixRates> rates)
    : state_(std::make_unique<State>(std::move(config), out, live_progress, std::move(hooks),
                                     world == nullptr || world->rank() == 0)) {
  State& s = *state_;
  const RunConfig& c = s.config;
  check_layout(c, world ? world->size() : 1);
  resolve_device(s.config.train, world ? world->topology().local_rank : 0);  // as giant train did, when it did
  const c10::Device device = run_device(c.train);
  check_precision_runs(c.train);
  s.phases.arm(FaultInjector(parse_fault(c.train.fault), world ? world->rank() : 0, c.train.restart));
  const bool precision_auto = c.train.precision_auto;
  s.rates = rates ? *rates
                  : measure_matrix_rates(precisions_to_measure(c.train), static_cast<int>(c.train.threads),
                                         world.get(), reference_products_on(device));
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
  s.batches = std::make_unique<MicroBatches>(c, data::open_datasets(data_options, *s.tokenizer), dp_rank, device);
  s.outputs.open(c, config_toml);

  torch::set_num_threads(static_cast<int>(c.train.threads));
  if (!retain_freed_memory(static_cast<size_t>(c.train.retain_memory_mb) << 20)) {
    s.progress.warning("the C library refused train.retain_memory_mb; freed memory goes back to the kernel");
  }
  if (world && world->size() > 1) {
    std::string links;
    s.topology.mesh = make_mesh(std::move(world), shape, c.parallel, links);
    if (!links.empty()) s.progress.line(links);
    if (c.layout.tp > 1) {
      const parallel::Mesh& mesh = *s.topology.mesh;
      s.topology.tp = {&mesh.tp(), mesh.tp_rank(), c.layout.tp, &s.clock.tensor_parallel_s};
    }
  }
  s.model = build_model_state(c, s.topology, s.clock, s.progress);
  const ModelState& m = *s.model;
  s.memory.watch({m.sync.get(), m.parameters(), m.optimizer.get(), m.masters.get()});
  s.build_executor();
  s.checkpoints = std::make_unique<RunCheckpoints>(
      s.config, s.topology.mesh ? &s.topology.mesh->world() : nullptr, s.progress, s.phases.faults());
  if (const auto chosen = s.checkpoints->choose_resume()) s.resumed = resume_from(s.checkpointed(), *chosen);
  std::optional<int64_t> resumed_step;
  if (s.resumed.train) resumed_step = s.resumed.start_step;
  s.outputs.open_logs(c, resumed_step);
}

void Trainer::State::build_executor() {
  StepParts parts;
  parts.batches = batches.get();
  parts.tp = topology.tp;
  parts.reducer = model->sync.get();
  parts.parameters = model->parameters();
  parts.clock = &clock;
  parts.phases = &phases;
  if (!topology.pipelined) {
    executor = std::make_unique<LocalExecutor>(std::move(parts), model->model.chunks.front());
    return;
  }
  TiedGradients tied;
  if (model->model.tied_index >= 0) {
    tied.comm = topology.mesh->tied_embedding();
    GIANT_CHECK(tied.comm != nullptr, "pp rank ", topology.pp_rank(),
                " holds the tied embedding but is not in its group");
    tied.tensors = [state = model.get()] { return state->tied_gradients(); };
  }
  auto pipeline_executor = std::make_unique<PipelineStepExecutor>(
      config, std::move(parts), topology.mesh->pp(), model->model.stages, model->model.chunks, std::move(tied));
  pipeline = pipeline_executor.get();
  executor = std::move(pipeline_executor);
}

Trainer::~Trainer() = default;

std::vector<at::Tensor> Trainer::parameters() const { return state_->model->parameters(); }
std::vector<std::string> Trainer::parameter_names() const { return state_->model->model.names; }
std::vector<at::Tensor> Trainer::whole_parameters() const {
  const WholeParameters whole(state_->model->sync.get());
  std::vector<at::Tensor> copies;
  for (const auto& p : state_->model->parameters()) copies.push_back(p.detach().clone());
  return copies;
}
const optim::AdamW& Trainer::optimizer() const { return *state_->model->optimizer; }
std::vector<at::Tensor> Trainer::updated_tensors() const { return state_->model->updated; }

bool Trainer::State::update(int64_t step, double loss, double loss_scale, StepGuard& step_guard,
                            StepReport& report) {
  RECORD_USER_SCOPE("giant::optimizer");
  ModelState& m = *model;
  optim::GradNormGroups groups;
  if (const parallel::Mesh* mesh = topology.mesh.get()) {
    groups.tensor_parallel = &mesh->tp();
    if (m.sync && m.sync->shards_optimizer()) groups.partition = &mesh->dp_grads();
    if (topology.pipelined) groups.pipeline = &mesh->pp();
  }
  report.grad_norm = optim::global_grad_norm(m.norm.tensors, m.norm.is_shard, groups) / loss_scale;
  const bool finite = topology.on_every_rank(std::isfinite(loss) && std::isfinite(report.grad_norm));
  // With loss scaling, gradients that overflowed (from a finite loss) lower the scale.
  const bool overflowed = m.loss_scaler && std::isfinite(loss) && !finite;
  const bool applied = !overflowed && step_guard.accept(step + 1, finite, loss, report.grad_norm);
  if (m.loss_scaler) m.loss_scaler->update(overflowed);
  report.skipped = !applied;
  if (!applied) return overflowed;
  // Unscaling and clipping inside the update's own pass over the gradients.
  m.optimizer->step(report.lr, optim::clip_coefficient(report.grad_norm, config.train.grad_clip) / loss_scale);
  if (m.masters) m.masters->copy_to_compute();
  if (m.sync) m.sync->gather_parameters_async();  // sharded: waited for by the next forward
  return false;
}

void Trainer::State::describe_run(const TrainSummary& summary) {
  const Layout& p = config.layout;
  const parallel::GradientSync* sync = model->sync.get();
  std::string pipeline;
  if (topology.pipelined) {
    pipeline = " x pp " + std::to_string(p.pp) + " (" + schedule_name(p.schedule) +
               (p.virtual_stages > 1 ? ", " + std::to_string(p.virtual_stages) + " virtual stages" : "") + ")";
  }
  progress.line("layout: dp " + std::to_string(p.dp) + pipeline + " x tp " + std::to_string(p.tp) + " on " +
                std::to_string(topology.world_size()) + " rank(s), " + std::to_string(batches->per_step()) +
                " micro-batch(es) of " + std::to_string(p.micro_batch) + " per rank per step" +
                (sync ? ", " + std::to_string(sync->num_buckets()) + " gradient bucket(s)" : ""));
  progress.line("model: " + std::to_string(config.model.parameter_count()) + " parameters, " +
                fixed(summary.model_flops_per_step / 1e9, 1) + " GFLOP per step; matmul reference " +
                fixed(summary.matmul_flops / 1e9, 1) + " GFLOP/s in " + summary.precision + " on " +
                std::to_string(config.train.threads) + " thread(s); data: " + batches->datasets().description);
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
  const WholeParameters whole(model->sync.get());  // generation reads them outside the layers' forward
  executor->set_training(false);
  // Without a pipeline this rank holds the whole model (its tp shard of
  // it): a key-value cache; a pipeline runs the whole window each token.
  const ContextLogits logits =
      pipeline ? windowed_logits(pipeline->next_logits(config.model.padded_vocab()), config.model.seq_len)
               : cached_model_logits(model->model.chunks.front(), topology.tp);
  // A byte-level model samples any bytes: the text everyone sees is valid
  // UTF-8 without terminal controls (the console, sample.txt, metrics.jsonl).
  std::string sample = printable_utf8(generate(logits, *tokenizer, options).text);
  executor->set_training(true);
  if (outputs.leader) std::ofstream(outputs.out_dir / "sample.txt", std::ios::trunc) << sample << '\n';
  return sample;
}

// What the steps of one run() share.
struct Trainer::State::Loop {
  Loop(const TrainSettings& t, const TrainSummary& start, Progress& progress, const RunOutputs& outputs)
      : schedule{t.lr, t.min_lr, t.warmup_steps, t.steps},
        step_guard(t.max_bad_steps),
        summary(start),
        reporter(progress, outputs.metrics.get(), outputs.tensorboard.get(), t.steps) {}

  const optim::LrSchedule schedule;
  StepGuard step_guard;
  int64_t loss_scale_skips = 0;
  TrainSummary summary;
  RunReporter reporter;
  double tokens_per_step = 0;
  double rank_flops_per_step = 0;  // MFU: model FLOPs per second per rank against one rank's rate
  std::unique_ptr<torch::autograd::profiler::RecordProfile> trace;
  Stopwatch run_watch;

  StepCounters counters(int64_t steps_done) const {
    return {steps_done, step_guard.bad_in_a_row(), step_guard.skipped_total(), loss_scale_skips};
  }
};

std::unique_ptr<Trainer::State::Loop> Trainer::State::start_loop() {
  const RunConfig& c = config;
  const auto& t = c.train;
  TrainSummary summary;
  summary.precision = precision_name(t.precision);
  summary.matmul_flops = rates.of(t.precision);
  summary.model_flops_per_step = c.model.train_flops_per_sequence() * static_cast<double>(t.global_batch);
  describe_run(summary);
  auto loop = std::make_unique<Loop>(t, summary, progress, outputs);
  if (resumed.train) {
    loop->step_guard.restore(resumed.train->bad_steps_in_a_row, resumed.train->skipped_steps);
    loop->loss_scale_skips = resumed.train->loss_scale_skips;
  }
  loop->tokens_per_step = static_cast<double>(t.global_batch * c.model.seq_len);
  loop->rank_flops_per_step = summary.model_flops_per_step / static_cast<double>(topology.world_size());
  if (t.trace && t.trace_steps > 0 && outputs.leader) {
    loop->trace =
        std::make_unique<torch::autograd::profiler::RecordProfile>((outputs.out_dir / "trace.json").string());
  }
  loop->run_watch.reset();
  memory.bind_this_thread();
  executor->set_training(true);
  const c10::Device device = run_device(config.train);
  if (resumed.generator) {
    restore_generator_state(*resumed.generator, device);
  } else {
    // What dropout draws from, seeded by the run (start-up probes drew from it too).
    device_generator(device).set_current_seed(static_cast<uint64_t>(t.seed));
  }
  return loop;
}

bool Trainer::State::run_step(int64_t step, Loop& loop) {
  const auto& t = config.train;
  ModelState& m = *model;
  Stopwatch step_watch;
  StepReport report;
  report.step = step + 1;
  report.total_steps = t.steps;
  report.lr = loop.schedule.at(step);
  report.loss_scale = m.loss_scaler ? m.loss_scaler->scale() : 0.0;
  const double loss_scale = m.loss_scaler ? report.loss_scale : 1.0;
  report.checkpoint_writing = checkpoints->in_flight();
  memory.begin_step();
  if (!t.progress_file.empty() && topology.world_rank() == 0) {
    std::ofstream(t.progress_file, std::ios::trunc) << step + 1 << '\n';  // for giant launch (repeated_failure.h)
  }
  phases.begin(FaultPhase::forward, step + 1);
  const StepLoss accumulated = executor->train_step(step, loss_scale, report);
  if (hooks.after_backward) hooks.after_backward(step, m.gradients());

  Stopwatch optimizer_watch;
  report.loss = from_last_stage(topology.dp_mean(accumulated.loss));
  phases.begin(FaultPhase::optimizer, step + 1);
  const bool overflowed = update(step, report.loss, loss_scale, loop.step_guard, report);
  if (overflowed) ++loop.loss_scale_skips;
  report.optimizer_s = optimizer_watch.seconds();
  report.memory = memory.end_step();
  report.step_s = step_watch.seconds();
  watchdog->step_took(report.step_s);
  if (loop.trace && step + 1 == t.trace_steps) {
    loop.trace.reset();  // writes the file
    progress.line("trace of the first " + std::to_string(t.trace_steps) + " steps: " +
                  (outputs.out_dir / "trace.json").string());
  }
  report.tokens_per_s = loop.tokens_per_step / report.step_s;
  report.mfu = loop.rank_flops_per_step / report.step_s / loop.summary.matmul_flops;
  report.elapsed_s = loop.run_watch.seconds();
  loop.reporter.step(report, accumulated.comm_wait_s, overflowed, m.loss_scaler ? m.loss_scaler->scale() : 0.0);

  if (step + 1 == t.steps || (t.eval_every > 0 && (step + 1) % t.eval_every == 0)) {
    phases.begin(FaultPhase::evaluation, step + 1);
    loop.summary.val_loss = evaluate();
    loop.reporter.evaluation(step + 1, report.loss, loop.summary.val_loss, loop.run_watch.seconds());
  }
  const std::optional<RunCheckpoints::Tier> due = checkpoints->due(step + 1);
  const bool saved = due == RunCheckpoints::Tier::durable;
  if (due) {
    save_step(step + 1, loop, *due);
  } else {
    checkpoints->poll();
  }
  loop.summary.last_step = step + 1;
  if (step + 1 < t.steps && (loop.summary.stop_signal = agreed_stop_signal()) != 0) {
    progress.line("stopping after step " + std::to_string(step + 1) + " (asked by signal " +
                  std::to_string(loop.summary.stop_signal) + "); saving a checkpoint to resume from");
    if (!saved) save_step(step + 1, loop);
    return false;
  }
  return true;
}

void Trainer::State::save_step(int64_t step, Loop& loop, RunCheckpoints::Tier tier) {
  phases.mark(FaultPhase::checkpoint, step);
  save_checkpoint(checkpointed(), loop.counters(step), tier);
}

// A run resumed from a checkpoint that had done every step: evaluates, and
// saves its state in checkpoint.dir unless it came from there (a checkpoint
// loaded into this layout and saved again).
void Trainer::State::finish_done_run(Loop& loop) {
  const int64_t steps = config.train.steps;
  loop.summary.last_step = steps;
  progress.line(nothing_left_to_train(resumed.from, steps));
  loop.summary.val_loss = evaluate();
  namespace fs = std::filesystem;
  if (fs::weakly_canonical(resumed.from.parent_path()) != fs::weakly_canonical(config.checkpoint.dir)) {
    save_checkpoint(checkpointed(), loop.counters(steps));
  }
}

TrainSummary Trainer::run() {
  State& s = *state_;
  const auto& t = s.config.train;
  const std::unique_ptr<State::Loop> loop = s.start_loop();
  s.watchdog = std::make_unique<HangWatchdog>(t.hang_timeout, s.phases, mesh_communicators(s.topology.mesh.get()),
                                              s.topology.world_rank());
  for (int64_t step = s.resumed.start_step; step < t.steps; ++step) {
    if (!s.run_step(step, *loop)) break;
  }
  s.watchdog.reset();  // what follows (the sample) is no step
  if (s.resumed.start_step == t.steps) s.finish_done_run(*loop);
  s.checkpoints->finish();
  if (s.model->sync) s.model->sync->wait_parameters();
  loop->trace.reset();
  s.progress.finish();
  TrainSummary& summary = loop->summary;
  summary.steps = summary.last_step - s.resumed.start_step;
  summary.skipped_steps = loop->step_guard.skipped_total() + loop->loss_scale_skips;
  if (s.model->loss_scaler) summary.final_loss_scale = s.model->loss_scaler->scale();
  loop->reporter.fill(summary);
  summary.seconds = loop->run_watch.seconds();

  if (t.sample_tokens > 0 && summary.stop_signal == 0) summary.sample = s.write_sample();
  if (s.outputs.metrics) s.outputs.metrics->summary(summary);
  return summary;
}

}  // namespace giant::train
