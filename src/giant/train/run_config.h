// The run's configuration: the model.*, parallel.*, train.*, data.* and
// checkpoint.* keys.
//
// Each key is declared once, in the key table (run_keys.cc): its name, the
// field below it binds to, the values it accepts and its help. A key's
// default is its field's initial value here, which the table reads, so the
// two cannot disagree. Values come from built-in defaults < CONFIG.toml <
// GIANT_* environment < --set key=value (giant::Tunables). Unknown keys and
// wrong types are ConfigErrors naming the key; cross-key checks run before
// any work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "giant/base/precision.h"
#include "giant/base/tunables.h"
#include "giant/layout/layout.h"
#include "giant/models/gpt_config.h"
#include "giant/planner/cluster_spec.h"
#include "giant/planner/memory_model.h"

namespace giant::train {

// parallel.*'s other keys: dp, tp, pp, the schedule, virtual stages and the
// ZeRO stage are the run's Layout (RunConfig::layout).
struct ParallelSettings {
  std::string partition = "parameters";
  bool automatic = false;
  std::string cluster;  // the cluster file: parallel.auto chooses on it, ccl costs its links
  // The cluster the run is on, when known: read from parallel.cluster, or
  // measured under parallel.auto (auto_layout.h). The axis groups' ccl then
  // chooses algorithms on its links, unless ccl.model.* were set by hand.
  std::optional<planner::ClusterSpec> known_cluster;
  bool ccl_model_set = false;
  // The engines' defaults are stated once, in the planner's model of them.
  double bucket_mb = planner::ZeroEngine{}.bucket_bytes / (1 << 20);
  int64_t zero3_prefetch = planner::ZeroEngine{}.zero3_prefetch;
  bool zero3_regather = planner::ZeroEngine{}.zero3_regather;
  // parallel.grad_wire = auto: the planner chooses it under parallel.auto
  // (RunConfig::layout.grad_wire stays none otherwise).
  bool grad_wire_auto = true;
  // parallel.zero and train.recompute were set (not defaults): parallel.auto
  // keeps them; otherwise it chooses them.
  bool zero_set = false;
  bool recompute_set = false;
};

// How fp16 keeps small gradients from flushing to zero: the loss is scaled
// before backward and the gradients unscaled before the update.
enum class LossScaling { automatic, dynamic, off };  // automatic: dynamic for fp16, else off

struct TrainSettings {
  int64_t global_batch = 16, steps = 1000;  // train.micro_batch: RunConfig::layout
  double lr = 2e-3, min_lr = 2e-4;
  int64_t warmup_steps = 50;
  double weight_decay = 0.1, grad_clip = 1.0, beta1 = 0.9, beta2 = 0.95;
  int64_t seed = 1234, eval_every = 100, eval_batches = 8, threads = 2;
  int64_t max_bad_steps = 5;
  int64_t retain_memory_mb = 1024;
  std::string out_dir = "runs/latest";
  bool trace = false;
  int64_t trace_steps = 3;
  bool tensorboard = true;
  int64_t sample_tokens = 300;
  std::string sample_prompt = "And God said";
  double sample_temperature = 0.8;
  // train.precision: the dtype matrix products and activations compute in.
  // `auto` (precision_auto) is resolved at start-up by resolve_precision().
  Precision precision = Precision::fp32;
  bool precision_auto = true;
  Precision grad_dtype = Precision::fp32;  // gradient accumulation and the dp reduction
  double memory_limit_gb = 0;  // 0: the host's physical memory shared by the ranks
  LossScaling loss_scaling = LossScaling::automatic;
  double loss_scale_initial = 65536;
  int64_t loss_scale_window = 1000, loss_scale_hysteresis = 2;
  // train.fault: a fault to inject (fault_injection.h); empty: none.
  // train.restart: which restart of a `giant launch --max-restarts` run this is.
  std::string fault;
  int64_t restart = 0;
  // train.hang_timeout: seconds without a step's phase beginning before the
  // rank reports where it is and exits (hang_watchdog.h); 0: automatic.
  double hang_timeout = 0;
  // train.progress_file: a file world rank 0 rewrites with each step it
  // begins (giant launch --max-restarts sets it); empty: none.
  std::string progress_file;
  // train.device: auto, cpu, cuda or cuda:N; "cpu" or "cuda:N" once
  // resolve_device (run_device.h) has settled it.
  std::string device = "auto";

  // Whether the run scales its loss dynamically (after `auto` is resolved).
  bool dynamic_loss_scaling() const {
    return loss_scaling == LossScaling::dynamic ||
           (loss_scaling == LossScaling::automatic && precision == Precision::fp16);
  }
};

struct DataSettings {
  std::string path = "examples/data/kjv.txt";
  std::vector<std::string> paths;  // data.paths: ["weight", "prefix", ...]
  std::string tokenizer = "byte";
  double val_fraction = 0.05;
};

// checkpoint.* and train.resume.
struct CheckpointSettings {
  std::string dir;     // resolved: train.out_dir/checkpoints when the key is empty
  int64_t every = 0;   // steps between saves; 0: only at the end
  int64_t keep = 3;    // newest checkpoints kept
  bool async = false;  // written by a background thread while training goes on
  // The local tier: a copy every local_every steps (0: none) in local_dir
  // (resolved: a folder under /dev/shm named after dir when the key is
  // empty), only the newest kept, removed when the run finishes.
  int64_t local_every = 0;
  std::string local_dir;
  std::string resume = "auto";  // "auto", "" (never) or a checkpoint path
};

// giant train's defaults for its layout: one rank, micro-batches of 16
// sequences, ZeRO stage 1 (with dp = 1 it changes nothing).
inline Layout default_run_layout() {
  Layout layout;
  layout.micro_batch = 16;
  layout.zero = 1;
  return layout;
}

struct RunConfig {
  models::GptConfig model;
  // The one statement of the run's layout: parallel.dp, .tp, .pp,
  // .schedule, .virtual_stages, .zero, train.micro_batch and
  // train.recompute bind to it; ranks are placed as kTrainPlacement. As
  // written: the schedule and virtual stages are kept when pp = 1 (see
  // planner_layout for the planner's reading).
  Layout layout = default_run_layout();
  ParallelSettings parallel;
  TrainSettings train;
  DataSettings data;
  CheckpointSettings checkpoint;
};

// ConfigError naming train.grad_dtype unless it is fp32 or train.precision.
void check_grad_dtype(const TrainSettings& train);

// Defines every run key (the key table's) with its default.
void define_run_keys(Tunables& keys);

// Applies a TOML file (source: config). Errors name the file and the key; a
// directory or another file that is not a regular one is a ConfigError.
void apply_config_file(Tunables& keys, const std::string& path);
// Applies one "key=value", the value read as a TOML value (source: command line).
void apply_override(Tunables& keys, const std::string& assignment);

// Reads the keys, each checked against the values its table entry allows,
// then checks them together (ConfigError naming the key).
RunConfig run_config_from(const Tunables& keys);

// The effective configuration as a TOML document that apply_config_file
// reads back byte for byte: a string that is not valid UTF-8 (TOML's strings
// must be) is written { percent_encoded = "..." }, which any string key (and
// data.paths' items) reads too.
std::string run_config_toml(const Tunables& keys);

}  // namespace giant::train
