#include "giant/train/run_keys.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/train/fault_injection.h"
#include "giant/train/device_setting.h"

namespace giant::train {
namespace {

constexpr int64_t kMaxRetainMb = static_cast<int64_t>(kMaxRetainedBytes >> 20);  // 2047

using namespace keys;  // the table's rules and factories

// The field a key binds to: a member of a section of RunConfig.
template <class T>
Field<RunConfig, T> in_model(T models::GptConfig::*m) { return member(&RunConfig::model, m); }
template <class T>
Field<RunConfig, T> in_layout(T Layout::*m) { return member(&RunConfig::layout, m); }
template <class T>
Field<RunConfig, T> in_parallel(T ParallelSettings::*m) { return member(&RunConfig::parallel, m); }
template <class T>
Field<RunConfig, T> in_train(T TrainSettings::*m) { return member(&RunConfig::train, m); }
template <class T>
Field<RunConfig, T> in_data(T DataSettings::*m) { return member(&RunConfig::data, m); }
template <class T>
Field<RunConfig, T> in_checkpoint(T CheckpointSettings::*m) { return member(&RunConfig::checkpoint, m); }

Names<Precision> precision_names() {
  Names<Precision> names;
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) names.emplace_back(precision_name(p), p);
  return names;
}

// train.precision: a precision, or auto (resolved at start-up).
RunKey compute_precision(const std::string& help) {
  const std::string name = "train.precision";
  RunKey key = described<RunConfig>(name, TunableKind::string, "fp32, bf16, fp16 or auto", help);
  key.define = [=](Tunables& k, const RunConfig& d) {
    k.define_string(name, d.train.precision_auto ? "auto" : precision_name(d.train.precision), help);
  };
  key.read = [=](const Tunables& k, RunConfig& c) {
    const std::string& word = k.get_string(name);
    c.train.precision_auto = word == "auto";
    c.train.precision = Precision::fp32;
    if (c.train.precision_auto) return;
    const auto precision = parse_precision(word);
    if (!precision) throw ConfigError(name, "must be fp32, bf16 or fp16 (or auto), got '" + word + "'");
    c.train.precision = *precision;
  };
  return key;
}

// A train.* string key whose value `check` reads when the key is read (a
// ConfigError naming the key for one it cannot use).
template <class Check>
RunKey checked_train_text(const std::string& name, std::string TrainSettings::*field, const std::string& values,
                          const std::string& help, Check check) {
  RunKey key = described<RunConfig>(name, TunableKind::string, values, help);
  key.define = [=](Tunables& k, const RunConfig& d) { k.define_string(name, d.train.*field, help); };
  key.read = [=](const Tunables& k, RunConfig& c) {
    c.train.*field = k.get_string(name);
    check(c.train.*field);
  };
  return key;
}

// train.fault: a fault the tests inject, checked when read.
RunKey fault_key() {
  return checked_train_text("train.fault", &TrainSettings::fault, fault_syntax(),
                            std::string("a fault to inject, for tests: ") + fault_syntax() +
                                " (PHASE: forward, backward, optimizer, checkpoint or evaluation; link_down: the "
                                "rank's emulated host loses its link for S seconds; defaults rank=0, action=kill, "
                                "for=10, restart=0); \"\" (the default): none",
                            [](const std::string& text) { parse_fault(text); });
}

// train.device: its syntax is checked when read, the device at start-up.
RunKey device_key() {
  return checked_train_text(
      "train.device", &TrainSettings::device, device_syntax(),
      "where the rank's tensors live and its kernels run: auto (cuda when the libtorch in use has CUDA and a "
      "device is visible, else cpu), cpu, cuda (the device of the rank's local rank) or cuda:N",
      [](const std::string& text) { parse_device(text); });
}

// parallel.grad_wire: a wire format, or auto (the planner's choice under
// parallel.auto, none otherwise).
RunKey gradient_wire() {
  const std::string name = "parallel.grad_wire";
  static const char* kChoices = "none, bf16, int8, int4, powersgd:1, powersgd:2, powersgd:4, powersgd:8 or auto";
  const std::string help =
      "what data-parallel gradients travel in between hosts: none (fp32), bf16 (2x smaller), int8 (3.9x) or int4 "
      "(7.8x), inside a host fp32 (ZeRO 0-2); powersgd:R (R = 1, 2, 4, 8), each gradient matrix as a rank-R "
      "approximation (tens of times smaller; ZeRO 0-1); all with error feedback; auto: the planner's choice under "
      "parallel.auto, none otherwise";
  RunKey key = described<RunConfig>(name, TunableKind::string, kChoices, help);
  key.detail =
      "Compression applies only where data-parallel traffic crosses hosts: on one host, or when no data-parallel "
      "group spans hosts, it is a no-op, said once in the log. What each encoding drops is kept per rank (error "
      "feedback), added to the next step's gradient, and saved in checkpoints. powersgd:R approximates the "
      "average of each gradient matrix (every rank's, hosts' and a host's own) by rank R, sending two small "
      "matrices per step; vectors and matrices too small to gain go in fp32.";
  key.define = [=](Tunables& k, const RunConfig& d) {
    k.define_string(name, d.parallel.grad_wire_auto ? "auto" : ccl::grad_wire_name(d.layout.grad_wire), help);
  };
  key.read = [=](const Tunables& k, RunConfig& c) {
    const std::string& word = k.get_string(name);
    c.parallel.grad_wire_auto = word == "auto";
    c.layout.grad_wire = ccl::GradWire::none;
    if (c.parallel.grad_wire_auto) return;
    try {
      c.layout.grad_wire = ccl::parse_grad_wire(word);
    } catch (const Error&) {
      throw ConfigError(name, std::string("must be ") + kChoices + ", got '" + word + "'");
    }
  };
  return key;
}

// A key parallel.auto chooses when it is left at its default: `set` records
// whether a config file, the environment or the command line set it.
RunKey auto_unless_set(RunKey key, bool ParallelSettings::*set) {
  const auto read = key.read;
  const std::string name = key.name;
  key.read = [=](const Tunables& k, RunConfig& c) {
    read(k, c);
    c.parallel.*set = k.source(name) != TunableSource::defaults;
  };
  key.help += " (unset under parallel.auto: the planner's choice)";
  return key;
}

void add_model_keys(std::vector<RunKey>& keys) {
  using models::GptConfig;
  keys.push_back(integer("model.layers", in_model(&GptConfig::layers), any_int(), "transformer blocks"));
  keys.push_back(integer("model.hidden", in_model(&GptConfig::hidden), any_int(), "width of the residual stream"));
  keys.push_back(integer("model.heads", in_model(&GptConfig::heads), any_int(),
                         "attention heads (must divide model.hidden)"));
  keys.push_back(integer("model.ffn", in_model(&GptConfig::ffn), any_int(), "MLP width (0: 4 x model.hidden)"));
  keys.push_back(integer("model.seq_len", in_model(&GptConfig::seq_len), any_int(),
                         "tokens per sequence (the context length)"));
  keys.push_back(integer("model.vocab", in_model(&GptConfig::vocab), any_int(), "vocabulary size (the tokenizer's)"));
  keys.push_back(integer("model.vocab_pad", in_model(&GptConfig::vocab_pad), any_int(),
                         "the embedding's rows are vocab rounded up to a multiple of this"));
  keys.push_back(real("model.dropout", in_model(&GptConfig::dropout), any_real(),
                      "dropout probability (0 disables it)"));
  keys.push_back(real("model.init_std", in_model(&GptConfig::init_std), any_real(),
                      "standard deviation of the initial weights"));
  const Names<models::Activation> activations = {{"gelu", models::Activation::gelu},
                                                 {"gelu_tanh", models::Activation::gelu_tanh}};
  keys.push_back(followed_by(
      choice("model.activation", in_model(&GptConfig::activation), activations,
             "the MLP's nonlinearity: gelu (erf) or gelu_tanh (its tanh approximation, GPT-2's)"),
      [](RunConfig& c) { c.model.validate(); }));  // the last model.* key: the shape as a whole
}

// The order of the rows is the order of the checks: with several bad keys,
// the first one's error is the one reported.
void add_parallel_keys(std::vector<RunKey>& keys) {
  using P = ParallelSettings;
  keys.push_back(text("parallel.partition", in_parallel(&P::partition), Empty::allowed,
                      "how layers are cut into pipeline stages: uniform, parameters, type:REGEX or manual:N0,N1,..."));
  keys.push_back(boolean("parallel.auto", in_parallel(&P::automatic),
                         "let the planner choose dp, tp, pp, their placement, the schedule, the micro-batch and, where "
                         "left unset, the ZeRO stage, recomputation and gradient wire for the ranks started"));
  keys.push_back(text("parallel.cluster", in_parallel(&P::cluster), Empty::allowed,
                      "the cluster the run is on, a file from giant plan --calibrate or an earlier run's cluster.toml: "
                      "parallel.auto chooses on it, and ccl chooses its algorithms on its links unless ccl.model.* are "
                      "set (empty: under parallel.auto the cluster is measured at start-up and written to "
                      "<train.out_dir>/cluster.toml)"));
  keys.push_back(real("parallel.bucket_mb", in_parallel(&P::bucket_mb), positive(),
                      "data-parallel gradient bucket size in MiB (one allreduce each, overlapped with backward)"));
  keys.push_back(auto_unless_set(
      integer("parallel.zero", in_layout(&Layout::zero), one_of_range(0, kMaxZeroStage),
              "ZeRO stage over the dp ranks: 0 keeps everything on every rank, 1 shards the optimizer state, 2 "
              "also the gradients, 3 also the parameters (each layer gathered just before it runs)"),
      &ParallelSettings::zero_set));
  keys.push_back(integer("parallel.zero3_prefetch", in_parallel(&P::zero3_prefetch), not_negative(),
                         "ZeRO-3: layers whose parameter gather starts ahead of the one running"));
  keys.push_back(boolean("parallel.zero3_regather", in_parallel(&P::zero3_regather),
                         "ZeRO-3: gather a layer again for every micro-batch (false: keep it gathered through the "
                         "step's micro-batches, fewer gathers for more memory)"));
  keys.push_back(integer("parallel.dp", in_layout(&Layout::dp), at_least(1), "data-parallel replicas"));
  keys.push_back(integer("parallel.tp", in_layout(&Layout::tp), at_least(1), "tensor-parallel ranks per layer"));
  keys.push_back(integer("parallel.pp", in_layout(&Layout::pp), at_least(1), "pipeline stages"));
  keys.push_back(integer("parallel.virtual_stages", in_layout(&Layout::virtual_stages), at_least(1),
                         "layer chunks per pipeline rank (interleaved schedule)"));
  Names<Schedule> schedules;
  for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved})
    schedules.emplace_back(schedule_name(s), s);
  keys.push_back(choice("parallel.schedule", in_layout(&Layout::schedule), schedules,
                        "pipeline schedule: gpipe, 1f1b or interleaved"));
  keys.push_back(followed_by(gradient_wire(), [](RunConfig& c) {
    if (c.layout.grad_wire != ccl::GradWire::none && c.layout.zero == 3) {
      throw ConfigError("parallel.grad_wire",
                        "compresses data-parallel gradients at ZeRO stages 0-2; parallel.zero is 3 (use none or auto)");
    }
    if (ccl::low_rank_of(c.layout.grad_wire) > 0 && c.layout.zero == 2) {
      throw ConfigError("parallel.grad_wire", std::string(ccl::grad_wire_name(c.layout.grad_wire)) +
                                                  " needs whole gradients, kept at ZeRO stages 0-1; parallel.zero "
                                                  "is 2 (use int8 or int4 there)");
    }
  }));
}

void check_batch_split(RunConfig& c) {
  if (c.parallel.automatic) return;  // the planner chooses dp and the micro-batch (parallel keys come first)
  const Layout& l = c.layout;
  if (c.train.global_batch % (int64_t{l.dp} * l.micro_batch) != 0) {
    throw ConfigError("train.global_batch",
                      std::to_string(c.train.global_batch) + " is not divisible by parallel.dp x train.micro_batch = " +
                          std::to_string(l.dp) + " x " + std::to_string(l.micro_batch));
  }
}

void add_step_keys(std::vector<RunKey>& keys) {
  using T = TrainSettings;
  const Names<Recompute> recomputes = {{"none", Recompute::none},
                                                {"selective", Recompute::selective},
                                                {"full", Recompute::full}};
  keys.push_back(auto_unless_set(
      choice("train.recompute", in_layout(&Layout::recompute), recomputes,
             "activation recomputation: none, selective (the attention core is recomputed in backward) or full "
             "(each block keeps only its input and runs its forward again in backward)"),
      &ParallelSettings::recompute_set));
  keys.push_back(detailed(
      real("train.memory_limit_gb", in_train(&T::memory_limit_gb), not_negative_real("0: the device's", true),
           "memory a rank may use, in GiB (0: the host's physical memory shared by the ranks); a run predicted "
           "not to fit is refused before training, with what fits instead"),
      "The refusal comes before anything is built, with the prediction by kind and the cheapest change that "
      "fits: a higher `parallel.zero`, `train.recompute`, a smaller `train.micro_batch` or another tp x pp x dp "
      "split."));
  keys.push_back(detailed(
      integer("train.global_batch", in_train(&T::global_batch), at_least(1),
              "sequences per optimizer step, over all dp ranks"),
      "Gradients are accumulated over global_batch / (dp x micro_batch) micro-batches, which must divide; the "
      "order of samples depends only on `train.seed`."));
  keys.push_back(followed_by(integer("train.micro_batch", in_layout(&Layout::micro_batch), at_least(1),
                                     "sequences per micro-batch per dp rank"),
                             check_batch_split));
  keys.push_back(integer("train.steps", in_train(&T::steps), at_least(1), "optimizer steps"));
  keys.push_back(integer("train.eval_batches", in_train(&T::eval_batches), at_least(1),
                         "micro-batches per evaluation"));
  keys.push_back(device_key());
  keys.push_back(integer("train.threads", in_train(&T::threads), at_least(1), "intra-op threads per rank"));
  keys.push_back(integer("train.max_bad_steps", in_train(&T::max_bad_steps), at_least(1),
                         "stop after this many non-finite steps in a row"));
  keys.push_back(integer("train.warmup_steps", in_train(&T::warmup_steps), not_negative(),
                         "steps of linear warmup from 0"));
  keys.push_back(integer("train.eval_every", in_train(&T::eval_every), not_negative(),
                         "evaluate on the validation split every this many steps (0: only at the end)"));
  keys.push_back(integer("train.trace_steps", in_train(&T::trace_steps), not_negative(), "steps in the trace"));
  keys.push_back(integer("train.sample_tokens", in_train(&T::sample_tokens), not_negative(),
                         "tokens of text generated at the end (0: none)"));
  keys.push_back(integer("train.seed", in_train(&T::seed), not_negative(),
                         "seed of the weights and of the sample order"));
  keys.push_back(detailed(
      integer("train.retain_memory_mb", in_train(&T::retain_memory_mb), between(0, kMaxRetainMb),
              "freed host memory each rank keeps for reuse instead of returning it to the kernel "
              "(0: the C library's defaults; at most " + std::to_string(kMaxRetainMb) + ")"),
      "Blocks up to 32 MiB come from the heap and up to this much freed memory stays mapped. With the C "
      "library's defaults (`0`) every step unmaps and refaults its tensors; on the bench model that costs about "
      "30% of the step."));
}

void add_optimizer_and_output_keys(std::vector<RunKey>& keys) {
  using T = TrainSettings;
  keys.push_back(real("train.lr", in_train(&T::lr), positive(), "peak learning rate"));
  keys.push_back(followed_by(real("train.min_lr", in_train(&T::min_lr), checked_together("0 to train.lr"),
                                  "learning rate at the end of the cosine decay"),
                             [](RunConfig& c) {
                               if (!(c.train.min_lr >= 0 && c.train.min_lr <= c.train.lr)) {
                                 throw ConfigError("train.min_lr", "must be in [0, train.lr]");
                               }
                             }));
  keys.push_back(real("train.weight_decay", in_train(&T::weight_decay), not_negative_real(),
                      "AdamW decoupled weight decay (not on norms and biases)"));
  keys.push_back(real("train.grad_clip", in_train(&T::grad_clip), not_negative_real("0 disables clipping"),
                      "clip gradients to this global norm (0 disables)"));
  keys.push_back(real("train.beta1", in_train(&T::beta1), below_one(), "AdamW first-moment decay"));
  keys.push_back(real("train.beta2", in_train(&T::beta2), below_one(), "AdamW second-moment decay"));
  keys.push_back(real("train.sample_temperature", in_train(&T::sample_temperature), positive(),
                      "sampling temperature of the generated sample"));
  keys.push_back(text("train.out_dir", in_train(&T::out_dir), Empty::refused,
                      "where config.toml, metrics.jsonl, sample.txt, tensorboard/ and trace.json go"));
  keys.push_back(boolean("train.trace", in_train(&T::trace),
                         "write a Chrome trace of the first steps to out_dir/trace.json"));
  keys.push_back(boolean("train.tensorboard", in_train(&T::tensorboard),
                         "write TensorBoard curves to out_dir/tensorboard/ (rank 0)"));
  keys.push_back(text("train.sample_prompt", in_train(&T::sample_prompt), Empty::allowed,
                      "prompt of the generated sample"));
}

void add_precision_keys(std::vector<RunKey>& keys) {
  using T = TrainSettings;
  keys.push_back(compute_precision(
      "fp32, bf16, fp16, or auto: bf16 when this device's bf16 matrix products are at least 1.5x as fast as "
      "fp32, else fp32 (master weights and AdamW stay fp32)"));
  keys.push_back(followed_by(choice("train.grad_dtype", in_train(&T::grad_dtype), precision_names(),
                                    "dtype gradients accumulate over micro-batches and are averaged over dp in: "
                                    "fp32, or the compute precision"),
                             [](RunConfig& c) {
                               if (!c.train.precision_auto) check_grad_dtype(c.train);
                               if (c.layout.grad_wire != ccl::GradWire::none && c.train.grad_dtype != Precision::fp32) {
                                 throw ConfigError("train.grad_dtype",
                                                   std::string("must be fp32 with parallel.grad_wire = ") +
                                                       ccl::grad_wire_name(c.layout.grad_wire));
                               }
                             }));
  const Names<LossScaling> scalings = {
      {"auto", LossScaling::automatic}, {"dynamic", LossScaling::dynamic}, {"off", LossScaling::off}};
  keys.push_back(choice("train.loss_scaling", in_train(&T::loss_scaling), scalings,
                        "auto (dynamic for fp16, off otherwise), dynamic or off"));
  keys.push_back(real("train.loss_scale_initial", in_train(&T::loss_scale_initial), finite_at_least_one(),
                      "the dynamic loss scale's starting value"));
  keys.push_back(integer("train.loss_scale_window", in_train(&T::loss_scale_window), at_least(1),
                         "steps without overflow before the loss scale doubles"));
  keys.push_back(integer("train.loss_scale_hysteresis", in_train(&T::loss_scale_hysteresis), at_least(1),
                         "overflows (since the last growth) before the loss scale halves"));
}

void add_data_and_checkpoint_keys(std::vector<RunKey>& keys) {
  keys.push_back(text("data.path", in_data(&DataSettings::path), Empty::allowed,
                      "training data: a text file, or a .bin/.idx prefix written by giant data prepare (relative "
                      "to the working directory)"));
  keys.push_back(followed_by(texts("data.paths", in_data(&DataSettings::paths),
                                   "a weighted blend of .bin/.idx prefixes, Megatron's form [\"0.7\", \"books\", "
                                   "\"0.3\", \"web\"]; when set, data.path is not used"),
                             [](RunConfig& c) {
                               if (c.data.path.empty() && c.data.paths.empty()) {
                                 throw ConfigError("data.path", "must name a text file or a .bin/.idx prefix");
                               }
                             }));
  keys.push_back(text("data.tokenizer", in_data(&DataSettings::tokenizer), Empty::allowed,
                      "tokenizer: byte, gpt2:DIR (vocab.json + merges.txt) or sentencepiece:FILE.model"));
  keys.push_back(real("data.val_fraction", in_data(&DataSettings::val_fraction), any_real(),
                      "share of the tokens held out for validation: a text file's tail, a prefix's last whole "
                      "documents"));

  using C = CheckpointSettings;
  keys.push_back(followed_by(text("checkpoint.dir", in_checkpoint(&C::dir), Empty::allowed,
                                  "where checkpoints go (empty: train.out_dir/checkpoints)"),
                             [](RunConfig& c) {
                               if (c.checkpoint.dir.empty()) {
                                 c.checkpoint.dir = (std::filesystem::path(c.train.out_dir) / "checkpoints").string();
                               }
                             }));
  keys.push_back(integer("checkpoint.every", in_checkpoint(&C::every), not_negative("0: only at the end"),
                         "save a checkpoint every this many steps (0: only at the end)"));
  keys.push_back(integer("checkpoint.keep", in_checkpoint(&C::keep), at_least(1),
                         "newest checkpoints kept (older ones are removed once a newer one is complete)"));
  keys.push_back(boolean("checkpoint.async", in_checkpoint(&C::async),
                         "copy the state to memory at the step and write it from a background thread while "
                         "training goes on"));
  keys.push_back(integer("checkpoint.local_every", in_checkpoint(&C::local_every), not_negative("0: none"),
                         "also save a copy in checkpoint.local_dir every this many steps (0: none), so that a "
                         "restart loses at most these steps; only the newest copy is kept"));
  keys.push_back(followed_by(text("checkpoint.local_dir", in_checkpoint(&C::local_dir), Empty::allowed,
                                  "where checkpoint.local_every's copies go: a fast folder every rank sees "
                                  "(empty: one under /dev/shm named after checkpoint.dir); removed when the run "
                                  "finishes"),
                             [](RunConfig& c) {
                               if (c.checkpoint.local_dir.empty()) {
                                 c.checkpoint.local_dir = checkpoint::default_local_root(c.checkpoint.dir).string();
                               }
                             }));
  keys.push_back(text("train.resume", in_checkpoint(&C::resume), Empty::allowed,
                      "auto (the latest good checkpoint in checkpoint.dir, if any), \"\" (never) or a checkpoint "
                      "path"));
  keys.push_back(integer("train.restart", in_train(&TrainSettings::restart), not_negative(),
                         "which restart of a `giant launch --max-restarts` run this is (the launcher sets it)"));
  keys.push_back(fault_key());
  keys.push_back(text("train.progress_file", in_train(&TrainSettings::progress_file), Empty::allowed,
                      "a file rank 0 rewrites with each step it begins, so that `giant launch --max-restarts` "
                      "tells a failure that comes back at the same step (the launcher sets it); \"\": none"));
  // Under a second a busy machine's scheduling alone would fire it.
  const RealRule zero_or_a_second = {[](double v) { return v == 0 || (v >= 1 && std::isfinite(v)); },
                                     "must be 0 (automatic) or at least 1 second", true, "0 or >= 1"};
  keys.push_back(real("train.hang_timeout", in_train(&TrainSettings::hang_timeout), zero_or_a_second,
                      "seconds a rank may go without beginning a phase of a step (forward, backward, optimizer, "
                      "evaluation, checkpoint) before it reports where it is, with the ccl operations it waits on, "
                      "and exits with status 1 (0: ten times the slowest step so far, at least 300 s)"));
}

std::vector<RunKey> make_run_keys() {
  std::vector<RunKey> keys;
  add_model_keys(keys);
  add_parallel_keys(keys);
  add_step_keys(keys);
  add_optimizer_and_output_keys(keys);
  add_precision_keys(keys);
  add_data_and_checkpoint_keys(keys);
  return keys;
}

}  // namespace

const std::vector<RunKey>& run_keys() {
  static const std::vector<RunKey> keys = make_run_keys();  // immutable once built
  return keys;
}

}  // namespace giant::train
