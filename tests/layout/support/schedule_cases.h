// The schedule tests' cases (tests/layout/test_schedule.cc and the
// planner's simulator tests): shapes over the grid, the rules of
// check_pipeline_shape restated, and helpers that describe, edit and
// validate lowered schedules.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/layout/schedule.h"
#include "support/error_message.h"

namespace giant::test {

inline constexpr Schedule kSchedules[] = {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved};

inline PipelineShape shape_of(Schedule s, int p, int v, int64_t m) {
  PipelineShape shape;
  shape.schedule = s;
  shape.pp = p;
  shape.virtual_stages = v;
  shape.micro_batches = m;
  return shape;
}

inline std::string name(const PipelineShape& s) {
  return std::string(schedule_name(s.schedule)) + " p=" + std::to_string(s.pp) +
         " v=" + std::to_string(s.virtual_stages) + " m=" + std::to_string(s.micro_batches);
}

// The rules of check_pipeline_shape, restated: the key it must name, or ""
// for a shape that can be scheduled.
inline std::string refused_key(const PipelineShape& s) {
  const bool interleaved = s.schedule == Schedule::interleaved;
  if (s.virtual_stages > 1 && !interleaved) return "parallel.virtual_stages";
  if (interleaved && s.pp < 2) return "parallel.schedule";
  if (interleaved && s.micro_batches % s.pp != 0) return "train.global_batch";
  return "";
}

// Every shape of the grid: p 1..8, m 1..16, v 1..4, each schedule.
inline void for_each_shape(const std::function<void(const PipelineShape&)>& fn) {
  for (Schedule s : kSchedules)
    for (int p = 1; p <= 8; ++p)
      for (int64_t m = 1; m <= 16; ++m)
        for (int v = 1; v <= 4; ++v) fn(shape_of(s, p, v, m));
}

inline std::string joined(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) out += (out.empty() ? "" : " ") + describe(a);
  return out;
}

inline std::vector<Action>::iterator find_action(std::vector<Action>& list, const std::string& described) {
  return std::find_if(list.begin(), list.end(), [&](const Action& a) { return describe(a) == described; });
}

inline void remove_action(PipelineSchedule& s, int rank, const std::string& described) {
  auto& list = s.ranks[static_cast<size_t>(rank)];
  const auto it = find_action(list, described);
  ASSERT_NE(it, list.end()) << described << " not on rank " << rank << ": " << joined(list);
  list.erase(it);
}

// The validator's message for a broken schedule ("" if it passes).
inline std::string validation_error(const PipelineSchedule& s) {
  return giant::test::error_message([&] { validate_schedule(s); });
}

inline void expect_rule(const PipelineSchedule& s, const std::string& rule, const std::string& action) {
  const std::string error = validation_error(s);
  EXPECT_NE(error.find("(rule: " + rule + ")"), std::string::npos) << error;
  EXPECT_NE(error.find(action), std::string::npos) << error;
}

inline PipelineSchedule lowered_1f1b(int p, int64_t m) {
  return lower_communication(generate_schedule(shape_of(Schedule::one_f_one_b, p, 1, m)));
}

}  // namespace giant::test
