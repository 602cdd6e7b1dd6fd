// Accuracy on ../shared/reference/published-runs.csv: median absolute error
// of the step time at most 10% in-sample and 15% leaving each source out.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "giant/planner/eval_runs.h"

namespace giant::planner {
namespace {

// A copy of ../shared/reference/published-runs.csv, so a clean clone has it.
std::string published_runs_path() {
  return std::string(GIANT_SOURCE_DIR) + "/tests/planner/data/published-runs.csv";
}

TEST(EvalRuns, ParsesTheReferenceFormat) {
  const RunsTable t = parse_runs_csv(
      "# comment\nsource,params_b,hidden,heads,layers,seq,vocab,global_batch,micro_batch,gpus,gpus_per_node,gpu,"
      "gpu_mem_gb,intra_GBps,inter_Gbps_per_node,rdma,tp,pp,dp,zero,recompute,iter_s,tflops_per_gpu\n"
      "x,1,1024,16,24,1024,51200,32,,16,4,T4,16,,50,no,4,1,4,0,selective+sp,1.5,\n");
  const auto runs = published_runs(t);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].cluster.hosts, 4);
  EXPECT_EQ(runs[0].cluster.inter_host.transport, Transport::tcp);
  EXPECT_EQ(runs[0].cluster.intra_host.transport, Transport::pcie);
  EXPECT_TRUE(*runs[0].layout.sequence_parallel);
  EXPECT_FALSE(runs[0].layout.micro_batch.has_value());
  EXPECT_DOUBLE_EQ(*runs[0].iter_s, 1.5);
  const RunPrediction p = predict_run(runs[0], {});
  EXPECT_GT(p.iter_s, 0);
  std::ostringstream csv;
  write_predictions_csv(t, {p}, csv);
  EXPECT_NE(csv.str().find(",pred_iter_s,pred_tflops_per_gpu\n"), std::string::npos);
}

TEST(EvalRuns, MedianErrorInSampleAndLeavingEachSourceOut) {
  const std::string path = published_runs_path();
  ASSERT_TRUE(std::ifstream(path).good()) << "no " << path;
  const auto runs = published_runs(load_runs_csv(path));
  ASSERT_GE(runs.size(), 10u);
  // The built-in constants are the in-sample fit.
  std::vector<double> errors;
  for (const auto& run : runs) errors.push_back(predict_run(run, {}).relative_error.value());
  const ErrorReport report = fit_and_cross_validate(runs);
  print_error_report(runs, report, std::cout);
  std::cout << "built_in_constants_median_abs_error=" << 100 * median(errors) << "%\n";
  EXPECT_LE(median(errors), 0.10);
  EXPECT_LE(report.in_sample_median, 0.10);
  EXPECT_LE(report.leave_one_out_median, 0.15);
}

}  // namespace
}  // namespace giant::planner
