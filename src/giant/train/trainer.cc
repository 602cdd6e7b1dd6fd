#include "giant/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/data/corpus.h"
#include "giant/data/sampler.h"
#include "giant/data/tokenizer.h"
#include "giant/models/gpt.h"
#include "giant/optim/adamw.h"
#include "giant/optim/clipping.h"
#include "giant/optim/lr_schedule.h"
#include "giant/train/generate.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/metrics_log.h"
#include "giant/train/progress.h"
#include "giant/train/step_guard.h"

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

struct Trainer::State {
  RunConfig config;
  std::ostream& out;
  Progress progress;
  TrainHooks hooks;
  std::unique_ptr<data::Tokenizer> tokenizer;
  data::TokenCorpus corpus;
  std::optional<data::SequenceSampler> train_sampler, val_sampler;
  parallel::LayerStack model{nullptr};
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<optim::AdamW> optimizer;
  std::unique_ptr<MetricsLog> metrics;
  std::filesystem::path out_dir;

  State(RunConfig c, std::ostream& o, bool live, TrainHooks h)
      : config(std::move(c)), out(o), progress(o, live), hooks(std::move(h)) {}

  // Fills one micro-batch of global sample indices [first, first + count).
  void load_batch(const data::SequenceSampler& sampler, const std::vector<int32_t>& tokens,
                  int64_t first, int64_t count, torch::Tensor& inputs, torch::Tensor& targets) {
    const int64_t seq = config.model.seq_len;
    inputs = torch::empty({count, seq}, torch::kLong);
    targets = torch::empty({count, seq}, torch::kLong);
    sampler.fill(tokens, first, count, inputs.data_ptr<int64_t>(), targets.data_ptr<int64_t>());
  }

  double evaluate() {
    torch::NoGradGuard no_grad;
    model->eval();
    const auto& t = config.train;
    double total = 0.0;
    for (int64_t b = 0; b < t.eval_batches; ++b) {
      torch::Tensor inputs, targets;
      load_batch(*val_sampler, corpus.val, b * t.micro_batch, t.micro_batch, inputs, targets);
      total += models::gpt_loss(model->forward(inputs), targets).item<double>();
    }
    model->train();
    return total / static_cast<double>(t.eval_batches);
  }
};

Trainer::Trainer(RunConfig config, std::string config_toml, std::ostream& out, bool live_progress,
                 TrainHooks hooks)
    : state_(std::make_unique<State>(std::move(config), out, live_progress, std::move(hooks))) {
  State& s = *state_;
  const RunConfig& c = s.config;
  if (c.parallel.dp * c.parallel.tp * c.parallel.pp != 1 || c.parallel.automatic) {
    throw ConfigError(c.parallel.automatic ? "parallel.auto" : "parallel.dp",
                      "this trainer runs one process (dp = tp = pp = 1, auto = false); "
                      "data, tensor and pipeline parallel training come with `giant launch`");
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

  torch::set_num_threads(static_cast<int>(c.train.threads));
  s.model = models::gpt_layer_list(c.model).build_all(seed, torch::TensorOptions().dtype(torch::kFloat));
  s.parameters = s.model->parameters();
  optim::AdamWOptions adam;
  adam.beta1 = c.train.beta1;
  adam.beta2 = c.train.beta2;
  adam.weight_decay = c.train.weight_decay;
  s.optimizer = std::make_unique<optim::AdamW>(s.parameters, adam);
}

Trainer::~Trainer() = default;

std::vector<at::Tensor> Trainer::parameters() const { return state_->parameters; }

TrainSummary Trainer::run() {
  State& s = *state_;
  const RunConfig& c = s.config;
  const auto& t = c.train;
  const int64_t micro_batches = t.micro_batches(1);
  const optim::LrSchedule schedule{t.lr, t.min_lr, t.warmup_steps, t.steps};
  StepGuard step_guard(t.max_bad_steps);

  TrainSummary summary;
  summary.matmul_flops = measure_matmul_flops();
  summary.model_flops_per_step = c.model.train_flops_per_sequence() * static_cast<double>(t.global_batch);
  const double tokens_per_step = static_cast<double>(t.global_batch * c.model.seq_len);
  s.progress.line("model: " + std::to_string(c.model.parameter_count()) + " parameters, " +
                  fixed(summary.model_flops_per_step / 1e9, 1) + " GFLOP per step; matmul reference " +
                  fixed(summary.matmul_flops / 1e9, 1) + " GFLOP/s on " + std::to_string(t.threads) +
                  " thread(s); data: " + std::to_string(s.corpus.train.size()) + " train and " +
                  std::to_string(s.corpus.val.size()) + " validation tokens");

  std::vector<double> tokens_per_s, mfu, step_seconds;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> trace;
  if (t.trace && t.trace_steps > 0) {
    trace = std::make_unique<torch::autograd::profiler::RecordProfile>((s.out_dir / "trace.json").string());
  }
  Stopwatch run_watch;
  s.model->train();
  for (int64_t step = 0; step < t.steps; ++step) {
    Stopwatch step_watch;
    double data_s = 0, forward_s = 0, backward_s = 0, loss_sum = 0;
    s.optimizer->zero_grad();
    for (int64_t m = 0; m < micro_batches; ++m) {
      torch::Tensor inputs, targets, loss;
      {
        RECORD_USER_SCOPE("giant::data");
        Stopwatch watch;
        s.load_batch(*s.train_sampler, s.corpus.train, step * t.global_batch + m * t.micro_batch,
                     t.micro_batch, inputs, targets);
        data_s += watch.seconds();
      }
      {
        RECORD_USER_SCOPE("giant::forward");
        Stopwatch watch;
        loss = models::gpt_loss(s.model->forward(inputs), targets);
        forward_s += watch.seconds();
      }
      {
        RECORD_USER_SCOPE("giant::backward");
        Stopwatch watch;
        (micro_batches > 1 ? loss / static_cast<double>(micro_batches) : loss).backward();
        backward_s += watch.seconds();
      }
      loss_sum += loss.item<double>();
    }
    if (s.hooks.after_backward) s.hooks.after_backward(step, s.parameters);

    Stopwatch optimizer_watch;
    const double loss = loss_sum / static_cast<double>(micro_batches);
    const double lr = schedule.at(step);
    double grad_norm = 0;
    bool applied = false;
    {
      RECORD_USER_SCOPE("giant::optimizer");
      grad_norm = optim::global_grad_norm(s.parameters);
      applied = step_guard.accept(step + 1, loss, grad_norm);
      if (applied) {
        optim::clip_grads_to_norm(s.parameters, grad_norm, t.grad_clip);
        s.optimizer->step(lr);
      }
    }
    const double optimizer_s = optimizer_watch.seconds();
    const double step_s = step_watch.seconds();
    if (trace && step + 1 == t.trace_steps) {
      trace.reset();  // writes the file
      s.progress.line("trace of the first " + std::to_string(t.trace_steps) + " steps: " +
                      (s.out_dir / "trace.json").string());
    }

    StepReport report;
    report.step = step + 1;
    report.total_steps = t.steps;
    report.loss = loss;
    report.lr = lr;
    report.grad_norm = grad_norm;
    report.step_s = step_s;
    report.tokens_per_s = tokens_per_step / step_s;
    report.mfu = summary.model_flops_per_step / step_s / summary.matmul_flops;
    report.data_s = data_s;
    report.forward_s = forward_s;
    report.backward_s = backward_s;
    report.optimizer_s = optimizer_s;
    report.elapsed_s = run_watch.seconds();
    report.skipped = !applied;
    s.progress.step(report);
    if (!applied) {
      s.progress.line("step " + std::to_string(step + 1) + " skipped: loss " + std::to_string(loss) +
                      ", gradient norm " + std::to_string(grad_norm) + " (not finite)");
    }
    s.metrics->write(JsonRecord()
                         .add("step", step + 1)
                         .add("loss", loss)
                         .add("lr", lr)
                         .add("grad_norm", grad_norm)
                         .add("tokens_per_s", report.tokens_per_s)
                         .add("mfu", report.mfu)
                         .add("step_s", step_s)
                         .add("data_s", data_s)
                         .add("forward_s", forward_s)
                         .add("backward_s", backward_s)
                         .add("optimizer_s", optimizer_s)
                         .add("skipped", !applied));
    if (step == 0) summary.first_loss = loss;
    summary.last_loss = loss;
    if (step > 0 || t.steps == 1) {  // the first step pays for warm-up
      tokens_per_s.push_back(report.tokens_per_s);
      mfu.push_back(report.mfu);
      step_seconds.push_back(step_s);
    }

    const bool last = step + 1 == t.steps;
    if (last || (t.eval_every > 0 && (step + 1) % t.eval_every == 0)) {
      summary.val_loss = s.evaluate();
      s.metrics->write(JsonRecord().add("step", step + 1).add("val_loss", summary.val_loss));
      s.progress.line("step " + std::to_string(step + 1) + "/" + std::to_string(t.steps) +
                      "  train loss " + fixed(loss, 4) + "  val loss " + fixed(summary.val_loss, 4) +
                      "  " + fixed(median(tokens_per_s), 0) + " tok/s  MFU " +
                      fixed(100.0 * median(mfu), 1) + "%  elapsed " +
                      Progress::format_eta(run_watch.seconds()));
    }
  }
  trace.reset();
  s.progress.finish();
  summary.steps = t.steps;
  summary.skipped_steps = step_guard.skipped_total();
  summary.tokens_per_s_median = median(tokens_per_s);
  summary.mfu_median = median(mfu);
  summary.step_s_median = median(step_seconds);
  summary.seconds = run_watch.seconds();

  if (t.sample_tokens > 0) {
    SampleOptions options;
    options.prompt = t.sample_prompt;
    options.tokens = t.sample_tokens;
    options.temperature = t.sample_temperature;
    options.vocab = c.model.vocab;
    options.seq_len = c.model.seq_len;
    options.seed = static_cast<uint64_t>(t.seed);
    summary.sample = generate_text(s.model, *s.tokenizer, options);
    std::ofstream(s.out_dir / "sample.txt", std::ios::trunc) << summary.sample << '\n';
  }
  s.metrics->write(JsonRecord()
                       .add("summary", true)
                       .add("steps", summary.steps)
                       .add("skipped_steps", summary.skipped_steps)
                       .add("val_loss", summary.val_loss)
                       .add("tokens_per_s_median", summary.tokens_per_s_median)
                       .add("mfu_median", summary.mfu_median)
                       .add("step_s_median", summary.step_s_median)
                       .add("matmul_flops", summary.matmul_flops)
                       .add("seconds", summary.seconds)
                       .add("sample", summary.sample));
  return summary;
}

}  // namespace giant::train
