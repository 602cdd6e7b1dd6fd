// The floating-point formats a run computes, accumulates gradients or
// communicates in: their names in configs and logs, and their sizes. No
// libtorch: the planner and the config checks use it too.
#pragma once

#include <optional>
#include <string>

namespace giant {

enum class Precision { fp32, bf16, fp16 };

const char* precision_name(Precision precision);  // "fp32", "bf16", "fp16"
int precision_bytes(Precision precision);         // 4, 2, 2
// The precision a name means ("fp32", "bf16", "fp16"), or nothing.
std::optional<Precision> parse_precision(const std::string& name);

}  // namespace giant
