// The key table: every run key declared once, with its name, the RunConfig
// field it binds to, the values it accepts and its help. The default is the
// field's initial value in RunConfig (run_config.h), read from there.
// define_run_keys, run_config_from, --print-config, "did you mean" and the
// config reference (docs/config.md) all come from this table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "giant/base/tunables.h"
#include "giant/train/run_config.h"

namespace giant::train {

struct RunKey {
  std::string name;
  TunableKind kind = TunableKind::string;
  std::string allowed;  // the values it accepts, as the reference says it; empty: any of its kind
  std::string help;     // one line: --print-config and the reference
  std::string detail;   // said in the reference only, after the help; often empty
  // Defines the key in the registry, its default the field's value in `defaults`.
  std::function<void(Tunables&, const RunConfig& defaults)> define;
  // Reads the key into its field; a ConfigError naming the key when the value is not allowed.
  std::function<void(const Tunables&, RunConfig&)> read;
  // Once read: checks (or resolves) it against the keys read before it, e.g.
  // train.min_lr against train.lr; empty for most keys.
  std::function<void(RunConfig&)> then;
};

// Every run key, in the order they are read and checked.
const std::vector<RunKey>& run_keys();

}  // namespace giant::train
