// The schedule simulator against the closed forms of Narayanan et al. 2021.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "giant/planner/pipeline_sim.h"

namespace giant::planner {
namespace {

PipelineInput uniform(int p, int v, int64_t m, Schedule s, double f, double b) {
  PipelineInput in;
  in.stages = p;
  in.chunks_per_stage = v;
  in.micro_batches = m;
  in.schedule = s;
  in.forward_s.assign(static_cast<size_t>(p * v), f / v);
  in.backward_s.assign(static_cast<size_t>(p * v), b / v);
  return in;
}

TEST(PipelineSim, OneFOneBAndGPipeMatchTheBubbleFormula) {
  for (Schedule s : {Schedule::one_f_one_b, Schedule::gpipe}) {
    for (int p : {1, 2, 4, 5}) {
      for (int64_t m : {1, 3, 8, 16}) {
        const PipelineResult r = simulate_pipeline(uniform(p, 1, m, s, 1.0, 2.0));
        EXPECT_NEAR(r.makespan_s, (m + p - 1) * 3.0, 1e-9) << schedule_name(s) << " p=" << p << " m=" << m;
        EXPECT_NEAR(r.busiest_device_s, m * 3.0, 1e-9);
      }
    }
  }
}

TEST(PipelineSim, InterleavedShrinksTheBubbleByV) {
  for (int v : {2, 3}) {
    for (int64_t m : {4, 8, 12}) {
      const int p = 4;
      const PipelineResult r = simulate_pipeline(uniform(p, v, m, Schedule::interleaved, 1.0, 2.0));
      EXPECT_NEAR(r.makespan_s, pipeline_closed_form_s(p, v, m, Schedule::interleaved, 1.0, 2.0), 1e-9)
          << "v=" << v << " m=" << m;
    }
  }
}

TEST(PipelineSim, UnequalStagesFollowSumPlusSlowest) {
  // Forward only: T = sum(t_i) + (m-1) max(t_i).
  PipelineInput in = uniform(3, 1, 5, Schedule::gpipe, 0, 0);
  in.forward_s = {1.0, 3.0, 2.0};
  EXPECT_NEAR(simulate_pipeline(in).makespan_s, 6.0 + 4 * 3.0, 1e-9);
}

TEST(PipelineSim, TransfersDelayOnlyTheReceiver) {
  PipelineInput in = uniform(2, 1, 1, Schedule::one_f_one_b, 1.0, 2.0);
  in.transfer_s = 0.5;
  // F0 -> send -> F1, B1 -> send -> B0.
  EXPECT_NEAR(simulate_pipeline(in).makespan_s, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-9);
  // With many micro-batches a transfer shorter than a pass hides in steady state.
  PipelineInput many = uniform(2, 1, 16, Schedule::one_f_one_b, 1.0, 2.0);
  const double without = simulate_pipeline(many).makespan_s;
  many.transfer_s = 0.5;
  EXPECT_LT(simulate_pipeline(many).makespan_s - without, 16 * 2 * 0.5);
}

TEST(PipelineSim, ManyStagesAndMicroBatchesStayFast) {
  const PipelineResult r = simulate_pipeline(uniform(64, 2, 512, Schedule::interleaved, 1.0, 2.0));
  EXPECT_NEAR(r.makespan_s, pipeline_closed_form_s(64, 2, 512, Schedule::interleaved, 1.0, 2.0), 1e-6);
}

}  // namespace
}  // namespace giant::planner
