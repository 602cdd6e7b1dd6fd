// Pipeline schedules as data: the shape check, the generators, lowering and
// the validator (the simulator's tests are the planner's).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/layout/schedule.h"
#include "layout/support/schedule_cases.h"

namespace giant {
namespace {

using namespace test;

TEST(Schedule, DescribesActions) {
  const PipelineSchedule s = lowered_1f1b(2, 2);
  EXPECT_EQ(joined(s.ranks[0]), "F0.0 sA0>1.0 rG0<1.0 F0.1 sA0>1.1 rG0<1.1 B0.0 B0.1");
  EXPECT_EQ(joined(s.ranks[1]), "rA1<0.0 F1.0 rA1<0.1 B1.0 sG1>0.0 F1.1 B1.1 sG1>0.1");
  Action w;
  w.kind = ActionKind::weight_gradient, w.stage = 3, w.micro_batch = 1;
  EXPECT_EQ(describe(w), "W3.1");
  EXPECT_STREQ(action_kind_name(ActionKind::recv_gradient), "recv_gradient");
  EXPECT_TRUE(is_compute(ActionKind::weight_gradient));
  EXPECT_FALSE(is_compute(ActionKind::send_activation));
}

TEST(Schedule, EveryInvalidShapeIsRefusedNamingTheKeyAndTheRule) {
  int refused = 0;
  for_each_shape([&](const PipelineShape& shape) {
    const std::string key = refused_key(shape);
    if (key.empty()) return;
    ++refused;
    try {
      check_pipeline_shape(shape);
      ADD_FAILURE() << name(shape) << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key) << name(shape);
      const std::string what = e.what();
      const std::string rule = key == "parallel.virtual_stages" ? "need parallel.schedule = interleaved"
                               : key == "parallel.schedule"     ? "needs parallel.pp >= 2"
                                                                : "global_batch / (dp x micro_batch) to be a multiple "
                                                                  "of parallel.pp";
      EXPECT_NE(what.find(rule), std::string::npos) << name(shape) << ": " << what;
    }
    EXPECT_THROW(generate_schedule(shape), ConfigError) << name(shape);
    // Forwards alone (evaluation) run in any micro-batch count.
    if (key == "train.global_batch") {
      EXPECT_EQ(validation_error(lower_communication(generate_forward_only(shape))), "") << name(shape);
    } else {
      EXPECT_THROW(generate_forward_only(shape), ConfigError) << name(shape);
    }
  });
  EXPECT_GT(refused, 0);
  const struct {
    PipelineShape shape;
    std::string key, rule;
  } below_one[] = {
      {shape_of(Schedule::one_f_one_b, 0, 1, 4), "parallel.pp", "at least 1, got 0"},
      {shape_of(Schedule::interleaved, 2, 0, 4), "parallel.virtual_stages", "at least 1, got 0"},
      {shape_of(Schedule::gpipe, 2, 1, 0), "train.global_batch", "must be at least 1, got 0"},
      {shape_of(Schedule::one_f_one_b, 2, 1, -3), "train.global_batch", "must be at least 1, got -3"},
  };
  for (const auto& c : below_one) {
    try {
      check_pipeline_shape(c.shape);
      ADD_FAILURE() << name(c.shape) << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), c.key) << name(c.shape);
      EXPECT_NE(std::string(e.what()).find(c.rule), std::string::npos) << e.what();
    }
  }
}

TEST(Schedule, LoweringPostsEachReceiveOneComputeAheadAndSendsRightAfter) {
  for (Schedule s : kSchedules) {
    const PipelineShape shape = shape_of(s, 4, s == Schedule::interleaved ? 2 : 1, 8);
    const PipelineSchedule lowered = lower_communication(generate_schedule(shape));
    for (const auto& list : lowered.ranks) {
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (a.kind == ActionKind::send_activation || a.kind == ActionKind::send_gradient) {
          ASSERT_GT(i, 0u);
          EXPECT_EQ(output_send(shape, list[i - 1]), a) << name(shape) << ": " << describe(a);
        }
        if (a.kind != ActionKind::recv_activation && a.kind != ActionKind::recv_gradient) continue;
        // One compute between it and its consumer, or none when the
        // consumer is the rank's first compute.
        size_t consumer = i + 1;
        int between = 0;
        for (; consumer < list.size() && !(input_receive(shape, list[consumer]) == a); ++consumer)
          between += is_compute(list[consumer].kind);
        ASSERT_LT(consumer, list.size()) << name(shape) << ": nothing consumes " << describe(a);
        const bool first = std::none_of(list.begin(), list.begin() + consumer,
                                        [](const Action& x) { return is_compute(x.kind); });
        EXPECT_EQ(between, first ? 0 : 1)
            << name(shape) << ": " << describe(a) << " before " << describe(list[consumer]);
      }
    }
  }
  EXPECT_THROW(lower_communication(lowered_1f1b(2, 2)), Error) << "lowering takes compute actions only";
}

TEST(Schedule, LastBackwardOfEachStage) {
  // GPipe's backwards run in reverse: micro-batch 0 is each stage's last.
  const PipelineSchedule gpipe = generate_schedule(shape_of(Schedule::gpipe, 2, 1, 4));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(last_backward_micro_batch(gpipe.ranks[r]), (std::map<int, int64_t>{{r, 0}}));
  const PipelineSchedule ofob = lower_communication(generate_schedule(shape_of(Schedule::one_f_one_b, 2, 1, 4)));
  EXPECT_EQ(last_backward_micro_batch(ofob.ranks[1]), (std::map<int, int64_t>{{1, 3}}));
  // Interleaved: every chunk of the rank ends on the last micro-batch.
  const PipelineSchedule inter = generate_schedule(shape_of(Schedule::interleaved, 2, 2, 4));
  EXPECT_EQ(last_backward_micro_batch(inter.ranks[0]), (std::map<int, int64_t>{{0, 3}, {2, 3}}));
  // The rule the reducers rely on: no backward of a stage after its last.
  for (Schedule s : kSchedules) {
    const PipelineShape shape = shape_of(s, 4, s == Schedule::interleaved ? 2 : 1, 8);
    for (const auto& list : generate_schedule(shape).ranks) {
      const std::map<int, int64_t> last = last_backward_micro_batch(list);
      std::map<int, bool> seen;
      for (const Action& a : list) {
        if (a.kind != ActionKind::backward) continue;
        EXPECT_FALSE(seen[a.stage]) << name(shape) << ": " << describe(a) << " after the stage's last backward";
        if (a.micro_batch == last.at(a.stage)) seen[a.stage] = true;
      }
    }
  }
}

TEST(Schedule, ValidatorRejectsHandBrokenSchedules) {
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    auto& list = s.ranks[1];
    const auto backward = find_action(list, "B1.0");
    const Action moved = *backward;
    list.erase(backward);
    list.insert(find_action(list, "F1.0"), moved);
    expect_rule(s, "backward after its forward", "B1.0");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    s.ranks[1].push_back(*find_action(s.ranks[1], "F1.2"));
    expect_rule(s, "each forward once", "F1.2");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    remove_action(s, 1, "B1.3");
    expect_rule(s, "each backward once", "B1.3 is missing");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);  // the receive and its send both gone
    remove_action(s, 1, "rA1<0.1");
    remove_action(s, 0, "sA0>1.1");
    expect_rule(s, "input received", "F1.1");
    expect_rule(s, "input received", "rA1<0.1");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    remove_action(s, 1, "rA1<0.1");
    expect_rule(s, "send matched by a receive", "sA0>1.1");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    remove_action(s, 2, "sG2>1.2");
    expect_rule(s, "receive matched by a send", "rG1<2.2");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    const Action moved = *find_action(s.ranks[1], "F1.0");
    remove_action(s, 1, "F1.0");
    s.ranks[0].push_back(moved);
    expect_rule(s, "stage on its rank", "F1.0");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    auto& list = s.ranks[1];
    const Action recv = *find_action(list, "rA1<0.2");
    list.erase(find_action(list, "rA1<0.2"));
    list.insert(find_action(list, "F1.2") + 1, recv);
    expect_rule(s, "receive before its consumer", "rA1<0.2");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    auto& list = s.ranks[0];
    const Action send = *find_action(list, "sA0>1.3");
    list.erase(find_action(list, "sA0>1.3"));
    list.insert(list.begin(), send);
    expect_rule(s, "send after its compute", "sA0>1.3");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    find_action(s.ranks[0], "sA0>1.0")->peer_stage = 2;
    expect_rule(s, "peer is the adjacent stage", "sA0>2.0");
  }
  {
    PipelineSchedule s = lower_communication(generate_forward_only(shape_of(Schedule::gpipe, 2, 1, 2)));
    Action b;
    b.kind = ActionKind::backward, b.stage = 1, b.micro_batch = 0;
    s.ranks[1].push_back(b);
    expect_rule(s, "forward only", "B1.0");
  }
  {
    PipelineSchedule s = lowered_1f1b(3, 4);
    s.ranks.pop_back();
    expect_rule(s, "one list per rank", "2 lists for pp = 3");
  }
}

}  // namespace
}  // namespace giant
