// Whether a layout can run a model: the planner's rules tying a Layout
// (layout/layout.h) to a ModelSpec and a device count.
#pragma once

#include <string>

#include "giant/layout/layout.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

// Empty if `layout` can run `model` on `devices` devices (0: any count),
// else why not.
std::string why_invalid(const Layout& layout, const ModelSpec& model, int devices);

}  // namespace giant::planner
