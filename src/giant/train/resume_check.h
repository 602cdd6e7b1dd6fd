// What a run resuming from a checkpoint may change, and what it is told.
//
// A checkpoint records the keys of the run that saved it (Manifest::run_keys,
// paths made absolute). Those that give its weights and its samples their
// meaning (model.*, data.tokenizer, data.path, data.paths,
// data.val_fraction) must not change: a checkpoint of another model,
// tokenizer or data is refused naming each key that differs, with both
// values, as Megatron's checkpoint-argument check does. Those that steer
// training from the checkpoint's step on (the optimizer's, the schedule's,
// the batch, the sample order, dropout) may change: the resume lists each
// change, which then applies. Layout keys (parallel.*, train.precision,
// train.micro_batch) are neither: a checkpoint loads into any layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/checkpoint/manifest.h"
#include "giant/train/run_config.h"

namespace giant::train {

// The keys a checkpoint of this run records: key -> the value as JSON text.
std::map<std::string, std::string> run_keys_of(const RunConfig& config);

// A key whose value differs between a checkpoint and this run (JSON text).
struct KeyChange {
  std::string key, saved, now;
};

// The model, tokenizer and data keys that differ, one line each
// ("data.path: \"/a.txt\" in the checkpoint, \"/b.txt\" in this run");
// empty when they are the same. Keys a checkpoint does not record (an
// older or imported one) are not compared, except model.*, which every
// manifest holds.
std::vector<std::string> identity_differences(const checkpoint::Manifest& saved, const RunConfig& run);

// The ConfigError (exit 2) refusing `checkpoint` for those differences.
ConfigError another_run_error(const std::filesystem::path& checkpoint, const std::vector<std::string>& differences);

// The training keys changed since the checkpoint, in key order.
std::vector<KeyChange> training_changes(const checkpoint::Manifest& saved, const RunConfig& run);

// What a run resuming from `checkpoint` prints before it trains: the keys
// changed since (they apply from its step on), or nothing. ConfigError
// naming train.steps when the checkpoint is beyond train.steps, or at it
// with keys changed that would then never apply.
std::vector<std::string> resume_notes(const std::filesystem::path& checkpoint, const checkpoint::Manifest& saved,
                                      const RunConfig& run);

// The line of a run resumed at its last step: nothing left to train, and
// what to change to train on.
std::string nothing_left_to_train(const std::filesystem::path& checkpoint, int64_t steps);

}  // namespace giant::train
