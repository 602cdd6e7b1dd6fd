// `giant bench pipeline` under `giant launch`, as a user runs it: a short run
// of every schedule on 4 ranks with tiny sleeps exits 0 and prints one line
// per schedule whose peak in-flight activations (the executor's count) are
// the simulator's and the closed forms (GPipe: m on every stage; 1F1B:
// min(p - s, m)); bad flags and shapes that cannot be scheduled exit 2
// naming the flag. Timing is the benchmark's to report, never asserted here.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "train/support/train_test_support.h"

namespace {

using giant::train::test::read_file;
using giant::train::test::TempDir;

const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";

struct Outcome {
  int code;
  std::string out, err;
};

Outcome run(const std::string& command) {
  TempDir dir("giant-bench-pipeline-test");
  const std::string out = dir.path() + "/out", err = dir.path() + "/err";
  const int status = std::system((command + " >" + out + " 2>" + err + " </dev/null").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_file(out), read_file(err)};
}

std::string launch(int processes, const std::string& bench_args) {
  return kGiant + " launch --nproc " + std::to_string(processes) + " -- " + kGiant + " bench pipeline " + bench_args;
}

// The key=value fields of rank 0's `bench=pipeline` lines, by schedule.
std::map<std::string, std::map<std::string, std::string>> bench_lines(const std::string& log) {
  std::map<std::string, std::map<std::string, std::string>> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[rank 0] bench=pipeline ", 0) != 0) continue;
    std::map<std::string, std::string> fields;
    std::istringstream words(line.substr(9));
    for (std::string word; words >> word;) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    lines[fields["schedule"]] = fields;
  }
  return lines;
}

TEST(BenchPipeline, EverySchedulePeaksAsTheSimulatorSays) {
  const Outcome r = run(launch(4, "--schedule all --virtual-stages 2 --micro-batches 8 --forward-ms 2 "
                                  "--backward-ms 4 --activation-bytes 4KiB --steps 2 --warmup 1"));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto lines = bench_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  for (const auto& [schedule, fields] : lines) {
    SCOPED_TRACE(schedule);
    EXPECT_EQ(fields.at("p"), "4");
    EXPECT_EQ(fields.at("m"), "8");
    EXPECT_EQ(fields.at("v"), schedule == "interleaved" ? "2" : "1");
    EXPECT_EQ(fields.at("steps"), "2");
    EXPECT_EQ(fields.at("peak_in_flight"), fields.at("simulated_peak_in_flight"));
    EXPECT_EQ(fields.at("peaks_match"), "yes");
    EXPECT_EQ(fields.at("losses_right"), "yes");
    for (const char* key : {"measured_step_s", "simulated_step_s", "ratio", "measured_bubble", "transfer_s"}) {
      EXPECT_NO_THROW(std::stod(fields.at(key))) << key;
    }
  }
  EXPECT_EQ(lines.at("gpipe").at("peak_in_flight"), "8,8,8,8");
  EXPECT_EQ(lines.at("1f1b").at("peak_in_flight"), "4,3,2,1");
  const std::string interleaved = lines.at("interleaved").at("peak_in_flight");
  EXPECT_EQ(std::count(interleaved.begin(), interleaved.end(), ','), 7) << "one per stage, 8 stages: " << interleaved;
  // Only rank 0 reports.
  EXPECT_EQ(r.out.find("[rank 1] bench=pipeline"), std::string::npos) << r.out;
}

void expect_bad_input(const std::string& command, const std::string& says) {
  const Outcome r = run(command);
  EXPECT_EQ(r.code, 2) << command << "\n" << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(says), std::string::npos) << command << "\n" << r.out << r.err;
}

TEST(BenchPipeline, BadFlagsNameTheFlag) {
  const std::string bench = kGiant + " bench pipeline ";
  expect_bad_input(bench + "--schedule zigzag", "'--schedule': expected all or a comma-separated list");
  expect_bad_input(bench + "--forward-ms -1", "'--forward-ms': expects milliseconds");
  expect_bad_input(bench + "--backward-ms soon", "'--backward-ms': expects milliseconds");
  expect_bad_input(bench + "--micro-batches 0", "'--micro-batches': expects an integer >= 1");
  expect_bad_input(bench + "--steps 0", "'--steps': expects an integer >= 1");
  expect_bad_input(bench + "--activation-bytes 3", "'--activation-bytes': expects a whole number of fp32");
  expect_bad_input(bench + "--activation-bytes lots", "'--activation-bytes'");
  expect_bad_input(bench + "--schedule 1f1b --virtual-stages 2", "'--virtual-stages': applies to the interleaved");
  expect_bad_input(bench + "--frobnicate", "--frobnicate");
  // One process: no pipeline to run.
  expect_bad_input(bench, "needs at least 2 pipeline ranks");
}

TEST(BenchPipeline, UnschedulableShapeIsBadInput) {
  // Interleaved needs a multiple of p micro-batches: refused on every rank before any connects.
  expect_bad_input(launch(2, "--schedule interleaved --micro-batches 3"),
                   "'--micro-batches': --schedule interleaved --virtual-stages 2 --micro-batches 3 on 2 ranks "
                   "cannot be scheduled");
}

}  // namespace
