// `giant plan --calibrate`'s libtorch probes on this machine, at small
// sizes: fp32 and bf16 rates are measured and written, fp16 (no CPU kernels
// in libtorch 1.13) is detected and left out, saying why.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "giant/planner/calibrate.h"
#include "giant/planner/spec_toml.h"
#include "giant/train/calibration_probes.h"

namespace giant::train {
namespace {

planner::CalibrationOptions small_calibration() {
  planner::CalibrationOptions o;
  o.devices = 1;
  o.repeats = 1;
  o.probe_calls = 1;
  o.gemm_shapes = {{32, 32, 32}, {64, 64, 64}, {128, 64, 64}};
  o.elementwise_rows = 64;
  o.elementwise_cols = 64;
  o.memory_bytes = 1 << 20;
  o.bandwidth_bytes = 1 << 16;
  o.latency_bytes = 1 << 10;
  return o;
}

TEST(CalibrationProbes, MeasureEachPrecisionThisMachineRuns) {
  const planner::CalibrationProbes probes = libtorch_calibration_probes();
  EXPECT_EQ(probes.why_unsupported(Precision::fp32), "");
  EXPECT_EQ(probes.why_unsupported(Precision::bf16), "");
  const std::string fp16 = probes.why_unsupported(Precision::fp16);
  EXPECT_NE(fp16.find("has no fp16 kernels for a GPT's layers there"), std::string::npos) << fp16;
  EXPECT_NE(fp16.find("'Half'"), std::string::npos) << fp16;

  std::ostringstream log;
  const planner::ClusterSpec c = planner::calibrate_this_machine(probes, small_calibration(), log);
  const std::string text = log.str();
  std::printf("%s", text.c_str());
  for (const char* line : {"calibrate=gemm dtype=fp32 m=32", "calibrate=gemm dtype=bf16 m=32",
                           "calibrate=elementwise dtype=fp32 rows=64", "calibrate=elementwise dtype=bf16 rows=64",
                           "# fp16: no rates written (fp16 is not available on this device"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(text.find("dtype=fp16"), std::string::npos) << text;

  // The file: fp32 in [device], bf16 in its table, no fp16; it reads back.
  const planner::ClusterSpec back = planner::parse_cluster_toml(planner::cluster_to_toml(c));
  EXPECT_EQ(back.device.default_precision(), Precision::fp32);
  EXPECT_GT(back.device.peak_flops, 0);
  EXPECT_GT(back.device.elementwise_bytes_per_s, 0);
  ASSERT_EQ(back.device.precision_rates.count(Precision::bf16), 1u);
  EXPECT_EQ(back.device.precision_rates.count(Precision::fp16), 0u);
  const planner::PrecisionRates& bf16 = back.device.precision_rates.at(Precision::bf16);
  EXPECT_GT(bf16.peak_flops, 0);
  EXPECT_GT(bf16.gemm_half_dim, 0);
  EXPECT_GT(bf16.elementwise_bytes_per_s, 0);
}

}  // namespace
}  // namespace giant::train
