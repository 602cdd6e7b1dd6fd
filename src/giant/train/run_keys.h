// The run's key table (base/key_table.h): every run key declared once, with
// its name, the RunConfig field it binds to, the values it accepts and its
// help. The default is the field's initial value in RunConfig
// (run_config.h). define_run_keys, run_config_from, --print-config, "did you
// mean" and the config reference (docs/config.md) all come from this table;
// ccl's keys have a table of their own (ccl::ccl_keys()).
#pragma once

#include <vector>

#include "giant/base/key_table.h"
#include "giant/train/run_config.h"

namespace giant::train {

using RunKey = keys::KeyRow<RunConfig>;

// Every run key, in the order they are read and checked.
const std::vector<RunKey>& run_keys();

}  // namespace giant::train
