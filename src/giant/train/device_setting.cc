#include "giant/train/device_setting.h"

#include "giant/base/error.h"

namespace giant::train {
namespace {

bool whole_number(const std::string& text) {
  if (text.empty() || text.size() > 4) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

const char* device_syntax() { return "auto, cpu, cuda or cuda:N"; }

DeviceSetting parse_device(const std::string& text) {
  if (text == "auto") return {DeviceSetting::Kind::automatic, -1};
  if (text == "cpu") return {DeviceSetting::Kind::cpu, -1};
  if (text == "cuda") return {DeviceSetting::Kind::cuda, -1};
  const std::string prefix = "cuda:";
  if (text.compare(0, prefix.size(), prefix) == 0 && whole_number(text.substr(prefix.size()))) {
    return {DeviceSetting::Kind::cuda, std::stoi(text.substr(prefix.size()))};
  }
  throw ConfigError("train.device", std::string("must be ") + device_syntax() + ", got '" + text + "'");
}

}  // namespace giant::train
