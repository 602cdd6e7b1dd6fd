#include "giant/train/resume_check.h"

#include <algorithm>
#include <system_error>

#include <nlohmann/json.hpp>

namespace giant::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Of the recorded keys, those that name the run (with model.*, which the
// manifest's model holds); the rest (run_keys_of) steer training from the
// checkpoint's step on, as model.dropout does.
constexpr const char* kIdentityKeys[] = {"data.path", "data.paths", "data.tokenizer", "data.val_fraction"};

bool is_identity_key(const std::string& key) {
  return std::find(std::begin(kIdentityKeys), std::end(kIdentityKeys), key) != std::end(kIdentityKeys);
}

// JSON text; bytes that are not UTF-8 (a path may hold them) become U+FFFD.
std::string json_text(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The same file however it was named: absolute, symbolic links resolved
// as far as the path exists (data is read relative to the working folder).
std::string absolute_path(const std::string& path) {
  std::error_code error;
  const fs::path whole = fs::absolute(path, error);
  if (error) return path;
  const fs::path canonical = fs::weakly_canonical(whole, error);
  return (error ? whole.lexically_normal() : canonical).string();
}

// "gpt2:DIR" and "sentencepiece:FILE" with the path made absolute; "byte" as it is.
std::string absolute_tokenizer(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon + 1 == spec.size()) return spec;
  return spec.substr(0, colon + 1) + absolute_path(spec.substr(colon + 1));
}

std::string key_list(const std::vector<KeyChange>& changes) {
  std::string list;
  for (const auto& c : changes) list += (list.empty() ? "" : ", ") + c.key + " " + c.saved + " -> " + c.now;
  return list;
}

}  // namespace

std::map<std::string, std::string> run_keys_of(const RunConfig& c) {
  const auto& t = c.train;
  Json paths = Json::array();  // Megatron's ["weight", "prefix", ...]: the prefixes made absolute
  for (size_t i = 0; i < c.data.paths.size(); ++i) {
    paths.push_back(i % 2 == 1 ? absolute_path(c.data.paths[i]) : c.data.paths[i]);
  }
  const std::map<std::string, Json> values = {
      {"data.path", c.data.paths.empty() ? Json(absolute_path(c.data.path)) : Json()},  // null: data.paths is read
      {"data.paths", paths},
      {"data.tokenizer", absolute_tokenizer(c.data.tokenizer)},
      {"data.val_fraction", c.data.val_fraction},
      {"train.beta1", t.beta1},
      {"train.beta2", t.beta2},
      {"train.global_batch", t.global_batch},
      {"train.grad_clip", t.grad_clip},
      {"train.loss_scale_hysteresis", t.loss_scale_hysteresis},
      {"train.loss_scale_window", t.loss_scale_window},
      {"train.lr", t.lr},
      {"train.min_lr", t.min_lr},
      {"train.seed", t.seed},
      {"train.steps", t.steps},
      {"train.warmup_steps", t.warmup_steps},
      {"train.weight_decay", t.weight_decay}};
  std::map<std::string, std::string> keys;
  for (const auto& [key, value] : values) keys[key] = json_text(value);
  return keys;
}

std::vector<std::string> identity_differences(const checkpoint::Manifest& saved, const RunConfig& run) {
  std::vector<std::string> lines = checkpoint::model_differences(saved.model, run.model);
  const auto now = run_keys_of(run);
  for (const char* key : kIdentityKeys) {
    const auto found = saved.run_keys.find(key);
    if (found == saved.run_keys.end() || found->second == now.at(key)) continue;
    lines.push_back(std::string(key) + ": " + found->second + " in the checkpoint, " + now.at(key) + " in this run");
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

ConfigError another_run_error(const fs::path& checkpoint, const std::vector<std::string>& differences) {
  std::string text = "the checkpoint " + checkpoint.string() +
                     " was saved by another run: its model, tokenizer or data differ from this run's:";
  for (const auto& line : differences) text += "\n  " + line;
  text +=
      "\nTo start a new run, give it its own train.out_dir (or checkpoint.dir); to continue that one, set these "
      "keys as the checkpoint has them.";
  return ConfigError("train.resume", text);
}

std::vector<KeyChange> training_changes(const checkpoint::Manifest& saved, const RunConfig& run) {
  std::vector<KeyChange> changes;
  if (saved.model.dropout != run.model.dropout) {
    changes.push_back({"model.dropout", json_text(saved.model.dropout), json_text(run.model.dropout)});
  }
  for (const auto& [key, value] : run_keys_of(run)) {  // in key order
    if (is_identity_key(key)) continue;
    const auto found = saved.run_keys.find(key);
    if (found != saved.run_keys.end() && found->second != value) changes.push_back({key, found->second, value});
  }
  return changes;
}

std::vector<std::string> resume_notes(const fs::path& checkpoint, const checkpoint::Manifest& saved,
                                      const RunConfig& run) {
  const int64_t steps = run.train.steps;
  const std::string at = "the checkpoint " + checkpoint.string() + " is at step " + std::to_string(saved.step);
  const std::string start_anew = "or give a new run its own train.out_dir (or set train.resume=\"\")";
  if (saved.step > steps) {
    throw ConfigError("train.steps", "is " + std::to_string(steps) + " but " + at + ": raise train.steps above " +
                                         std::to_string(saved.step) + " to train on, " + start_anew);
  }
  std::vector<KeyChange> changes = training_changes(saved, run);
  if (saved.step == steps) {
    // Ending the run at this step is what a lower train.steps asks for.
    changes.erase(std::remove_if(changes.begin(), changes.end(), [](const KeyChange& c) { return c.key == "train.steps"; }),
                  changes.end());
    if (changes.empty()) return {};
    throw ConfigError("train.steps", "is " + std::to_string(steps) + " and " + at +
                                         ", so nothing is left to train and the keys changed since (" +
                                         key_list(changes) + ") would not apply: raise train.steps above " +
                                         std::to_string(steps) + " to train on with them, " + start_anew);
  }
  if (changes.empty()) return {};
  return {"changed since the checkpoint, applied from step " + std::to_string(saved.step + 1) +
          " on: " + key_list(changes)};
}

std::string nothing_left_to_train(const fs::path& checkpoint, int64_t steps) {
  return "the checkpoint " + checkpoint.string() + " is at train.steps = " + std::to_string(steps) +
         ": nothing left to train (raise train.steps to train on; train.resume=\"\" or another train.out_dir "
         "starts afresh)";
}

}  // namespace giant::train
