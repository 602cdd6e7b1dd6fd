#include "giant/train/run_config.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include <toml++/toml.h>

#include "giant/base/edit_distance.h"
#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/utf8.h"

namespace giant::train {
namespace {

constexpr int64_t kMaxRetainMb = static_cast<int64_t>(kMaxRetainedBytes >> 20);  // 2047

std::string kind_name(TunableKind kind) {
  switch (kind) {
    case TunableKind::integer: return "an integer";
    case TunableKind::real: return "a number";
    case TunableKind::boolean: return "true or false";
    case TunableKind::string: return "a string";
    case TunableKind::bytes: return "a size (e.g. 25 or \"25MiB\")";
    case TunableKind::seconds: return "a duration (e.g. 30 or \"30s\")";
    case TunableKind::list: return "an array of strings";
  }
  return "a value";
}

std::string node_type_name(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  return out.str();
}

// How config.toml holds a string that is not valid UTF-8 (a POSIX path may
// be any bytes; a TOML string must be UTF-8): { percent_encoded = "..." }.
constexpr const char* kPercentEncoded = "percent_encoded";

// A string key's bytes from a TOML string, or from a { percent_encoded = "..." }
// table; nullopt for any other node.
std::optional<std::string> text_of(const std::string& key, const toml::node& node) {
  if (auto v = node.as_string()) return v->get();
  const toml::table* table = node.as_table();
  if (table == nullptr || table->size() != 1) return std::nullopt;
  const auto encoded = (*table)[kPercentEncoded].value<std::string>();
  if (!encoded) return std::nullopt;
  try {
    return percent_decode(*encoded);
  } catch (const Error& e) {
    throw ConfigError(key, std::string(kPercentEncoded) + ": " + e.what());
  }
}

toml::table percent_encoded_table(const std::string& bytes) {
  toml::table table{{kPercentEncoded, percent_encode_ill_formed(bytes)}};
  table.is_inline(true);
  return table;
}

// A string into config.toml: itself when it is valid UTF-8, else the table
// text_of reads back into the same bytes.
void insert_text(toml::table& table, const std::string& name, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    table.insert(name, bytes);
  } else {
    table.insert(name, percent_encoded_table(bytes));
  }
}

void push_text(toml::array& array, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    array.push_back(bytes);
  } else {
    array.push_back(percent_encoded_table(bytes));
  }
}

// The text Tunables::set parses, after checking the TOML type fits the key.
std::string value_text(const Tunables& keys, const std::string& key, const toml::node& node) {
  const TunableKind kind = keys.kind(key);
  auto wrong_type = [&] {
    return ConfigError(key, "expects " + kind_name(kind) + ", got a TOML " + node_type_name(node));
  };
  switch (kind) {
    case TunableKind::integer:
      if (auto v = node.as_integer()) return std::to_string(v->get());
      throw wrong_type();
    case TunableKind::real:
      if (auto v = node.as_integer()) return std::to_string(v->get());
      if (auto v = node.as_floating_point()) {
        std::ostringstream out;
        out.precision(17);
        out << v->get();
        return out.str();
      }
      throw wrong_type();
    case TunableKind::boolean:
      if (auto v = node.as_boolean()) return v->get() ? "true" : "false";
      throw wrong_type();
    case TunableKind::string:
      if (auto text = text_of(key, node)) return *text;
      throw wrong_type();
    case TunableKind::bytes:
    case TunableKind::seconds:
      if (auto v = node.as_string()) return v->get();
      if (auto v = node.as_integer()) return std::to_string(v->get());
      if (auto v = node.as_floating_point()) return std::to_string(v->get());
      throw wrong_type();
    case TunableKind::list:
      throw wrong_type();  // arrays go through set_value; a lone string is not a list
  }
  throw wrong_type();
}

std::string value_text_of_number(const toml::node& node) {
  if (auto v = node.as_integer()) return std::to_string(v->get());
  std::ostringstream out;
  out << node.as_floating_point()->get();  // 0.7 -> "0.7"
  return out.str();
}

// A TOML value into the key: arrays of strings for lists, value_text otherwise.
void set_value(Tunables& keys, const std::string& key, const toml::node& node, TunableSource source) {
  if (keys.kind(key) != TunableKind::list) {
    keys.set(key, value_text(keys, key, node), source);
    return;
  }
  const toml::array* array = node.as_array();
  if (array == nullptr) throw ConfigError(key, "expects an array of strings, got a TOML " + node_type_name(node));
  std::vector<std::string> items;
  for (const toml::node& item : *array) {
    if (auto text = text_of(key, item)) {
      items.push_back(*text);
    } else if (item.is_number()) {  // ["0.7", "books"] written as [0.7, "books"]
      items.push_back(value_text_of_number(item));
    } else {
      throw ConfigError(key, "expects an array of strings, got an item that is a TOML " + node_type_name(item));
    }
  }
  keys.set_list(key, items, source);
}

void require_known(const Tunables& keys, const std::string& key, const std::string& where) {
  if (!keys.has(key)) {
    throw ConfigError(key, "unknown key" + where + did_you_mean(key, keys.names()) +
                               "; giant train --print-config lists every key");
  }
}

void apply_table(Tunables& keys, const toml::table& table, const std::string& prefix,
                 const std::string& path) {
  for (const auto& [name, node] : table) {
    const std::string key = prefix.empty() ? std::string(name.str())
                                           : prefix + "." + std::string(name.str());
    const toml::table* section = node.as_table();
    if (section != nullptr && !keys.has(key)) {  // a section (a key's own table, { percent_encoded = ... }, is its value)
      apply_table(keys, *section, key, path);
      continue;
    }
    require_known(keys, key, " in " + path);
    set_value(keys, key, node, TunableSource::config);
  }
}

Precision precision_key(const Tunables& k, const std::string& key) {
  const std::string name = k.get_string(key);
  if (auto p = parse_precision(name)) return *p;
  throw ConfigError(key, "must be fp32, bf16 or fp16" + std::string(key == "train.precision" ? " (or auto)" : "") +
                             ", got '" + name + "'");
}

void read_precision_keys(const Tunables& k, TrainSettings& t) {
  t.precision_auto = k.get_string("train.precision") == "auto";
  t.precision = t.precision_auto ? Precision::fp32 : precision_key(k, "train.precision");
  t.grad_dtype = precision_key(k, "train.grad_dtype");
  if (!t.precision_auto) check_grad_dtype(t);
  const std::string scaling = k.get_string("train.loss_scaling");
  if (scaling == "auto") {
    t.loss_scaling = LossScaling::automatic;
  } else if (scaling == "dynamic") {
    t.loss_scaling = LossScaling::dynamic;
  } else if (scaling == "off") {
    t.loss_scaling = LossScaling::off;
  } else {
    throw ConfigError("train.loss_scaling", "must be auto, dynamic or off, got '" + scaling + "'");
  }
  t.loss_scale_initial = k.get_real("train.loss_scale_initial");
  t.loss_scale_window = k.get_int("train.loss_scale_window");
  t.loss_scale_hysteresis = k.get_int("train.loss_scale_hysteresis");
  if (!(t.loss_scale_initial >= 1 && std::isfinite(t.loss_scale_initial))) {
    throw ConfigError("train.loss_scale_initial", "must be a finite number of at least 1");
  }
  for (const char* key : {"train.loss_scale_window", "train.loss_scale_hysteresis"}) {
    if (k.get_int(key) < 1) throw ConfigError(key, "must be at least 1, got " + std::to_string(k.get_int(key)));
  }
}

}  // namespace

void check_grad_dtype(const TrainSettings& t) {
  if (t.grad_dtype != Precision::fp32 && t.grad_dtype != t.precision) {
    throw ConfigError("train.grad_dtype", std::string("must be fp32 or the compute precision (train.precision = ") +
                                              precision_name(t.precision) + "), got " + precision_name(t.grad_dtype));
  }
}

void define_run_keys(Tunables& k) {
  const models::GptConfig m;
  k.define_int("model.layers", m.layers, "transformer blocks");
  k.define_int("model.hidden", m.hidden, "width of the residual stream");
  k.define_int("model.heads", m.heads, "attention heads (must divide model.hidden)");
  k.define_int("model.ffn", m.ffn, "MLP width (0: 4 x model.hidden)");
  k.define_int("model.seq_len", m.seq_len, "tokens per sequence (the context length)");
  k.define_int("model.vocab", m.vocab, "vocabulary size (the tokenizer's)");
  k.define_int("model.vocab_pad", m.vocab_pad, "the embedding's rows are vocab rounded up to a multiple of this");
  k.define_real("model.dropout", m.dropout, "dropout probability (0 disables it)");
  k.define_real("model.init_std", m.init_std, "standard deviation of the initial weights");
  k.define_string("model.activation", models::activation_name(m.activation),
                  "the MLP's nonlinearity: gelu (erf) or gelu_tanh (its tanh approximation, GPT-2's)");

  k.define_int("parallel.dp", 1, "data-parallel replicas");
  k.define_int("parallel.tp", 1, "tensor-parallel ranks per layer");
  k.define_int("parallel.pp", 1, "pipeline stages");
  k.define_string("parallel.schedule", "1f1b", "pipeline schedule: gpipe, 1f1b or interleaved");
  k.define_int("parallel.virtual_stages", 1, "layer chunks per pipeline rank (interleaved schedule)");
  k.define_string("parallel.partition", "parameters", "how layers are cut into pipeline stages: uniform, parameters, type:REGEX or manual:N0,N1,...");
  k.define_bool("parallel.auto", false, "let the planner choose dp, tp and the micro-batch for the ranks started");
  k.define_string("parallel.cluster", "", "cluster file for parallel.auto (from giant plan --calibrate)");
  k.define_real("parallel.bucket_mb", 4, "data-parallel gradient bucket size in MiB (one allreduce each, overlapped with backward)");
  k.define_int("parallel.zero", 1,
               "ZeRO stage over the dp ranks: 0 keeps everything on every rank, 1 shards the optimizer state, "
               "2 also the gradients, 3 also the parameters (each layer gathered just before it runs)");
  k.define_int("parallel.zero3_prefetch", 1, "ZeRO-3: layers whose parameter gather starts ahead of the one running");
  k.define_bool("parallel.zero3_regather", true,
                "ZeRO-3: gather a layer again for every micro-batch (false: keep it gathered through the step's "
                "micro-batches, fewer gathers for more memory)");

  k.define_int("train.global_batch", 16, "sequences per optimizer step, over all dp ranks");
  k.define_int("train.micro_batch", 16, "sequences per micro-batch per dp rank");
  k.define_int("train.steps", 1000, "optimizer steps");
  k.define_real("train.lr", 2e-3, "peak learning rate");
  k.define_real("train.min_lr", 2e-4, "learning rate at the end of the cosine decay");
  k.define_int("train.warmup_steps", 50, "steps of linear warmup from 0");
  k.define_real("train.weight_decay", 0.1, "AdamW decoupled weight decay (not on norms and biases)");
  k.define_real("train.grad_clip", 1.0, "clip gradients to this global norm (0 disables)");
  k.define_real("train.beta1", 0.9, "AdamW first-moment decay");
  k.define_real("train.beta2", 0.95, "AdamW second-moment decay");
  k.define_int("train.seed", 1234, "seed of the weights and of the sample order");
  k.define_int("train.eval_every", 100, "evaluate on the validation split every this many steps (0: only at the end)");
  k.define_int("train.eval_batches", 8, "micro-batches per evaluation");
  k.define_int("train.threads", 2, "intra-op threads per rank");
  k.define_int("train.retain_memory_mb", 1024,
               "freed host memory each rank keeps for reuse instead of returning it to the kernel "
               "(0: the C library's defaults; at most " + std::to_string(kMaxRetainMb) + ")");
  k.define_int("train.max_bad_steps", 5, "stop after this many non-finite steps in a row");
  k.define_string("train.out_dir", "runs/latest",
                  "where config.toml, metrics.jsonl, sample.txt, tensorboard/ and trace.json go");
  k.define_bool("train.trace", false, "write a Chrome trace of the first steps to out_dir/trace.json");
  k.define_int("train.trace_steps", 3, "steps in the trace");
  k.define_bool("train.tensorboard", true, "write TensorBoard curves to out_dir/tensorboard/ (rank 0)");
  k.define_int("train.sample_tokens", 300, "tokens of text generated at the end (0: none)");
  k.define_string("train.sample_prompt", "And God said", "prompt of the generated sample");
  k.define_real("train.sample_temperature", 0.8, "sampling temperature of the generated sample");

  k.define_string("train.precision", "auto",
                  "fp32, bf16, fp16, or auto: bf16 when this device's bf16 matrix products are at least "
                  "1.5x as fast as fp32, else fp32 (master weights and AdamW stay fp32)");
  k.define_string("train.grad_dtype", "fp32",
                  "dtype gradients accumulate over micro-batches and are averaged over dp in: fp32, "
                  "or the compute precision");
  k.define_string("train.recompute", "none",
                  "activation recomputation: none, selective (the attention core is recomputed in backward) or "
                  "full (each block keeps only its input and runs its forward again in backward)");
  k.define_real("train.memory_limit_gb", 0,
                "memory a rank may use, in GiB (0: the device's); a run predicted not to fit is refused before "
                "training, with what fits instead");
  k.define_string("train.loss_scaling", "auto", "auto (dynamic for fp16, off otherwise), dynamic or off");
  k.define_real("train.loss_scale_initial", 65536, "the dynamic loss scale's starting value");
  k.define_int("train.loss_scale_window", 1000, "steps without overflow before the loss scale doubles");
  k.define_int("train.loss_scale_hysteresis", 2, "overflows (since the last growth) before the loss scale halves");

  k.define_string("data.path", "examples/data/kjv.txt",
                  "training data: a text file, or a .bin/.idx prefix written by giant data prepare "
                  "(relative to the working directory)");
  k.define_list("data.paths", {},
                "a weighted blend of .bin/.idx prefixes, Megatron's form [\"0.7\", \"books\", \"0.3\", \"web\"]; "
                "when set, data.path is not used");
  k.define_string("data.tokenizer", "byte", "tokenizer: byte, gpt2:DIR (vocab.json + merges.txt) or "
                  "sentencepiece:FILE.model");
  k.define_real("data.val_fraction", 0.05,
                "share of the tokens held out for validation: a text file's tail, a prefix's last whole documents");

  k.define_string("checkpoint.dir", "", "where checkpoints go (empty: train.out_dir/checkpoints)");
  k.define_int("checkpoint.every", 0, "save a checkpoint every this many steps (0: only at the end)");
  k.define_int("checkpoint.keep", 3, "newest checkpoints kept (older ones are removed once a newer one is complete)");
  k.define_bool("checkpoint.async", false,
                "copy the state to memory at the step and write it from a background thread while training goes on");
  k.define_string("train.resume", "auto",
                  "auto (the latest good checkpoint in checkpoint.dir, if any), \"\" (never) or a checkpoint path");
}

namespace {

void read_checkpoint_keys(const Tunables& k, RunConfig& c) {
  auto& s = c.checkpoint;
  s.dir = k.get_string("checkpoint.dir");
  if (s.dir.empty()) s.dir = (std::filesystem::path(c.train.out_dir) / "checkpoints").string();
  s.every = k.get_int("checkpoint.every");
  s.keep = k.get_int("checkpoint.keep");
  s.async = k.get_bool("checkpoint.async");
  s.resume = k.get_string("train.resume");
  if (s.every < 0) {
    throw ConfigError("checkpoint.every", "must not be negative (0: only at the end), got " + std::to_string(s.every));
  }
  if (s.keep < 1) throw ConfigError("checkpoint.keep", "must be at least 1, got " + std::to_string(s.keep));
}

}  // namespace

void apply_config_file(Tunables& keys, const std::string& path) {
  // toml++ reads a directory (or a FIFO, a device) as an empty document.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (std::filesystem::is_directory(status)) {
    throw ConfigError("", "config file '" + path + "' is a directory; giant train takes a TOML file, e.g. " +
                              "examples/configs/gpt-small.toml");
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw ConfigError("", "config file '" + path + "' is not a regular file; giant train takes a TOML file");
  }
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    throw ConfigError("", "config file '" + path + "': " + std::string(e.description()) +
                              " (at " + where.str() + ")");
  }
  apply_table(keys, table, "", path);
}

void apply_override(Tunables& keys, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("", "--set expects key=value, got '" + assignment + "'");
  }
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  require_known(keys, key, " in --set");
  try {
    toml::table parsed = toml::parse("value = " + text);
    set_value(keys, key, *parsed.get("value"), TunableSource::command_line);
  } catch (const toml::parse_error&) {
    // A bare word the shell stripped of its quotes (--set data.tokenizer="byte"),
    // or a size or duration with its unit (--set ccl.timeout=30s).
    const TunableKind kind = keys.kind(key);
    if (kind != TunableKind::string && kind != TunableKind::bytes && kind != TunableKind::seconds &&
        kind != TunableKind::list) {
      throw ConfigError(key, "expects " + kind_name(keys.kind(key)) + ", got '" + text + "'");
    }
    keys.set(key, text, TunableSource::command_line);
  }
}

RunConfig run_config_from(const Tunables& k) {
  RunConfig c;
  c.model.layers = k.get_int("model.layers");
  c.model.hidden = k.get_int("model.hidden");
  c.model.heads = k.get_int("model.heads");
  c.model.ffn = k.get_int("model.ffn");
  c.model.seq_len = k.get_int("model.seq_len");
  c.model.vocab = k.get_int("model.vocab");
  c.model.vocab_pad = k.get_int("model.vocab_pad");
  c.model.dropout = k.get_real("model.dropout");
  c.model.init_std = k.get_real("model.init_std");
  const std::string activation = k.get_string("model.activation");
  if (const auto a = models::activation_from_name(activation)) {
    c.model.activation = *a;
  } else {
    throw ConfigError("model.activation", "must be gelu or gelu_tanh, got '" + activation + "'");
  }
  c.model.validate();

  auto& p = c.parallel;
  p.dp = k.get_int("parallel.dp");
  p.tp = k.get_int("parallel.tp");
  p.pp = k.get_int("parallel.pp");
  p.schedule = k.get_string("parallel.schedule");
  p.virtual_stages = k.get_int("parallel.virtual_stages");
  p.partition = k.get_string("parallel.partition");
  p.automatic = k.get_bool("parallel.auto");
  p.cluster = k.get_string("parallel.cluster");
  p.bucket_mb = k.get_real("parallel.bucket_mb");
  if (!(p.bucket_mb > 0)) throw ConfigError("parallel.bucket_mb", "must be positive");
  p.zero = k.get_int("parallel.zero");
  if (p.zero < 0 || p.zero > 3) {
    throw ConfigError("parallel.zero", "must be 0, 1, 2 or 3, got " + std::to_string(p.zero));
  }
  p.zero3_prefetch = k.get_int("parallel.zero3_prefetch");
  if (p.zero3_prefetch < 0) {
    throw ConfigError("parallel.zero3_prefetch", "must not be negative, got " + std::to_string(p.zero3_prefetch));
  }
  p.zero3_regather = k.get_bool("parallel.zero3_regather");
  for (const char* key : {"parallel.dp", "parallel.tp", "parallel.pp", "parallel.virtual_stages"}) {
    if (k.get_int(key) < 1) {
      throw ConfigError(key, "must be at least 1, got " + std::to_string(k.get_int(key)));
    }
  }
  if (p.schedule != "gpipe" && p.schedule != "1f1b" && p.schedule != "interleaved") {
    throw ConfigError("parallel.schedule", "must be gpipe, 1f1b or interleaved, got '" + p.schedule + "'");
  }

  auto& t = c.train;
  t.global_batch = k.get_int("train.global_batch");
  t.micro_batch = k.get_int("train.micro_batch");
  t.steps = k.get_int("train.steps");
  t.lr = k.get_real("train.lr");
  t.min_lr = k.get_real("train.min_lr");
  t.warmup_steps = k.get_int("train.warmup_steps");
  t.weight_decay = k.get_real("train.weight_decay");
  t.grad_clip = k.get_real("train.grad_clip");
  t.beta1 = k.get_real("train.beta1");
  t.beta2 = k.get_real("train.beta2");
  t.seed = k.get_int("train.seed");
  t.eval_every = k.get_int("train.eval_every");
  t.eval_batches = k.get_int("train.eval_batches");
  t.threads = k.get_int("train.threads");
  t.retain_memory_mb = k.get_int("train.retain_memory_mb");
  const std::string recompute = k.get_string("train.recompute");
  if (recompute != "none" && recompute != "selective" && recompute != "full") {
    throw ConfigError("train.recompute", "must be none, selective or full, got '" + recompute + "'");
  }
  t.recompute = parse_recompute(recompute);
  t.memory_limit_gb = k.get_real("train.memory_limit_gb");
  if (!(t.memory_limit_gb >= 0)) {
    throw ConfigError("train.memory_limit_gb", "must not be negative (0: the device's), got " +
                                                   std::to_string(t.memory_limit_gb));
  }
  t.max_bad_steps = k.get_int("train.max_bad_steps");
  t.out_dir = k.get_string("train.out_dir");
  t.trace = k.get_bool("train.trace");
  t.trace_steps = k.get_int("train.trace_steps");
  t.tensorboard = k.get_bool("train.tensorboard");
  t.sample_tokens = k.get_int("train.sample_tokens");
  t.sample_prompt = k.get_string("train.sample_prompt");
  t.sample_temperature = k.get_real("train.sample_temperature");
  for (const char* key : {"train.global_batch", "train.micro_batch", "train.steps",
                          "train.eval_batches", "train.threads", "train.max_bad_steps"}) {
    if (k.get_int(key) < 1) {
      throw ConfigError(key, "must be at least 1, got " + std::to_string(k.get_int(key)));
    }
  }
  for (const char* key : {"train.warmup_steps", "train.eval_every", "train.trace_steps",
                          "train.sample_tokens", "train.seed", "train.retain_memory_mb"}) {
    if (k.get_int(key) < 0) {
      throw ConfigError(key, "must not be negative, got " + std::to_string(k.get_int(key)));
    }
  }
  if (t.retain_memory_mb > kMaxRetainMb) {
    throw ConfigError("train.retain_memory_mb", "must be at most " + std::to_string(kMaxRetainMb) + ", got " +
                                                    std::to_string(t.retain_memory_mb));
  }
  if (t.global_batch % (p.dp * t.micro_batch) != 0) {
    throw ConfigError("train.global_batch",
                      std::to_string(t.global_batch) + " is not divisible by parallel.dp x train.micro_batch = " +
                          std::to_string(p.dp) + " x " + std::to_string(t.micro_batch));
  }
  if (!(t.lr > 0)) throw ConfigError("train.lr", "must be positive");
  if (!(t.min_lr >= 0 && t.min_lr <= t.lr)) throw ConfigError("train.min_lr", "must be in [0, train.lr]");
  if (!(t.weight_decay >= 0)) throw ConfigError("train.weight_decay", "must not be negative");
  if (!(t.grad_clip >= 0)) throw ConfigError("train.grad_clip", "must not be negative (0 disables clipping)");
  if (!(t.beta1 >= 0 && t.beta1 < 1)) throw ConfigError("train.beta1", "must be in [0, 1)");
  if (!(t.beta2 >= 0 && t.beta2 < 1)) throw ConfigError("train.beta2", "must be in [0, 1)");
  if (!(t.sample_temperature > 0)) throw ConfigError("train.sample_temperature", "must be positive");
  if (t.out_dir.empty()) throw ConfigError("train.out_dir", "must not be empty");
  read_precision_keys(k, t);

  c.data.path = k.get_string("data.path");
  c.data.paths = k.get_list("data.paths");
  c.data.tokenizer = k.get_string("data.tokenizer");
  c.data.val_fraction = k.get_real("data.val_fraction");
  if (c.data.path.empty() && c.data.paths.empty()) {
    throw ConfigError("data.path", "must name a text file or a .bin/.idx prefix");
  }
  read_checkpoint_keys(k, c);
  return c;
}

std::string run_config_toml(const Tunables& keys) {
  toml::table root;
  for (const std::string& key : keys.names()) {
    const auto dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    if (!root.contains(section)) {
      root.insert(section, toml::table{});
    }
    toml::table& table = *root.get_as<toml::table>(section);
    switch (keys.kind(key)) {
      case TunableKind::integer:
      case TunableKind::bytes: table.insert(name, keys.get_int(key)); break;
      case TunableKind::real:
      case TunableKind::seconds: table.insert(name, keys.get_real(key)); break;
      case TunableKind::boolean: table.insert(name, keys.get_bool(key)); break;
      case TunableKind::string: insert_text(table, name, keys.get_string(key)); break;
      case TunableKind::list: {
        toml::array items;
        for (const std::string& item : keys.get_list(key)) push_text(items, item);
        table.insert(name, std::move(items));
        break;
      }
    }
  }
  std::ostringstream out;
  out << "# The effective config of a giant train run, every key: giant train FILE reads it back.\n"
      << "# A string that is not UTF-8 is written { " << kPercentEncoded
      << " = \"...\" }: '%' and each ill-formed byte as %XX.\n"
      << root << '\n';
  return out.str();
}

}  // namespace giant::train
