// train.device's value: what a setting says (auto, cpu, cuda, cuda:N),
// read without libtorch, so that the run config is parsed (and fuzzed)
// without it; run_device.h settles it against the libtorch in use.
#pragma once

#include <string>

namespace giant::train {

struct DeviceSetting {
  enum class Kind { automatic, cpu, cuda };
  Kind kind = Kind::automatic;
  int index = -1;  // cuda:N's N; -1: cuda without one (the local rank's)
};

// "auto, cpu, cuda or cuda:N".
const char* device_syntax();

// Reads a train.device value; ConfigError naming the key when it is none of
// device_syntax()'s forms.
DeviceSetting parse_device(const std::string& text);

}  // namespace giant::train
