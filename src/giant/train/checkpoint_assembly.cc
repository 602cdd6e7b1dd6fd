#include "giant/train/checkpoint_assembly.h"

#include "giant/base/timer.h"
#include "giant/base/units.h"
#include "giant/checkpoint/loader.h"
#include "giant/parallel/tensor_parallel/layers.h"
#include "giant/train/resume_check.h"
#include "giant/train/run_device.h"
#include "giant/train/run_report.h"

namespace giant::train {

HeldTensors held_tensors(const ModelState& state, const RunTopology& topology) {
  HeldTensors h;
  h.parameters = state.parameters();
  h.names = state.model.names;
  for (const auto& chunk : state.model.chunks) {
    for (const auto& [name, split] : parallel::tensor_parallel_splits(*chunk)) h.splits[name] = split;
  }
  h.updated = state.updated;
  const bool resident = !state.sync || state.sync->holds_whole_parameters();
  for (const auto& piece : state.pieces) {
    h.updated_source.push_back(piece.parameter);
    if (!piece.whole) h.updated_offset.push_back(piece.offset);
    if (!resident) h.owned_compute.push_back(piece.tensor);
  }
  h.separate_masters = state.masters != nullptr;
  h.optimizer = state.optimizer.get();
  h.tp_rank = topology.tp.rank;
  h.tp_size = topology.tp.size;
  h.dp_rank = topology.dp_rank();
  if (state.model.tied_copy) h.tied_copy = state.model.tied_index;
  return h;
}

checkpoint::Manifest manifest_at(const CheckpointedParts& parts, const StepCounters& counters) {
  const RunConfig& config = parts.config;
  checkpoint::Manifest m;
  m.model = config.model;
  m.tokenizer = config.data.tokenizer;
  m.run_keys = run_keys_of(config);
  m.step = counters.steps_done;
  m.consumed_samples = parts.batches.first_sample_of(counters.steps_done);
  m.layout = parts.checkpoints.layout();
  auto& t = m.train;
  t.optimizer_steps = parts.state.optimizer->steps_taken();
  if (parts.state.loss_scaler) {
    const auto state = parts.state.loss_scaler->state();
    t.loss_scaling = true;
    t.loss_scale = state.scale;
    t.loss_scale_good_steps = state.good_steps;
    t.loss_scale_hysteresis_left = state.hysteresis_left;
    t.loss_scale_overflows = state.overflows;
  }
  t.bad_steps_in_a_row = counters.bad_steps_in_a_row;
  t.skipped_steps = counters.skipped_steps;
  t.loss_scale_skips = counters.loss_scale_skips;
  return m;
}

void save_checkpoint(const CheckpointedParts& parts, const StepCounters& counters, RunCheckpoints::Tier tier) {
  if (parts.state.sync) parts.state.sync->wait_parameters();  // a ZeRO gather in flight writes the parameters
  std::vector<checkpoint::Blob> blobs = {
      generator_state_blob(parts.topology.world_rank(), run_device(parts.config.train))};
  if (parts.state.sync) {
    std::vector<uint8_t> feedback = parts.state.sync->wire_feedback();
    if (!feedback.empty()) blobs.push_back({wire_feedback_blob_name(parts.topology.world_rank()), std::move(feedback)});
  }
  parts.checkpoints.save(tier, manifest_at(parts, counters),
                         slices_to_save(held_tensors(parts.state, parts.topology)), blobs);
}

namespace {

// Puts back this rank's gradient-wire error feedback when the checkpoint
// holds one that fits; a note for the resume line otherwise.
std::string restore_wire_feedback(const CheckpointedParts& parts, const checkpoint::CheckpointLoader& loader) {
  parallel::GradientSync* sync = parts.state.sync.get();
  if (sync == nullptr || sync->wire_feedback().empty()) return "";  // nothing compressed in this run
  const auto saved = loader.read_blob(wire_feedback_blob_name(parts.topology.world_rank()));
  if (!saved) return "; no gradient wire state saved: error feedback starts at zero";
  try {
    sync->restore_wire_feedback(*saved);
    return "";
  } catch (const Error& e) {
    return std::string("; gradient wire state not restored (") + e.what() + "): error feedback starts at zero";
  }
}

}  // namespace

ResumePoint resume_from(const CheckpointedParts& parts, const std::filesystem::path& checkpoint_dir) {
  Stopwatch load_watch;
  ModelState& state = parts.state;
  const checkpoint::CheckpointLoader loader(checkpoint_dir);
  const checkpoint::Manifest& m = loader.manifest();
  const std::vector<std::string> changes = resume_notes(checkpoint_dir, m, parts.config);  // or refused
  const bool optimizer_state = m.has_optimizer_state();
  loader.load(slices_to_load(held_tensors(state, parts.topology), optimizer_state));
  ResumePoint point;
  point.start_step = m.step;
  point.from = checkpoint_dir;
  parts.batches.continue_from(m.step, m.consumed_samples);
  point.train = m.train;
  std::string notes;
  if (optimizer_state) {
    state.optimizer->restore_steps_taken(m.train.optimizer_steps);
  } else {
    notes += "; weights only: the optimizer starts afresh";
  }
  if (state.loss_scaler && m.train.loss_scaling) {
    state.loss_scaler->restore({m.train.loss_scale, m.train.loss_scale_good_steps,
                                m.train.loss_scale_hysteresis_left, m.train.loss_scale_overflows});
  }
  const checkpoint::SavedLayout layout = parts.checkpoints.layout();
  const auto generator =
      loader.read_blob(generator_blob_name(parts.topology.world_rank(), run_device(parts.config.train)));
  if (m.layout == layout && generator) {
    point.generator = generator;
  } else if (parts.config.model.dropout > 0) {
    notes += m.layout == layout ? "; saved on another device: dropout draws new masks"
                                : "; saved in another layout: dropout draws new masks";
  }
  notes += restore_wire_feedback(parts, loader);
  parts.progress.line("resuming from " + checkpoint_dir.string() + " at step " + std::to_string(m.step) +
                      " (saved at dp " + std::to_string(m.layout.dp) + " x pp " + std::to_string(m.layout.pp) +
                      " x tp " + std::to_string(m.layout.tp) + ", ZeRO " + std::to_string(m.layout.zero) + ", " +
                      m.layout.precision + notes + "; loaded in " + fixed(load_watch.seconds(), 2) + " s)");
  for (const auto& line : changes) parts.progress.line(line);
  return point;
}

}  // namespace giant::train
