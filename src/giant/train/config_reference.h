// What giant train reads, in one place: every key it defines (the run keys
// and ccl's tunables) and the config reference docs/config.md is generated
// from (giant train --print-config-reference).
#pragma once

#include <string>

#include "giant/base/tunables.h"

namespace giant::train {

// Defines every key giant train reads: the key table's and ccl's tunables.
void define_train_keys(Tunables& keys);

// The config reference in Markdown: every key define_train_keys defines, by
// section, with its kind, default, accepted values and help.
std::string config_reference();

}  // namespace giant::train
