// The planner's pipeline simulator on the schedule IR (layout/schedule.h,
// whose own tests are tests/layout/test_schedule.cc): every schedule runs
// without deadlock, against the closed forms of Narayanan et al. 2021, and
// the grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/planner/schedule_simulate.h"
#include "layout/support/schedule_cases.h"

namespace giant::planner {
namespace {

using namespace test;

// A rank's time per micro-batch split over its v chunks, as the closed
// forms assume (the bubble fraction does not depend on the scale).
ActionCosts per_rank_costs(const PipelineShape& s, double f, double b, double transfer = 0) {
  return ActionCosts::uniform(s.stages(), f / s.virtual_stages, b / s.virtual_stages, transfer);
}

SimulationResult simulate(const PipelineShape& s, const ActionCosts& costs) {
  return simulate_schedule(lower_communication(generate_schedule(s)), costs);
}

TEST(Schedule, EveryValidShapeValidatesAndRunsWithoutDeadlock) {
  int valid = 0;
  for_each_shape([&](const PipelineShape& shape) {
    if (!refused_key(shape).empty()) return;
    ++valid;
    EXPECT_NO_THROW(check_pipeline_shape(shape)) << name(shape);
    for (const PipelineSchedule& lowered : {lower_communication(generate_schedule(shape)),
                                            lower_communication(generate_forward_only(shape))}) {
      EXPECT_EQ(validation_error(lowered), "") << name(shape) << (lowered.forward_only ? " forward-only" : "");
      const SimulationResult r = simulate_schedule(lowered, per_rank_costs(shape, 1, 1, 0.25));
      EXPECT_FALSE(r.deadlocked) << name(shape) << ": " << r.deadlock;
    }
  });
  // GPipe and 1F1B at v = 1; interleaved at every v where p >= 2 divides m
  // (8 + 5 + 4 + 3 + 2 + 2 + 2 values of m for p = 2..8).
  EXPECT_EQ(valid, 8 * 16 + 8 * 16 + 4 * 26);
}

TEST(Schedule, BubbleMatchesTheClosedFormWithEqualForwardAndBackward) {
  for_each_shape([&](const PipelineShape& shape) {
    if (!refused_key(shape).empty()) return;
    const double p = shape.pp, m = double(shape.micro_batches), v = shape.virtual_stages;
    const double expected = shape.schedule == Schedule::interleaved ? (p - 1) / (v * m + p - 1) : (p - 1) / (m + p - 1);
    const SimulationResult r = simulate(shape, per_rank_costs(shape, 1, 1));
    EXPECT_NEAR(r.bubble_fraction, expected, 1e-9) << name(shape);
    EXPECT_NEAR(r.step_s, pipeline_closed_form_s(shape.pp, shape.virtual_stages, shape.micro_batches,
                                                 shape.schedule, 1, 1), 1e-9)
        << name(shape);
  });
}

TEST(Schedule, BubbleFormulaHoldsForUnequalForwardAndBackwardToo) {
  // Not required by the closed form's derivation for GPipe and 1F1B, and
  // Megatron's interleaved order keeps it as well: backward twice forward.
  for_each_shape([&](const PipelineShape& shape) {
    if (!refused_key(shape).empty()) return;
    const SimulationResult r = simulate(shape, per_rank_costs(shape, 1, 2));
    EXPECT_NEAR(r.step_s, pipeline_closed_form_s(shape.pp, shape.virtual_stages, shape.micro_batches,
                                                 shape.schedule, 1, 2), 1e-9)
        << name(shape);
  });
}

TEST(Schedule, PeakInFlightIsMForGPipeAndPMinusSFor1F1B) {
  for (int p = 1; p <= 8; ++p) {
    for (int64_t m = 1; m <= 16; ++m) {
      const SimulationResult gpipe = simulate(shape_of(Schedule::gpipe, p, 1, m), ActionCosts::uniform(p, 1, 1));
      const SimulationResult one = simulate(shape_of(Schedule::one_f_one_b, p, 1, m), ActionCosts::uniform(p, 1, 1));
      ASSERT_EQ(gpipe.peak_in_flight.size(), size_t(p));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(gpipe.peak_in_flight[s], m) << "gpipe p=" << p << " m=" << m << " stage " << s;
        EXPECT_EQ(one.peak_in_flight[s], std::min<int64_t>(p - s, m)) << "1f1b p=" << p << " m=" << m << " stage " << s;
      }
    }
  }
  const SimulationResult eval =
      simulate_schedule(lower_communication(generate_forward_only(shape_of(Schedule::gpipe, 3, 1, 4))),
                        ActionCosts::uniform(3, 1, 1));
  EXPECT_EQ(eval.peak_in_flight, std::vector<int64_t>(3, 0)) << "forward-only keeps nothing for a backward";
}


TEST(Schedule, ForwardOnlyLowersActivationsOnly) {
  const PipelineShape shape = shape_of(Schedule::interleaved, 2, 2, 2);
  const PipelineSchedule lowered = lower_communication(generate_forward_only(shape));
  EXPECT_TRUE(lowered.forward_only);
  EXPECT_EQ(joined(lowered.ranks[0]), "F0.0 sA0>1.0 rA2<1.0 F0.1 sA0>1.1 rA2<1.1 F2.0 sA2>3.0 F2.1 sA2>3.1");
  EXPECT_EQ(joined(lowered.ranks[1]), "rA1<0.0 rA1<0.1 F1.0 sA1>2.0 rA3<2.0 F1.1 sA1>2.1 rA3<2.1 F3.0 F3.1");
  // Forward only, unequal stages: T = sum(t_i) + (m - 1) max(t_i).
  const PipelineShape three = shape_of(Schedule::gpipe, 3, 1, 5);
  ActionCosts costs;
  costs.forward_s = {1.0, 3.0, 2.0};
  EXPECT_NEAR(simulate_schedule(lower_communication(generate_forward_only(three)), costs).step_s, 6.0 + 4 * 3.0,
              1e-9);
}


// 1F1B with every backward followed by its weight gradient (the kind
// zero-bubble schedules will use).
PipelineSchedule with_weight_gradients(int p, int64_t m) {
  PipelineSchedule s = generate_schedule(shape_of(Schedule::one_f_one_b, p, 1, m));
  for (auto& list : s.ranks) {
    std::vector<Action> out;
    for (const Action& a : list) {
      out.push_back(a);
      if (a.kind != ActionKind::backward) continue;
      out.push_back(a);
      out.back().kind = ActionKind::weight_gradient;
    }
    list = out;
  }
  return lower_communication(s);
}

TEST(Schedule, WeightGradientsValidateAndCostTheirTime) {
  const PipelineSchedule s = with_weight_gradients(3, 4);
  EXPECT_EQ(validation_error(s), "");
  ActionCosts costs = ActionCosts::uniform(3, 1, 1);
  EXPECT_THROW(simulate_schedule(s, costs), Error) << "no weight_gradient_s";
  costs.weight_gradient_s.assign(3, 0.5);
  const SimulationResult r = simulate_schedule(s, costs);
  EXPECT_FALSE(r.deadlocked) << r.deadlock;
  for (double busy : r.busy_s) EXPECT_NEAR(busy, 4 * 2.5, 1e-12);
  EXPECT_GT(r.step_s, simulate(shape_of(Schedule::one_f_one_b, 3, 1, 4), ActionCosts::uniform(3, 1, 1)).step_s);

  PipelineSchedule before = s;
  auto& list = before.ranks[2];
  const auto w = find_action(list, "W2.1");
  const Action moved = *w;
  list.erase(w);
  list.insert(find_action(list, "B2.1"), moved);
  expect_rule(before, "weight gradient after its backward", "W2.1");
  PipelineSchedule missing = s;
  remove_action(missing, 0, "W0.3");
  expect_rule(missing, "weight gradients for every backward", "W0.3");
}

TEST(Schedule, SimulatorReportsADeadlockOfACyclicSchedule) {
  // Rank 0 runs B0.0 before F0.1; rank 1 wants F1.1 (which needs F0.1)
  // before F1.0 and B1.0 (which B0.0 needs): each waits for the other.
  PipelineSchedule compute;
  compute.shape = shape_of(Schedule::one_f_one_b, 2, 1, 2);
  auto op = [](ActionKind k, int stage, int64_t micro) {
    Action a;
    a.kind = k, a.stage = stage, a.micro_batch = micro;
    return a;
  };
  compute.ranks = {{op(ActionKind::forward, 0, 0), op(ActionKind::backward, 0, 0), op(ActionKind::forward, 0, 1),
                    op(ActionKind::backward, 0, 1)},
                   {op(ActionKind::forward, 1, 1), op(ActionKind::forward, 1, 0), op(ActionKind::backward, 1, 0),
                    op(ActionKind::backward, 1, 1)}};
  const PipelineSchedule lowered = lower_communication(compute);
  EXPECT_EQ(validation_error(lowered), "") << "the order is valid; only running it shows the cycle";
  const SimulationResult r = simulate_schedule(lowered, ActionCosts::uniform(2, 1, 1));
  EXPECT_TRUE(r.deadlocked);
  EXPECT_NE(r.deadlock.find("rank 0 at B0.0"), std::string::npos) << r.deadlock;
  EXPECT_NE(r.deadlock.find("waits for B1.0 (rank 1)"), std::string::npos) << r.deadlock;
  EXPECT_NE(r.deadlock.find("rank 1 at F1.1"), std::string::npos) << r.deadlock;
  EXPECT_NE(r.deadlock.find("waits for F0.1 (rank 0)"), std::string::npos) << r.deadlock;
}

TEST(Schedule, ComputeListsRunToTheSameTimesAsLoweredOnes) {
  // What lets the cost model skip lowering: communication takes no rank time.
  for_each_shape([&](const PipelineShape& shape) {
    if (!refused_key(shape).empty() || shape.micro_batches % 5 != 1) return;
    ActionCosts costs = per_rank_costs(shape, 1, 2, 0.3);
    for (int stage = 0; stage < shape.stages(); ++stage) costs.forward_s[stage] *= 1 + 0.1 * (stage % 3);
    const PipelineSchedule compute = generate_schedule(shape);
    const SimulationResult plain = simulate_schedule(compute, costs);
    const SimulationResult lowered = simulate_schedule(lower_communication(compute), costs);
    EXPECT_EQ(plain.step_s, lowered.step_s) << name(shape);
    EXPECT_EQ(plain.busy_s, lowered.busy_s) << name(shape);
    EXPECT_EQ(plain.peak_in_flight, lowered.peak_in_flight) << name(shape);
    SimulationOptions step_only;
    step_only.timeline = false;
    const SimulationResult quick = simulate_schedule(compute, costs, step_only);
    EXPECT_EQ(quick.step_s, plain.step_s) << name(shape);
    EXPECT_TRUE(quick.timeline.empty());
  });
}

TEST(Schedule, TransfersDelayOnlyTheReceiver) {
  const PipelineShape one = shape_of(Schedule::one_f_one_b, 2, 1, 1);
  // F0 -> send -> F1, B1 -> send -> B0.
  EXPECT_NEAR(simulate(one, ActionCosts::uniform(2, 1, 2, 0.5)).step_s, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-9);
  // With many micro-batches a transfer shorter than a pass hides in steady state.
  const PipelineShape many = shape_of(Schedule::one_f_one_b, 2, 1, 16);
  const double without = simulate(many, ActionCosts::uniform(2, 1, 2)).step_s;
  EXPECT_LT(simulate(many, ActionCosts::uniform(2, 1, 2, 0.5)).step_s - without, 16 * 2 * 0.5);
}

// Each rank's link carries what it sends and what it receives at the full
// rate, shared by the transfers on it at once. Link-bound here: computes of
// 1 ms, transfers of 1 s.
TEST(Schedule, TransfersShareEachRanksLink) {
  const PipelineShape three = shape_of(Schedule::one_f_one_b, 3, 1, 32);
  const ActionCosts costs = ActionCosts::uniform(3, 1e-3, 1e-3, 1.0);
  // Forward only, the middle rank receives and sends at once, each way at the
  // full rate: the second link's transfers follow each other from the first
  // arrival (1.002 s) on, and the last stage computes the last at 33.002.
  const SimulationResult chain = simulate_schedule(lower_communication(generate_forward_only(three)), costs);
  EXPECT_NEAR(chain.step_s, 1.002 + 32 + 1e-3, 1e-9);
  // 1F1B: the middle rank sends each micro-batch's activation on and its
  // gradient back over its one link, 2 s of it per micro-batch.
  const double step = simulate(three, costs).step_s;
  EXPECT_GE(step, 2.0 * 32);
  EXPECT_LE(step, 2.0 * 32 + 2 * 2 * 2);
}

TEST(Schedule, UnequalStagesFollowSumPlusSlowest) {
  ActionCosts costs = ActionCosts::uniform(3, 0, 0);
  costs.forward_s = {1.0, 3.0, 2.0};
  EXPECT_NEAR(simulate(shape_of(Schedule::gpipe, 3, 1, 5), costs).step_s, 6.0 + 4 * 3.0, 1e-9);
}

TEST(Schedule, ManyStagesAndMicroBatchesStayFast) {
  // The largest shapes the search simulates, each some 0.1 s (timeline
  // included): the bound, far above, only catches a simulator gone quadratic.
  for (const PipelineShape& shape : {shape_of(Schedule::interleaved, 64, 2, 512),
                                     shape_of(Schedule::interleaved, 64, 4, 512),
                                     shape_of(Schedule::one_f_one_b, 64, 1, 512)}) {
    const auto start = std::chrono::steady_clock::now();
    const SimulationResult r = simulate(shape, per_rank_costs(shape, 1, 2));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double closed_form =
        pipeline_closed_form_s(shape.pp, shape.virtual_stages, shape.micro_batches, shape.schedule, 1, 2);
    EXPECT_NEAR(r.step_s, closed_form, 1e-6) << name(shape);
    EXPECT_LT(seconds, 5.0) << name(shape);
  }
}

TEST(Schedule, GridShowsEachRanksComputesOverTime) {
  const PipelineSchedule s = lowered_1f1b(2, 2);
  const SimulationResult equal = simulate_schedule(s, ActionCosts::uniform(2, 1, 1));
  EXPECT_EQ(render_schedule_grid(s, equal),
            "schedule 1f1b, p=2 v=1 m=2: step 6 s, bubble 33.3%, one column = 1 s\n"
            "rank 0 |F0.0  F0.1        B0.0        B0.1  |\n"
            "rank 1 |      F1.0  B1.0  F1.1  B1.1        |\n");
  const SimulationResult longer = simulate_schedule(s, ActionCosts::uniform(2, 1, 2));
  EXPECT_EQ(render_schedule_grid(s, longer, 0, 4),
            "schedule 1f1b, p=2 v=1 m=2: step 9 s, bubble 33.3%, one column = 1 s\n"
            "rank 0 |F0. F0.         B0.----     B0.---- |\n"
            "rank 1 |    F1. B1.---- F1. B1.----         |\n");
  EXPECT_THROW(render_schedule_grid(s, equal, 0, 1), Error);
}

}  // namespace
}  // namespace giant::planner
