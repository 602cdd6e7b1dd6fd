// The giant command as a user runs it, as a process: every command exits 0
// on success, 1 on a runtime failure and 2 on bad input, with a message in
// the user's terms (never CLI11's raw codes, never an internal check's
// text); unknown names say the nearest known one; --version; --log-level,
// GIANT_LOG_LEVEL and timestamps; `plan --eval-csv` with bad rows; `generate`'s flags.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "giant/train/precision_choice.h"
#include "train/support/giant_process.h"

namespace {

using giant::train::test::expect_bad_input;
using giant::train::test::expect_user_terms;
using giant::train::test::giant;
using giant::train::test::Outcome;
using giant::train::test::TempDir;

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/tests/planner/data/";

TEST(Cli, Version) {
  const Outcome r = giant("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(r.out, std::regex("giant [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << r.out;
}

TEST(Cli, DispatchExitCodes) {
  EXPECT_EQ(giant("--help").code, 0);
  EXPECT_EQ(giant("help").code, 0);
  const Outcome none = giant("");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("train"), std::string::npos) << "the usage lists the commands:\n" << none.err;
  expect_bad_input("trian", "unknown command 'trian' (did you mean train?)");
  expect_bad_input("--frobnicate", "--frobnicate");
  expect_bad_input("bench", "usage: giant bench ccl");
  expect_bad_input("bench nccl", "unknown benchmark 'nccl' (did you mean ccl?)");
  expect_bad_input("--log-level loud plan --list-presets", "unknown log level 'loud'");
}

// A rank whose store never answers: the run fails at its start, a runtime
// failure rather than bad input.
const std::string kNoStore =
    "GIANT_RANK=1 GIANT_WORLD_SIZE=2 GIANT_STORE_ADDR=127.0.0.1:1 GIANT_SECRET=s GIANT_CCL_CONNECT_TIMEOUT=1s";

TEST(Cli, TrainExitCodes) {
  EXPECT_EQ(giant("train --help").code, 0);
  const Outcome failed = giant("train --set parallel.dp=2 --set train.micro_batch=8", kNoStore);
  EXPECT_EQ(failed.code, 1) << failed.err;
  EXPECT_NE(failed.err.find("giant train: "), std::string::npos) << failed.err;
  expect_user_terms(failed, "train with no store");
  expect_bad_input("train --frobnicate", "giant train: ");  // CLI11: 109
  expect_bad_input("train a.toml b.toml", "giant train: ");  // CLI11: 109
  expect_bad_input("train --set", "giant train: ");          // CLI11: 114
  expect_bad_input("train --log-level loud", "unknown log level 'loud'");
  expect_bad_input("train --set train.precision=fp8", "'train.precision': must be fp32, bf16 or fp16 (or auto)");
  // Where the device has no fp16 kernels (libtorch 1.13 on a CPU), fp16 is bad input, refused before any work.
  if (!giant::train::unsupported_reason(giant::Precision::fp16).empty()) {
    expect_bad_input("train --set train.precision=fp16", "fp16 is not available on this device");
  }
}

// Flags out of range name the flag, before any checkpoint is read.
TEST(Cli, GenerateFlagsNameTheFlag) {
  EXPECT_EQ(giant("generate --help").code, 0);
  TempDir dir("giant-generate-flags");
  const std::string checkpoint = " " + dir.path();
  expect_bad_input("generate", "giant generate: ");  // CLI11: the checkpoint is required
  expect_bad_input("generate" + checkpoint + " --temperature -1", "'--temperature': must not be negative");
  expect_bad_input("generate" + checkpoint + " --top-k -1", "'--top-k': must not be negative");
  expect_bad_input("generate" + checkpoint + " --top-p 0", "'--top-p': must be in (0, 1]");
  expect_bad_input("generate" + checkpoint + " --top-p 1.5", "'--top-p': must be in (0, 1]");
  expect_bad_input("generate" + checkpoint + " --max-tokens -1", "'--max-tokens': must not be negative");
  expect_bad_input("generate" + checkpoint + " --threads -1", "'--threads': must not be negative");
  expect_bad_input("generate" + checkpoint + " --top-p half", "--top-p");
  expect_bad_input("generate " + dir.path() + "/nothing", "'CHECKPOINT': '" + dir.path() + "/nothing' does not exist");
}

TEST(Cli, UnknownKeysSayTheNearestOne) {
  expect_bad_input("train --set train.lrr=1 --print-config", "did you mean train.lr?");
  TempDir dir;
  const std::string config = dir.file("run.toml", "[model]\nlayerz = 3\n");
  expect_bad_input("train " + config + " --print-config", "did you mean model.layers?");
  // A GIANT_* variable one typo from a key is reported, and the run goes on.
  const Outcome r = giant("train --print-config", "GIANT_TRAIN_LRR=1");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("GIANT_TRAIN_LRR"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean GIANT_TRAIN_LR?"), std::string::npos) << r.err;
  expect_bad_input("bench ccl --collectives allreduc", "did you mean allreduce?");
  expect_bad_input("bench ccl --set ccl.timeot=1s --nproc 2", "did you mean ccl.timeout?");
}

TEST(Cli, BadEnvironmentValuesNameTheVariable) {
  expect_bad_input("train --print-config", "GIANT_TRAIN_STEPS", "GIANT_TRAIN_STEPS=");
  expect_bad_input("train --print-config", "GIANT_TRAIN_LR", "GIANT_TRAIN_LR=fast");
  expect_bad_input("train --print-config", "GIANT_CCL_TIMEOUT", "GIANT_CCL_TIMEOUT=soon");
  expect_bad_input("plan --list-presets", "GIANT_LOG_LEVEL", "GIANT_LOG_LEVEL=");
  expect_bad_input("bench ccl --nproc 2", "GIANT_CCL_TCP_SOCKETS_PER_PEER", "GIANT_CCL_TCP_SOCKETS_PER_PEER=x");
}

TEST(Cli, PlanExitCodes) {
  EXPECT_EQ(giant("plan --list-presets").code, 0);
  EXPECT_EQ(giant("plan --help").code, 0);
  expect_bad_input("plan --frobnicate", "frobnicate");
  expect_bad_input("plan --model nope --cluster v100-tcp", "--model");
  // Not "Value 0 not in range 2.22507e-308 to 1.79769e+308" in 300 digits.
  const Outcome hosts = giant("plan --model gpt-13b --cluster v100-tcp --hosts 0");
  EXPECT_EQ(hosts.code, 2);
  EXPECT_NE(hosts.err.find("--hosts: must be at least 1, got 0"), std::string::npos) << hosts.err;
  EXPECT_LT(hosts.err.size(), 200u) << hosts.err;
  expect_bad_input("plan --model gpt-13b --cluster v100-tcp --top x", "--top");
  const Outcome nothing_fits = giant("plan --model gpt-175b --cluster v100-tcp --hosts 1");
  EXPECT_EQ(nothing_fits.code, 1) << nothing_fits.err;
  expect_user_terms(nothing_fits, "nothing fits");
}

TEST(Cli, PlanEvalCsvEvaluatesTheRowsItCan) {
  const Outcome r = giant("plan --eval-csv " + kData + "runs-with-bad-rows.csv --report-error");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_user_terms(r, "eval-csv");
  EXPECT_NE(r.err.find("4 of 6 rows could not be evaluated"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find(",pred_iter_s,pred_tflops_per_gpu,note\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp=3 does not divide heads=16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# rows not evaluated: 4 (see the note column); errors are over the other 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("median_abs_error=") , std::string::npos) << r.out;
  EXPECT_NE(r.out.find("median_abs_error_leave_one_source_out="), std::string::npos) << r.out;
  // A file of which no row can be evaluated produced nothing: a failure.
  TempDir dir;
  const std::string header = "source,params_b,hidden,heads,layers,seq,vocab,global_batch,micro_batch,gpus,"
                             "gpus_per_node,gpu,gpu_mem_gb,intra_GBps,inter_Gbps_per_node,rdma,tp,pp,dp,zero,"
                             "recompute,iter_s,tflops_per_gpu\n";
  const std::string bad = dir.file("bad.csv", header + "x,1,1024,16,24,1024,51200,32,,16,4,H100,80,,50,no,4,1,4,0,"
                                                       "selective,1.5,\n");
  const Outcome none = giant("plan --eval-csv " + bad);
  EXPECT_EQ(none.code, 1) << none.err;
  EXPECT_NE(none.out.find("unknown GPU 'H100'"), std::string::npos) << none.out;
  expect_bad_input("plan --eval-csv " + dir.path() + "/missing.csv", "missing.csv");
}

TEST(Cli, BenchCclParsesItsFlagsWithOneParser) {
  const Outcome help = giant("bench ccl --help");
  EXPECT_EQ(help.code, 0) << help.err;
  for (const char* flag : {"--nproc", "--collectives", "--bytes", "--min-bytes", "--max-bytes", "--step-factor",
                           "--dtype", "--op", "--root", "--algorithm", "--wire", "--launched", "--bind", "--iters",
                           "--warmup", "--budget", "--max-iters", "--repeat", "--sockets", "--timeout",
                           "--run-timeout", "--set", "--log-level"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag << " is not in the help:\n" << help.out;
  expect_bad_input("bench ccl --frobnicate", "--frobnicate");
  expect_bad_input("bench ccl --nproc 0", "--nproc expects an integer >= 1, got '0'");
  expect_bad_input("bench ccl --bytes 8 --min-bytes 8", "--bytes");
  expect_bad_input("bench ccl --max-bytes lots", "--max-bytes: expected a byte size");
  expect_bad_input("bench ccl --dtype f33", "--dtype");
  expect_bad_input("bench ccl --bind sometimes", "--bind");
  expect_bad_input("bench ccl --wire bf16 --collectives allgather", "--wire applies to allreduce only");
}

TEST(Cli, BenchCclRuntimeFailureIsOne) {
  const Outcome r = giant("bench ccl --launched --collectives allreduce --bytes 8 --iters 1", kNoStore);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("rank 1 failed"), std::string::npos) << r.err;
}

// A quick two-rank bench whose store server logs one debug line.
const std::string kSmallBench = "ccl --nproc 2 --collectives allreduce --bytes 8 --iters 1 --warmup 1";
const std::string kDebugLine = "store server listening on";

TEST(Cli, LogLevelFiltersMessages) {
  const Outcome quiet = giant("bench " + kSmallBench);
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find(kDebugLine), std::string::npos) << "debug shown at the default level:\n" << quiet.err;
  const Outcome flag = giant("bench " + kSmallBench + " --log-level debug");
  ASSERT_EQ(flag.code, 0) << flag.err;
  EXPECT_NE(flag.err.find(kDebugLine), std::string::npos) << flag.err;
  const Outcome before = giant("--log-level debug bench " + kSmallBench);
  ASSERT_EQ(before.code, 0) << before.err;
  EXPECT_NE(before.err.find(kDebugLine), std::string::npos) << before.err;
  const Outcome env = giant("bench " + kSmallBench, "GIANT_LOG_LEVEL=debug");
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_NE(env.err.find(kDebugLine), std::string::npos) << env.err;
  const Outcome flag_over_env = giant("bench " + kSmallBench + " --log-level info", "GIANT_LOG_LEVEL=debug");
  ASSERT_EQ(flag_over_env.code, 0) << flag_over_env.err;
  EXPECT_EQ(flag_over_env.err.find(kDebugLine), std::string::npos) << flag_over_env.err;
}

TEST(Cli, LogTimestamps) {
  for (const auto& [args, env] : {std::pair<std::string, std::string>{"--log-timestamps", ""},
                                  {"", "GIANT_LOG_TIMESTAMPS=true"}}) {
    const Outcome r = giant("bench " + kSmallBench + " --log-level debug " + args, env);
    ASSERT_EQ(r.code, 0) << r.err;
    std::smatch line;
    ASSERT_TRUE(std::regex_search(r.err, line, std::regex("(^|\n)([^\n]*" + kDebugLine + ")"))) << r.err;
    EXPECT_TRUE(std::regex_search(line[2].str(), std::regex("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z ")))
        << line[2];
  }
}

}  // namespace
