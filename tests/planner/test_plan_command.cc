// `giant plan` as a library function: flags, outputs and errors (its exit
// statuses as a process: tests/train/test_cli.cc).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "giant/base/error.h"
#include "giant/planner/calibrate.h"
#include "giant/planner/plan_command.h"
#include "giant/planner/spec_toml.h"

namespace giant::planner {
namespace {

struct PlanOutput {
  int code;
  std::string out, err;
};

// The flags parsed as giant plan parses them, the command run, and what
// escapes it as the giant command reports it (2 bad input, 1 failed).
PlanOutput plan(const std::vector<std::string>& args, const CalibrationProbes* probes = nullptr) {
  CLI::App app;
  PlanArgs parsed;
  add_plan_flags(app, parsed);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  std::ostringstream out, err;
  int code = 0;
  try {
    code = probes ? run_plan_command(parsed, out, err, *probes) : run_plan_command(parsed, out, err);
  } catch (const ConfigError& e) {
    err << e.what();
    code = 2;
  } catch (const std::exception& e) {
    err << e.what();
    code = 1;
  }
  return {code, out.str(), err.str()};
}

TEST(PlanCommand, PlansAndExplains) {
  const PlanOutput r = plan({"--model", "gpt-13b", "--cluster", "v100-tcp", "--top", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step_s"), std::string::npos);
  EXPECT_NE(r.out.find("why: #1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("searched"), std::string::npos);
}

// The layouts ranked are those giant train runs (no sequence parallelism,
// its mesh's placement), and the first comes with the command that runs it.
TEST(PlanCommand, RanksOnlyWhatGiantTrainRunsAndPrintsTheCommandForIt) {
  const PlanOutput r = plan({"--model", "gpt-13b", "--cluster", "v100-tcp", "--top", "10", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plans = nlohmann::json::parse(r.out);
  ASSERT_EQ(plans.at("plans").size(), 10u);
  for (const auto& p : plans.at("plans")) {
    EXPECT_FALSE(p.at("layout").at("sequence_parallel").get<bool>()) << p.dump();
    EXPECT_EQ(p.at("layout").at("placement"), "tp<dp<pp") << p.dump();
  }
  const nlohmann::json& best = plans.at("plans")[0].at("layout");
  const std::string command = plans.at("command");
  EXPECT_EQ(command.rfind("srun -N 4 --ntasks-per-node 8 giant train --set model.layers=40 ", 0), 0u) << command;
  for (const char* key : {"tp", "pp", "dp"}) {
    const std::string setting = std::string(" --set parallel.") + key + "=" + std::to_string(best.at(key).get<int>());
    EXPECT_NE(command.find(setting), std::string::npos) << setting << " in " << command;
  }
  EXPECT_NE(command.find(" --set train.micro_batch=" + std::to_string(best.at("micro_batch").get<int>())),
            std::string::npos)
      << command;
  const PlanOutput text = plan({"--model", "gpt-13b", "--cluster", "v100-tcp", "--hosts", "1", "--top", "3"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("\nrun #1: giant launch --nproc 8 -- giant train --set "), std::string::npos) << text.out;

  const PlanOutput sp = plan({"--model", "gpt-13b", "--cluster", "v100-tcp", "--layout", "tp=8,sp=1"});
  EXPECT_EQ(sp.code, 2);
  EXPECT_NE(sp.err.find("sequence parallelism"), std::string::npos) << sp.err;
  const PlanOutput placed = plan({"--model", "gpt-13b", "--cluster", "v100-tcp", "--layout",
                                  "tp=2,dp=4,pp=4,placement=dp<tp<pp"});
  EXPECT_EQ(placed.code, 1);
  EXPECT_NE(placed.err.find("placement tp<dp<pp"), std::string::npos) << placed.err;
}

TEST(PlanCommand, Json) {
  const PlanOutput r = plan({"--model", "gpt-1.3b", "--cluster", "a100-40g-rdma", "--json", "--top", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_NE(r.out.find("\"plans\":[{\"layout\":{\"tp\":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"components_s\""), std::string::npos);
}

// A model file whose name holds what JSON must escape: quotes, a backslash
// and control characters (tab, newline, bell, escape).
const char kOddName[] = "tab\there \"quoted\" back\\slash bell\x07 escape\x1b[0m\nsecond line";

std::string odd_model_file(const std::string& name, int layers, int hidden, int heads, int batch) {
  const std::string path = ::testing::TempDir() + std::to_string(getpid()) + "-" + name;
  std::ofstream(path) << "[model]\nname = \"tab\\there \\\"quoted\\\" back\\\\slash bell\\u0007 escape\\u001b[0m"
                      << "\\nsecond line\"\nlayers = " << layers << "\nhidden = " << hidden << "\nheads = " << heads
                      << "\nseq_len = 2048\nvocab = 50304\nglobal_batch = " << batch << "\n";
  return path;
}

TEST(PlanCommand, JsonParsesStrictlyWhateverTheNames) {
  const PlanOutput r = plan({"--model", odd_model_file("odd-small.toml", 24, 2048, 16, 512), "--cluster",
                             "a100-40g-rdma", "--json", "--top", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json plans;
  ASSERT_NO_THROW(plans = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_EQ(plans.at("model"), kOddName);
  EXPECT_EQ(plans.at("plans").size(), 2u);
  EXPECT_TRUE(plans.at("plans")[0].at("layout").at("sequence_parallel").is_boolean());
  EXPECT_GT(plans.at("plans")[0].at("step_s").get<double>(), 0);
  EXPECT_NE(plans.at("why").get<std::string>().find("beats #2"), std::string::npos);

  const PlanOutput none = plan({"--model", odd_model_file("odd-large.toml", 96, 12288, 96, 1536), "--cluster",
                                "v100-tcp", "--hosts", "1", "--json"});
  EXPECT_EQ(none.code, 1);
  nlohmann::json nowhere;
  ASSERT_NO_THROW(nowhere = nlohmann::json::parse(none.out)) << none.out;
  EXPECT_TRUE(nowhere.at("plans").empty());
  EXPECT_NE(nowhere.at("fits_nowhere").get<std::string>().find(std::string("model ") + kOddName), std::string::npos);
}

TEST(PlanCommand, OneLayout) {
  const PlanOutput r = plan({"--model", "gpt-13b", "--cluster", "v100-rdma", "--layout", "tp=4,pp=4,dp=2,mb=4,schedule=1f1b,zero=0,recompute=full,sp=0", "--top", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tp=4 pp=4 dp=2 mb=4 1f1b zero=0 recompute=full"), std::string::npos) << r.out;
  const PlanOutput bad = plan({"--model", "gpt-13b", "--cluster", "v100-rdma", "--layout", "tp=4,pp=4,dp=4"});
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--layout"), std::string::npos) << bad.err;
}

TEST(PlanCommand, ShowScheduleDrawsTheChosenPlansPipeline) {
  const std::string model = ::testing::TempDir() + std::to_string(getpid()) + "-schedule-model.toml";
  std::ofstream(model) << "[model]\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 512\n"
                          "[train]\nglobal_batch = 8\n";
  const std::vector<std::string> base = {"--model", model, "--cluster", "v100-tcp", "--hosts", "1", "--top", "1"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return plan(extra);
  };
  const PlanOutput r = with({"--layout", "tp=1,pp=2,dp=4,mb=1,schedule=1f1b", "--show-schedule"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\nschedule of tp=1 pp=2 dp=4 mb=1 1f1b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("schedule 1f1b, p=2 v=1 m=2: step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 0 |F0.0  F0.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 |      F1.0  B1.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak micro-batches in flight per stage: 2 1\n"), std::string::npos) << r.out;
  // The cost model's times: the last stage's backward (with the logits)
  // outlasts a column, and the transfers leave rank 0 waiting.
  EXPECT_NE(r.out.find("B1.0---"), std::string::npos) << r.out;

  const PlanOutput interleaved = with({"--layout", "tp=2,pp=2,dp=2,mb=1,schedule=interleaved,v=2", "--show-schedule"});
  ASSERT_EQ(interleaved.code, 0) << interleaved.err;
  EXPECT_NE(interleaved.out.find("schedule interleaved, p=2 v=2 m=4: "), std::string::npos) << interleaved.out;
  EXPECT_NE(interleaved.out.find("F3.0"), std::string::npos) << interleaved.out;

  EXPECT_EQ(with({}).out.find("rank 0 |"), std::string::npos) << "no grid unless asked";
  const PlanOutput json = with({"--show-schedule", "--json"});
  EXPECT_EQ(json.code, 2);
  EXPECT_NE(json.err.find("'--show-schedule': draws a text grid: leave out --json"), std::string::npos) << json.err;
}

TEST(PlanCommand, CompareBaselines) {
  const PlanOutput r = plan({"--model", "gpt-13b", "--cluster", "a100-40g-tcp", "--compare-baselines"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("megatron tp=4 pp=4"), std::string::npos);
  EXPECT_NE(r.out.find("giant zero-3 data parallel"), std::string::npos);
  EXPECT_NE(r.out.find("deepspeed zero-3 data parallel"), std::string::npos);
  EXPECT_NE(r.out.find("RDMA -> TCP throughput loss"), std::string::npos);
}

TEST(PlanCommand, FitsNowhere) {
  const PlanOutput r = plan({"--model", "gpt-175b", "--cluster", "v100-tcp", "--hosts", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("least memory per device"), std::string::npos) << r.err;
}

TEST(PlanCommand, ErrorsNameTheFlag) {
  EXPECT_NE(plan({"--model", "gpt-13b"}).err.find("--cluster"), std::string::npos);
  EXPECT_NE(plan({"--model", "nope", "--cluster", "v100-tcp"}).err.find("--model"), std::string::npos);
  EXPECT_NE(plan({"--model", "gpt-13b", "--cluster", "/no/such.toml"}).err.find("/no/such.toml"), std::string::npos);
  EXPECT_NE(plan({"--report-error"}).err.find("--eval-csv"), std::string::npos);
  EXPECT_EQ(plan({"--report-error"}).code, 2);
}

TEST(PlanCommand, FlagsCountingThingsSayPlainlyWhatIsWrong) {
  for (const char* flag : {"--hosts", "--top", "--devices", "--max-micro-batch"}) {
    CLI::App app;
    PlanArgs parsed;
    add_plan_flags(app, parsed);
    std::vector<std::string> args = {"0", flag};  // reversed: `FLAG 0`
    try {
      app.parse(args);
      FAIL() << flag << " 0 was accepted";
    } catch (const CLI::ParseError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string(flag) + ": must be at least 1, got 0"), std::string::npos) << what;
      EXPECT_LT(what.size(), 100u) << what;
    }
  }
}

TEST(PlanCommand, CalibrateWithAProbeWritesAClusterFile) {
  CalibrationProbes probes;
  probes.device_type = "cpu";
  // A device whose GEMM rate is 10 GFLOP/s / (1 + 32/m + 32/n + 32/k).
  probes.gemm_flops_per_s = [](Precision, int64_t m, int64_t n, int64_t k) {
    return 10e9 / (1 + 32.0 / m + 32.0 / n + 32.0 / k);
  };
  const PlanOutput r = plan({"--calibrate", "--devices", "2"}, &probes);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("calibrate=ccl_allreduce link=intra_host"), std::string::npos) << r.out;
  const ClusterSpec c = parse_cluster_toml(r.out.substr(r.out.find("# written by")));
  EXPECT_EQ(c.devices_per_host, 2);
  EXPECT_NEAR(c.device.peak_flops, 10e9, 1e6);
  EXPECT_NEAR(c.device.gemm_half_dim, 32, 1);
  EXPECT_GT(c.intra_host.bandwidth_bytes_per_s, 0);
  EXPECT_GT(c.inter_host.latency_s, 0);
  // Without an elementwise probe, the built-in streaming loop; without a
  // precision probe, fp32 only.
  EXPECT_NE(r.out.find("no elementwise probe given"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# bf16: no rates written (no precision probe given"), std::string::npos) << r.out;
  EXPECT_GT(c.device.elementwise_bytes_per_s, 0);
  EXPECT_DOUBLE_EQ(c.device.dtype_bytes, 4);
  EXPECT_TRUE(c.device.precision_rates.empty());
}

// A probe whose device is twice as slow while another device works: each
// call takes 5 ms and sees whether another call overlapped it.
struct SharedDeviceProbe {
  std::atomic<int> in_flight{0}, calls{0};
  double rate(double alone) {
    const int before = calls.fetch_add(1);
    in_flight.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool shared = in_flight.load() > 1 || calls.load() > before + 1;
    in_flight.fetch_sub(1);
    return shared ? alone / 2 : alone;
  }
};

TEST(PlanCommand, CalibrateWritesTheRatesWithEveryDeviceBusy) {
  SharedDeviceProbe shared;
  CalibrationProbes probes;
  probes.gemm_flops_per_s = [&](Precision, int64_t m, int64_t n, int64_t k) {
    return shared.rate(10e9 / (1 + 32.0 / m + 32.0 / n + 32.0 / k));
  };
  probes.elementwise_bytes_per_s = [&](Precision, int64_t rows, int64_t cols) {
    EXPECT_EQ(rows * cols, 4096 * 256);
    return shared.rate(6e9);
  };
  const PlanOutput two = plan({"--calibrate", "--devices", "2"}, &probes);
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("gflops_busy="), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("calibrate=elementwise dtype=fp32 rows=4096 cols=256 gbytes_per_s=6 gbytes_per_s_busy=3"),
            std::string::npos)
      << two.out;
  const ClusterSpec c = parse_cluster_toml(two.out.substr(two.out.find("# written by")));
  EXPECT_NEAR(c.device.peak_flops, 5e9, 1e6);
  EXPECT_NEAR(c.device.gemm_half_dim, 32, 1);
  EXPECT_DOUBLE_EQ(c.device.elementwise_bytes_per_s, 3e9);
  // One device: nothing else runs, the lone rates.
  const PlanOutput one = plan({"--calibrate", "--devices", "1"}, &probes);
  ASSERT_EQ(one.code, 0) << one.err;
  const ClusterSpec alone = parse_cluster_toml(one.out.substr(one.out.find("# written by")));
  EXPECT_NEAR(alone.device.peak_flops, 10e9, 1e6);
  EXPECT_DOUBLE_EQ(alone.device.elementwise_bytes_per_s, 6e9);
}

// A device as this machine's CPU: bf16 GEMMs 10x fp32's, bf16 elementwise
// kernels a little slower, no fp16 kernels.
CalibrationProbes bf16_device_probes(std::vector<Precision>* measured = nullptr) {
  CalibrationProbes probes;
  probes.gemm_flops_per_s = [measured](Precision p, int64_t m, int64_t n, int64_t k) {
    EXPECT_NE(p, Precision::fp16);
    if (measured && (measured->empty() || measured->back() != p)) measured->push_back(p);
    return (p == Precision::bf16 ? 100e9 : 10e9) / (1 + 32.0 / m + 32.0 / n + 32.0 / k);
  };
  probes.elementwise_bytes_per_s = [](Precision p, int64_t, int64_t) { return p == Precision::bf16 ? 4e9 : 6e9; };
  probes.why_unsupported = [](Precision p) -> std::string {
    return p == Precision::fp16 ? "\"addmm_impl_cpu_\" not implemented for 'Half'" : "";
  };
  return probes;
}

std::string written_cluster_file(const PlanOutput& calibration, const std::string& name) {
  const std::string path = ::testing::TempDir() + std::to_string(getpid()) + "-" + name;
  std::ofstream(path) << calibration.out.substr(calibration.out.find("# written by"));
  return path;
}

TEST(PlanCommand, CalibrateWritesTheRatesOfEachPrecisionTheDeviceRuns) {
  std::vector<Precision> measured;
  const CalibrationProbes probes = bf16_device_probes(&measured);
  const PlanOutput r = plan({"--calibrate", "--devices", "1"}, &probes);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(measured, (std::vector<Precision>{Precision::fp32, Precision::bf16}));
  EXPECT_NE(r.out.find("calibrate=gemm dtype=fp32 m=64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibrate=gemm dtype=bf16 m=64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibrate=gemm_fit dtype=bf16 peak_gflops=100"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibrate=elementwise dtype=bf16 rows=4096 cols=256 gbytes_per_s=4"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# fp16: no rates written (\"addmm_impl_cpu_\" not implemented for 'Half')"),
            std::string::npos)
      << r.out;
  const ClusterSpec c = parse_cluster_toml(r.out.substr(r.out.find("# written by")));
  EXPECT_EQ(c.device.default_precision(), Precision::fp32);
  EXPECT_NEAR(c.device.peak_flops, 10e9, 1e6);
  EXPECT_DOUBLE_EQ(c.device.elementwise_bytes_per_s, 6e9);
  ASSERT_EQ(c.device.precision_rates.count(Precision::bf16), 1u);
  EXPECT_EQ(c.device.precision_rates.count(Precision::fp16), 0u);
  const PrecisionRates& bf16 = c.device.precision_rates.at(Precision::bf16);
  EXPECT_NEAR(bf16.peak_flops, 100e9, 1e7);
  EXPECT_NEAR(bf16.gemm_half_dim, 32, 1);
  EXPECT_DOUBLE_EQ(bf16.elementwise_bytes_per_s, 4e9);
}

TEST(PlanCommand, PlansInThePrecisionAsked) {
  const CalibrationProbes probes = bf16_device_probes();
  const PlanOutput calibration = plan({"--calibrate", "--devices", "2"}, &probes);
  ASSERT_EQ(calibration.code, 0) << calibration.err;
  const std::string cluster = written_cluster_file(calibration, "bf16-cluster.toml");
  // bench/train's GPT.
  const std::string model = ::testing::TempDir() + std::to_string(getpid()) + "-bench-model.toml";
  std::ofstream(model) << "[model]\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 512\n"
                          "[train]\nglobal_batch = 16\n";
  auto step_of = [&](const std::vector<std::string>& extra, std::string* out = nullptr) {
    std::vector<std::string> args = {"--model", model, "--cluster", cluster, "--layout", "tp=1,dp=2,mb=8", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const PlanOutput r = plan(args);
    EXPECT_EQ(r.code, 0) << r.err;
    if (out) *out = r.out;
    return nlohmann::json::parse(r.out);
  };
  std::string fp32_out;
  const nlohmann::json fp32 = step_of({}, &fp32_out);  // the file's [device] dtype
  const nlohmann::json bf16 = step_of({"--precision", "bf16", "--grad-dtype", "fp32"});
  EXPECT_EQ(fp32.at("precision"), "fp32");
  EXPECT_EQ(bf16.at("precision"), "bf16");
  EXPECT_EQ(bf16.at("grad_dtype"), "fp32");
  EXPECT_FALSE(bf16.contains("precision_note"));
  const auto step = [](const nlohmann::json& j) { return j.at("plans")[0].at("step_s").get<double>(); };
  EXPECT_LT(step(bf16), step(fp32));
  EXPECT_LT(bf16.at("plans")[0].at("components_s").at("compute").get<double>(),
            fp32.at("plans")[0].at("components_s").at("compute").get<double>() / 2);
  // Gradients default to the compute precision.
  EXPECT_EQ(step_of({"--precision", "bf16"}).at("grad_dtype"), "bf16");
  // fp16 was not measured: the fp32 rates, and a note saying so.
  const nlohmann::json fp16 = step_of({"--precision", "fp16"});
  EXPECT_NE(fp16.at("precision_note").get<std::string>().find("no fp16 rates"), std::string::npos) << fp16;

  // The table's header names the precision.
  const PlanOutput table = plan({"--model", model, "--cluster", cluster, "--precision", "bf16", "--top", "1"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("precision bf16: "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("(0.1 bf16 TFLOP/s"), std::string::npos) << table.out;
  const PlanOutput fp16_table = plan({"--model", model, "--cluster", cluster, "--precision", "fp16", "--top", "1"});
  EXPECT_NE(fp16_table.out.find("note: the cluster file has no fp16 rates"), std::string::npos) << fp16_table.out;
  // A GPU preset computes in 16 bits unless asked, and in fp32 at the data sheet's rate.
  const PlanOutput gpu = plan({"--model", "gpt-1.3b", "--cluster", "a100-40g-rdma", "--precision", "fp32", "--top", "1"});
  ASSERT_EQ(gpu.code, 0) << gpu.err;
  EXPECT_NE(gpu.out.find("(19.5 fp32 TFLOP/s"), std::string::npos) << gpu.out;
  EXPECT_NE(plan({"--model", "gpt-1.3b", "--cluster", "a100-40g-rdma", "--top", "1"}).out.find("precision bf16: "),
            std::string::npos);

  for (const char* flag : {"--precision", "--grad-dtype"}) {
    const PlanOutput bad = plan({"--model", model, "--cluster", cluster, flag, "fp64"});
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("'" + std::string(flag) + "': expected fp32, bf16 or fp16, got 'fp64'"), std::string::npos)
        << bad.err;
  }
}

TEST(Calibrate, MeasureWhileBusyMeasuresEveryDeviceAtOnce) {
  // Each measurement waits until all three devices are inside one at the
  // same time; a device that has its figure keeps measuring meanwhile.
  std::atomic<int> in_flight{0}, most{0}, device{0};
  const std::vector<double> rates = measure_while_busy(3, [&] {
    const int now = in_flight.fetch_add(1) + 1;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (most.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    in_flight.fetch_sub(1);
    thread_local const int id = device.fetch_add(1);
    return 10.0 + id;
  });
  EXPECT_EQ(most.load(), 3);
  ASSERT_EQ(rates.size(), 3u);
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<double>{10, 11, 12}));  // one figure per device
  int calls = 0;
  EXPECT_EQ(measure_while_busy(1, [&] { return ++calls * 3.0; }), std::vector<double>{3.0});
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(measure_while_busy(2, []() -> double { throw std::runtime_error("probe failed"); }),
               std::runtime_error);
}

TEST(Calibrate, TheGemmFitSeparatesAFixedTimePerCallFromTheHalfDimension) {
  const std::vector<std::array<int64_t, 3>> shapes = CalibrationOptions{}.gemm_shapes;
  auto samples_of = [&](double peak, double half_dim, double overhead_s) {
    std::vector<GemmSample> samples;
    for (const auto& [m, n, k] : shapes) {
      const double flops = 2.0 * m * n * k;
      const double seconds = flops * (1 + half_dim / m + half_dim / n + half_dim / k) / peak + overhead_s;
      samples.push_back({m, n, k, flops / seconds});
    }
    return samples;
  };
  // oneDNN's bf16 products here: 800 GFLOP/s, 20 us a call.
  const GemmFit bf16 = fit_gemm_curve(samples_of(800e9, 0, 20e-6));
  EXPECT_NEAR(bf16.peak_flops, 800e9, 40e9);
  EXPECT_NEAR(bf16.overhead_s, 20e-6, 2e-6);
  EXPECT_LT(bf16.half_dim, 4);
  // A curve without a fixed cost keeps none.
  const GemmFit plain = fit_gemm_curve(samples_of(10e9, 32, 0));
  EXPECT_NEAR(plain.peak_flops, 10e9, 1e6);
  EXPECT_NEAR(plain.half_dim, 32, 1);
  EXPECT_EQ(plain.overhead_s, 0);
  // Both at once.
  const GemmFit both = fit_gemm_curve(samples_of(500e9, 16, 5e-6));
  EXPECT_NEAR(both.peak_flops, 500e9, 50e9);
  EXPECT_NEAR(both.half_dim, 16, 3);
  EXPECT_NEAR(both.overhead_s, 5e-6, 1e-6);
}

TEST(Calibrate, StreamingLoopCountsTwelveBytesAnElement) {
  const double rate = stream_triad_bytes_per_s(1 << 16, 3);
  EXPECT_GT(rate, 1e8);  // any machine streams more than 100 MB/s
  EXPECT_LT(rate, 1e13);
}

}  // namespace
}  // namespace giant::planner
