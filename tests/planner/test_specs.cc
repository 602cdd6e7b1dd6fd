// Presets, TOML in and out, whether a layout runs a model, and their errors.
#include <gtest/gtest.h>

#include "giant/base/error.h"
#include "giant/planner/model_layout.h"
#include "giant/planner/spec_toml.h"
#include "support/error_message.h"

namespace giant::planner {
namespace {

TEST(Presets, VeGiantModelGpt13b) {
  const ModelSpec m = model_preset("gpt-13b");
  EXPECT_EQ(m.layers, 40);
  EXPECT_EQ(m.hidden, 5120);
  EXPECT_EQ(m.heads, 40);
  EXPECT_EQ(m.seq_len, 256);
  EXPECT_EQ(m.global_batch, 1536);
  for (const auto& name : model_preset_names()) EXPECT_NO_THROW(model_preset(name).validate()) << name;
  for (const auto& name : cluster_preset_names()) EXPECT_NO_THROW(cluster_preset(name).validate()) << name;
  EXPECT_NE(giant::test::error_message([] { model_preset("gpt-9t"); }).find("gpt-175b"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { cluster_preset("tpu"); }).find("v100-tcp"), std::string::npos);
}

TEST(Presets, ClusterFigures) {
  const ClusterSpec ib = cluster_preset("a100-80g-ib");
  EXPECT_EQ(ib.devices_per_host, 8);
  EXPECT_DOUBLE_EQ(ib.inter_host.bandwidth_bytes_per_s, 200e9);  // 8 x 200 Gb/s
  EXPECT_EQ(ib.inter_host.transport, Transport::rdma);
  const ClusterSpec tcp = cluster_preset("v100-tcp");
  EXPECT_DOUBLE_EQ(tcp.inter_host.bandwidth_bytes_per_s, 12.5e9);
  EXPECT_EQ(tcp.inter_host.transport, Transport::tcp);
  EXPECT_DOUBLE_EQ(cluster_preset("a100-40g-rdma").inter_host.bandwidth_bytes_per_s, 100e9);
}

TEST(Toml, ModelRoundTripAndTrainerConfig) {
  const ModelSpec m = model_preset("gpt-1.3b");
  const ModelSpec back = parse_model_toml(model_to_toml(m));
  EXPECT_EQ(back.layers, m.layers);
  EXPECT_EQ(back.hidden, m.hidden);
  EXPECT_EQ(back.global_batch, m.global_batch);
  // A trainer config: trainer-only keys and other tables are fine.
  const ModelSpec t = parse_model_toml(
      "[model]\nlayers=2\nhidden=64\nheads=4\nseq_len=32\nvocab=100\ndropout=0.1\nactivation=\"gelu_tanh\"\n[train]\nglobal_batch=8\nlr=3e-4\n");
  EXPECT_EQ(t.global_batch, 8);
  EXPECT_NE(giant::test::error_message([] { parse_model_toml("[model]\nlayers=2\nhiden=64\n"); }).find("model.hiden"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_model_toml("[model]\nlayers=\"two\"\n"); }).find("model.layers"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_model_toml("[model\n"); }).find("TOML syntax error"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { load_model_toml("/nonexistent/m.toml"); }).find("/nonexistent/m.toml"), std::string::npos);
}

TEST(Toml, ClusterRoundTrip) {
  ClusterSpec c = cluster_preset("v100-tcp").resolved();
  const ClusterSpec back = parse_cluster_toml(cluster_to_toml(c));
  EXPECT_EQ(back.hosts, c.hosts);
  EXPECT_EQ(back.device.type, "V100");
  EXPECT_NEAR(back.device.peak_flops, c.device.peak_flops, 1);
  EXPECT_NEAR(back.device.memory_bytes, c.device.memory_bytes, 1);
  EXPECT_NEAR(back.inter_host.bandwidth_bytes_per_s, c.inter_host.bandwidth_bytes_per_s, 1);
  EXPECT_NEAR(back.inter_host.efficiency, c.inter_host.efficiency, 1e-9);
  EXPECT_EQ(back.inter_host.transport, Transport::tcp);
  EXPECT_DOUBLE_EQ(back.device.gemm_efficiency, c.device.gemm_efficiency);
  const ClusterSpec gbit = parse_cluster_toml(
      "hosts=2\ndevices_per_host=4\n[device]\ntype=\"A100\"\npeak_tflops=312\nmemory_gib=40\nmemory_gbytes_per_s=1555\n"
      "[intra_host]\nbandwidth_gbytes_per_s=300\n[inter_host]\ntransport=\"rdma\"\nbandwidth_gbit_per_s=800\n");
  EXPECT_DOUBLE_EQ(gbit.inter_host.bandwidth_bytes_per_s, 100e9);
  EXPECT_NE(giant::test::error_message([] { parse_cluster_toml("hosts=1\n[device]\ntype=\"x\"\npeak_tflops=1\nmemory_gib=1\nmemory_gbytes_per_s=1\nspeed=3\n"); })
                .find("device.speed"),
            std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_cluster_toml("hosts=1\n[device]\npeak_tflops=1\nmemory_gib=1\nmemory_gbytes_per_s=1\n[inter_host]\ntransport=\"udp\"\n"); })
                .find("inter_host.transport"),
            std::string::npos);
}

TEST(Toml, CalibratedDeviceKeys) {
  const std::string text =
      "hosts=1\ndevices_per_host=2\n[device]\ntype=\"cpu\"\npeak_tflops=0.08\nmemory_gib=8\n"
      "memory_gbytes_per_s=12\nelementwise_gbytes_per_s=6.5\ndtype_bytes=4\n[intra_host]\ntransport=\"shm\"\n"
      "bandwidth_gbytes_per_s=2\n";
  const ClusterSpec c = parse_cluster_toml(text);
  EXPECT_DOUBLE_EQ(c.device.elementwise_bytes_per_s, 6.5e9);
  EXPECT_DOUBLE_EQ(c.device.elementwise_bandwidth(), 6.5e9);
  EXPECT_DOUBLE_EQ(c.device.dtype_bytes, 4);
  EXPECT_DOUBLE_EQ(c.device.element_bytes(), 4);
  const ClusterSpec back = parse_cluster_toml(cluster_to_toml(c));
  EXPECT_NEAR(back.device.elementwise_bytes_per_s, 6.5e9, 1);
  EXPECT_DOUBLE_EQ(back.device.dtype_bytes, 4);
  // Presets leave both out: memory bandwidth and 2-byte elements.
  const ClusterSpec preset = cluster_preset("a100-80g-ib").resolved();
  EXPECT_DOUBLE_EQ(preset.device.elementwise_bandwidth(), preset.device.memory_bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(preset.device.element_bytes(), 2);
  EXPECT_EQ(cluster_to_toml(preset).find("elementwise"), std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("dtype_bytes=4"), 13, "dtype_bytes=3");
  EXPECT_NE(giant::test::error_message([&] { parse_cluster_toml(bad); }).find("device.dtype_bytes"), std::string::npos);
  bad = text;
  bad.replace(bad.find("elementwise_gbytes_per_s=6.5"), 28, "elementwise_gbytes_per_s=-1");
  EXPECT_NE(giant::test::error_message([&] { parse_cluster_toml(bad); }).find("device.elementwise_gbytes_per_s"), std::string::npos);
}

// A calibrated CPU file: fp32 in [device], bf16 in its own table.
const char kPerPrecisionFile[] =
    "hosts=1\ndevices_per_host=2\n[device]\ntype=\"cpu\"\nmemory_gib=8\nmemory_gbytes_per_s=12\ndtype_bytes=4\n"
    "peak_tflops=0.03\ngemm_efficiency=1\ngemm_half_dim=40\nelementwise_gbytes_per_s=4\n"
    "[device.bf16]\npeak_tflops=0.3\ngemm_half_dim=60\ngemm_overhead_us=20\nelementwise_gbytes_per_s=3\n"
    "[intra_host]\ntransport=\"tcp\"\nbandwidth_gbytes_per_s=2\n";

TEST(Toml, PerPrecisionRatesRoundTrip) {
  const ClusterSpec c = parse_cluster_toml(kPerPrecisionFile);
  EXPECT_EQ(c.device.default_precision(), Precision::fp32);
  ASSERT_EQ(c.device.precision_rates.count(Precision::bf16), 1u);
  EXPECT_EQ(c.device.precision_rates.size(), 1u);
  const PrecisionRates& bf16 = c.device.precision_rates.at(Precision::bf16);
  EXPECT_DOUBLE_EQ(bf16.peak_flops, 0.3e12);
  EXPECT_DOUBLE_EQ(bf16.gemm_half_dim, 60);
  EXPECT_DOUBLE_EQ(bf16.gemm_overhead_s, 20e-6);
  EXPECT_DOUBLE_EQ(bf16.elementwise_bytes_per_s, 3e9);
  EXPECT_DOUBLE_EQ(bf16.gemm_efficiency, 0);  // left out: the [device] one
  const std::string written = cluster_to_toml(c);
  EXPECT_NE(written.find("[device.bf16]"), std::string::npos) << written;
  const ClusterSpec back = parse_cluster_toml(written);
  ASSERT_EQ(back.device.precision_rates.count(Precision::bf16), 1u);
  const PrecisionRates& again = back.device.precision_rates.at(Precision::bf16);
  EXPECT_NEAR(again.peak_flops, bf16.peak_flops, 1);
  EXPECT_DOUBLE_EQ(again.gemm_half_dim, bf16.gemm_half_dim);
  EXPECT_NEAR(again.gemm_overhead_s, bf16.gemm_overhead_s, 1e-15);
  EXPECT_NEAR(again.elementwise_bytes_per_s, bf16.elementwise_bytes_per_s, 1);
  EXPECT_DOUBLE_EQ(again.gemm_efficiency, 0);
  EXPECT_DOUBLE_EQ(back.device.peak_flops, 0.03e12);
  EXPECT_DOUBLE_EQ(back.device.dtype_bytes, 4);

  // Computing in bf16: the table's rates, the [device] ones it leaves out,
  // 2-byte elements; in fp32 the [device] rates.
  const DeviceSpec in_bf16 = back.device.in_precision(Precision::bf16);
  EXPECT_DOUBLE_EQ(in_bf16.peak_flops, 0.3e12);
  EXPECT_DOUBLE_EQ(in_bf16.gemm_efficiency, 1);
  EXPECT_DOUBLE_EQ(in_bf16.gemm_overhead_s, 20e-6);
  EXPECT_DOUBLE_EQ(in_bf16.element_bytes(), 2);
  EXPECT_NEAR(in_bf16.elementwise_bandwidth(), 3e9, 1);
  EXPECT_TRUE(in_bf16.precision_rates.empty());
  const DeviceSpec in_fp32 = back.device.in_precision(Precision::fp32);
  EXPECT_DOUBLE_EQ(in_fp32.peak_flops, 0.03e12);
  EXPECT_DOUBLE_EQ(in_fp32.element_bytes(), 4);
  EXPECT_DOUBLE_EQ(in_fp32.gemm_overhead_s, 0);
  // fp16 was not measured: the [device] (fp32) rates, with 2-byte elements.
  EXPECT_TRUE(back.device.has_rates_for(Precision::bf16));
  EXPECT_TRUE(back.device.has_rates_for(Precision::fp32));
  EXPECT_FALSE(back.device.has_rates_for(Precision::fp16));
  EXPECT_DOUBLE_EQ(back.device.in_precision(Precision::fp16).peak_flops, 0.03e12);
  EXPECT_DOUBLE_EQ(back.device.in_precision(Precision::fp16).element_bytes(), 2);
}

TEST(Toml, FilesWithoutPerPrecisionTablesStillLoad) {
  // A cluster file as giant plan --calibrate wrote it before it knew dtypes.
  const ClusterSpec old = parse_cluster_toml(
      "hosts=1\ndevices_per_host=2\n[device]\ntype=\"cpu\"\npeak_tflops=0.08\nmemory_gib=8\n"
      "memory_gbytes_per_s=12\ngemm_efficiency=1\ngemm_half_dim=30\nelementwise_gbytes_per_s=6.5\ndtype_bytes=4\n"
      "[intra_host]\ntransport=\"tcp\"\nbandwidth_gbytes_per_s=2\n");
  EXPECT_TRUE(old.device.precision_rates.empty());
  EXPECT_EQ(old.device.default_precision(), Precision::fp32);
  EXPECT_FALSE(old.device.has_rates_for(Precision::bf16));
  EXPECT_EQ(cluster_to_toml(old).find("[device."), std::string::npos);
  // A GPU preset: its [device] rates are 16-bit, an fp32 table the data sheet's.
  const ClusterSpec a100 = cluster_preset("a100-40g-rdma");
  EXPECT_EQ(a100.device.default_precision(), Precision::bf16);
  EXPECT_TRUE(a100.device.has_rates_for(Precision::fp16));
  EXPECT_DOUBLE_EQ(a100.device.in_precision(Precision::bf16).peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(a100.device.in_precision(Precision::fp32).peak_flops, 19.5e12);
  EXPECT_DOUBLE_EQ(cluster_preset("v100-tcp").device.in_precision(Precision::fp32).peak_flops, 15.7e12);
  const ClusterSpec back = parse_cluster_toml(cluster_to_toml(a100));
  EXPECT_NEAR(back.device.precision_rates.at(Precision::fp32).peak_flops, 19.5e12, 1);
}

TEST(Toml, BadPerPrecisionKeysNameThemselves) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kPerPrecisionFile;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::pair<std::string, std::string> cases[] = {
      {"[device.bf16]\npeak_tflops=-1", "device.bf16.peak_tflops"},
      {"[device.bf16]\npeak_tflops=\"fast\"", "device.bf16.peak_tflops"},
      {"[device.bf16]\npeak_tflops=0.3\ngemm_efficiency=2", "device.bf16.gemm_efficiency"},
      {"[device.bf16]\npeak_tflops=0.3\nspeed=3", "device.bf16.speed"},
      {"[device.bf16]\npeak_tflops=0.3\nmemory_gib=3", "device.bf16.memory_gib"},
      {"[device.fp8]\npeak_tflops=0.3", "device.fp8"},
  };
  for (const auto& [replacement, key] : cases) {
    const std::string text = with("[device.bf16]\npeak_tflops=0.3", replacement);
    const std::string what = giant::test::error_message([&] { parse_cluster_toml(text); });
    EXPECT_NE(what.find(key), std::string::npos) << replacement << " -> " << what;
  }
  EXPECT_NE(giant::test::error_message([&] { parse_cluster_toml(with("gemm_overhead_us=20", "gemm_overhead_us=-3")); })
                .find("device.bf16.gemm_overhead_us"),
            std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_cluster_toml(std::string(kPerPrecisionFile) + "\n[device.fp8]\npeak_tflops=1\n"); })
                .find("[device.bf16]"),
            std::string::npos);  // the error lists the tables there are
}

TEST(LayoutText, Validate) {  // the text itself: tests/layout/test_layout.cc
  const ModelSpec m = model_preset("gpt-13b");
  Layout l;
  l.tp = 3;
  EXPECT_NE(why_invalid(l, m, 3).find("heads"), std::string::npos);
  l.tp = 4, l.pp = 2, l.dp = 2, l.zero = 2;
  EXPECT_NE(why_invalid(l, m, 16).find("ZeRO-2"), std::string::npos);
  l.zero = 3;  // giant's ZeRO-3 composes with pipelines
  EXPECT_TRUE(why_invalid(l, m, 16).empty());
  l.zero = 1;
  EXPECT_TRUE(why_invalid(l, m, 16).empty());
  EXPECT_NE(why_invalid(l, m, 32).find("32 devices"), std::string::npos);
}

}  // namespace
}  // namespace giant::planner
