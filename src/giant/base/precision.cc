#include "giant/base/precision.h"

namespace giant {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

int precision_bytes(Precision precision) { return precision == Precision::fp32 ? 4 : 2; }

std::optional<Precision> parse_precision(const std::string& name) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    if (name == precision_name(p)) return p;
  }
  return std::nullopt;
}

}  // namespace giant
