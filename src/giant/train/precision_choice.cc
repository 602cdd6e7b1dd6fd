#include "giant/train/precision_choice.h"

#include <cstdio>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/train/run_device.h"

namespace giant::train {

c10::ScalarType scalar_type_of(Precision precision) {
  switch (precision) {
    case Precision::fp32: return c10::kFloat;
    case Precision::bf16: return c10::kBFloat16;
    case Precision::fp16: return c10::kHalf;
  }
  return c10::kFloat;
}

std::string unsupported_reason(Precision precision, c10::Device device) {
  if (precision == Precision::fp32) return "";
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(scalar_type_of(precision)).device(device);
  const torch::Tensor x = torch::ones({4, 8}, options), w = torch::ones({8}, options);
  try {
    torch::mm(x, x.t());
    torch::layer_norm(x, {8}, w, w);
    torch::gelu(x);
    torch::softmax(x, -1);
    (x + x).t().contiguous();
    return "";
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    if (const auto newline = what.find('\n'); newline != std::string::npos) what.resize(newline);
    return std::string(precision_name(precision)) + " is not available on this device (" + device.str() +
           "): its libtorch (" +
           TORCH_VERSION + ") has no " + precision_name(precision) + " kernels for a GPT's layers there (" + what +
           ")";
  }
}

Precision choose_automatic_precision(double fp32_flops, double bf16_flops) {
  return bf16_flops >= kAutoBf16MinSpeedup * fp32_flops ? Precision::bf16 : Precision::fp32;
}

namespace {

std::string format(const char* pattern, double value) {
  char text[32];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

}  // namespace

std::vector<Precision> precisions_to_measure(const TrainSettings& train) {
  if (!train.precision_auto) return {train.precision};
  if (unsupported_reason(Precision::bf16, run_device(train)).empty()) return {Precision::fp32, Precision::bf16};
  return {Precision::fp32};
}

void check_precision_runs(const TrainSettings& t) {
  if (t.precision_auto) return;  // what auto picks runs
  if (const std::string reason = unsupported_reason(t.precision, run_device(t)); !reason.empty()) {
    throw ConfigError("train.precision", reason + "; use " + (t.precision == Precision::fp16 ? "bf16 or " : "") +
                                             "fp32");
  }
  check_grad_dtype(t);
}

std::string resolve_precision(RunConfig& config, const MatrixRates& rates) {
  TrainSettings& t = config.train;
  std::string why;
  if (t.precision_auto) {
    t.precision = choose_automatic_precision(rates.fp32, rates.bf16);
    t.precision_auto = false;
    why = " (auto: bf16 matrix products at " + format("%.0f", rates.bf16 / 1e9) + " GFLOP/s against fp32's " +
          format("%.0f", rates.fp32 / 1e9) + " on " + std::to_string(t.threads) + " thread(s); bf16 is chosen from " +
          format("%.1fx", kAutoBf16MinSpeedup) + ")";
  }
  check_precision_runs(t);
  std::string line = std::string("precision: ") + precision_name(t.precision);
  if (t.precision != Precision::fp32) {
    line += std::string(" compute, fp32 master weights and AdamW, ") + precision_name(t.grad_dtype) + " gradients";
    if (t.dynamic_loss_scaling()) line += ", dynamic loss scaling";
  }
  return line + why;
}

}  // namespace giant::train
