#include "giant/train/memory_check.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/planner/model_layout.h"
#include "giant/train/run_device.h"

namespace giant::train {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GiB", bytes / kGiB);
  return text;
}

double predicted_bytes(const RunConfig& c) {
  return planner::memory_per_device(planner_model(c), planner_layout(c), planner_precision(c), planner_engine(c))
      .total();
}

// Whether the trainer could run the changed config on the same ranks (the
// planner's rules, and the vocabulary split over tp).
bool runnable(const RunConfig& c, int world_size) {
  if (c.model.padded_vocab() % c.layout.tp != 0) return false;
  return planner::why_invalid(planner_layout(c), planner_model(c), world_size).empty();
}

struct Candidate {
  std::string key, setting;
  std::function<void(RunConfig&)> apply;
};

std::vector<Candidate> candidates(const RunConfig& c, int world_size) {
  std::vector<Candidate> out;
  const Layout& now = c.layout;
  if (now.dp > 1)
    for (int zero = now.zero + 1; zero <= kMaxZeroStage; ++zero)
      out.push_back({"parallel.zero", "parallel.zero = " + std::to_string(zero),
                     [zero](RunConfig& r) { r.layout.zero = zero; }});
  for (Recompute r : {Recompute::selective, Recompute::full})
    if (static_cast<int>(r) > static_cast<int>(now.recompute))
      out.push_back({"train.recompute", std::string("train.recompute = \"") + recompute_name(r) + "\"",
                     [r](RunConfig& x) { x.layout.recompute = r; }});
  for (int mb = now.micro_batch - 1; mb >= 1; --mb)
    out.push_back({"train.micro_batch", "train.micro_batch = " + std::to_string(mb),
                   [mb](RunConfig& r) { r.layout.micro_batch = mb; }});
  // Other splits of the same ranks, the most data parallel first.
  for (int dp = world_size; dp >= 1; --dp) {
    if (world_size % dp != 0) continue;
    for (int tp = 1; tp <= world_size / dp; ++tp) {
      if ((world_size / dp) % tp != 0) continue;
      const int pp = world_size / dp / tp;
      if (dp == now.dp && tp == now.tp && pp == now.pp) continue;
      char setting[128];
      std::snprintf(setting, sizeof setting, "parallel.tp = %d, parallel.pp = %d, parallel.dp = %d", tp, pp, dp);
      out.push_back({tp != now.tp ? "parallel.tp" : "parallel.pp", setting, [dp, tp, pp](RunConfig& r) {
                       r.layout.dp = dp, r.layout.tp = tp, r.layout.pp = pp;
                     }});
    }
  }
  out.push_back({"train.recompute",
                 std::string(now.dp > 1 ? "parallel.zero = 3, " : "") +
                     "train.recompute = \"full\", train.micro_batch = 1",
                 [](RunConfig& r) {
                   if (r.layout.dp > 1) r.layout.zero = kMaxZeroStage;
                   r.layout.recompute = Recompute::full;
                   r.layout.micro_batch = 1;
                 }});
  return out;
}

constexpr const char* kModelSizeKeys[] = {"model.seq_len", "model.hidden", "model.layers"};

int64_t& model_size(models::GptConfig& model, const std::string& key) {
  if (key == "model.seq_len") return model.seq_len;
  if (key == "model.hidden") return model.hidden;
  return model.layers;
}

// Of the keys that size the model, the one whose change saves the most
// memory: back to its default when it is above it (what the user made
// large), else halved. The first to change when nothing else fits.
std::string costliest_model_key(const RunConfig& c) {
  std::string costliest = kModelSizeKeys[0];
  double least = predicted_bytes(c);
  for (const char* key : kModelSizeKeys) {
    models::GptConfig defaults;
    RunConfig smaller = c;
    int64_t& value = model_size(smaller.model, key);
    const int64_t default_value = model_size(defaults, key);
    value = value > default_value ? default_value : value / 2;  // a formula: hidden need not divide by heads here
    if (value < 1) continue;
    const double bytes = predicted_bytes(smaller);
    if (bytes < least) least = bytes, costliest = key;
  }
  return costliest;
}

// "model.hidden or model.layers": the size keys other than `key`.
std::string other_model_keys(const std::string& key) {
  std::vector<std::string> others;
  for (const char* k : kModelSizeKeys)
    if (key != k) others.push_back(k);
  return others[0] + " or " + others[1];
}

}  // namespace

planner::ModelSpec planner_model(const RunConfig& c) {
  planner::ModelSpec model;
  model.name = "giant train";
  model.layers = c.model.layers;
  model.hidden = c.model.hidden;
  model.heads = c.model.heads;
  model.ffn = c.model.ffn;
  model.seq_len = c.model.seq_len;
  model.vocab = c.model.padded_vocab();
  model.global_batch = c.train.global_batch;
  return model;
}

Layout planner_layout(const RunConfig& c) {
  Layout l = c.layout;
  if (l.pp == 1) l.schedule = Schedule::one_f_one_b;  // no pipeline: the schedule means nothing
  if (l.schedule != Schedule::interleaved) l.virtual_stages = 1;
  return l;
}

RunPrecision planner_precision(const RunConfig& c) {
  return RunPrecision{c.train.precision, c.train.grad_dtype};
}

planner::ZeroEngine planner_engine(const RunConfig& c) {
  planner::ZeroEngine engine;
  engine.bucket_bytes = c.parallel.bucket_mb * 1024 * 1024;
  engine.zero3_prefetch = static_cast<int>(c.parallel.zero3_prefetch);
  engine.zero3_regather = c.parallel.zero3_regather;
  return engine;
}

MemoryCheck predict_rank_memory(const RunConfig& c, int world_size) {
  MemoryCheck check;
  check.predicted =
      planner::memory_per_device(planner_model(c), planner_layout(c), planner_precision(c), planner_engine(c));
  const DeviceSetting device = parse_device(c.train.device);
  if (c.train.memory_limit_gb > 0) {
    check.limit_bytes = c.train.memory_limit_gb * kGiB;
    check.limit_source = "train.memory_limit_gb";
  } else if (device.kind == DeviceSetting::Kind::cuda && device.index >= 0) {
    check.limit_bytes = cuda_device_info(device.index).memory_bytes;  // each rank has its own device
    check.limit_source = c.train.device + "'s " + gib(check.limit_bytes);
  } else {
    const double host = static_cast<double>(physical_memory_bytes());
    check.limit_bytes = host > 0 ? host / std::max(1, world_size) : 1e300;
    check.limit_source = "the host's " + gib(host) + " shared by " + std::to_string(world_size) + " rank(s)";
  }
  return check;
}

MemorySuggestion suggest_fitting_change(const RunConfig& c, int world_size, double limit_bytes) {
  for (const Candidate& candidate : candidates(c, world_size)) {
    RunConfig changed = c;
    candidate.apply(changed);
    if (changed.train.global_batch % (int64_t{changed.layout.dp} * changed.layout.micro_batch) != 0) continue;
    if (!runnable(changed, world_size)) continue;
    const double bytes = predicted_bytes(changed);
    if (bytes <= limit_bytes) return {candidate.key, candidate.setting, bytes};
  }
  return {};
}

void check_memory_fits(const RunConfig& c, int world_size) {
  const MemoryCheck check = predict_rank_memory(c, world_size);
  if (check.fits()) return;
  const planner::MemoryBreakdown& m = check.predicted;
  std::string message = "the planner predicts " + gib(m.total()) + " per rank (model states " +
                        gib(m.model_states) + ", activations " + gib(m.activations) + ", logits " + gib(m.logits) +
                        ", communication buffers " + gib(m.comm_buffers) + ") but a rank may use " +
                        gib(check.limit_bytes) + " (" + check.limit_source + ")";
  const bool limit_set = c.train.memory_limit_gb > 0;
  const std::string or_raise_limit = limit_set ? ", or raise train.memory_limit_gb" : "";
  const MemorySuggestion suggestion = suggest_fitting_change(c, world_size, check.limit_bytes);
  std::string key_to_change = suggestion.key;
  if (!suggestion.setting.empty()) {
    message += "; the planner suggests " + suggestion.setting + " (" + gib(suggestion.bytes) + " per rank)" +
               or_raise_limit + ".";
  } else {
    key_to_change = costliest_model_key(c);
    message += ". No change of ZeRO stage, recomputation, micro-batch or tp/pp split fits: to fit, make the "
               "model smaller (" + key_to_change + " first, or " + other_model_keys(key_to_change) +
               ") or run on more ranks" + or_raise_limit + ".";
  }
  throw ConfigError(limit_set ? "train.memory_limit_gb" : key_to_change, message);
}

}  // namespace giant::train
