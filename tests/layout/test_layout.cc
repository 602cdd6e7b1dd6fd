// The layout's text: --layout filters, schedules, recomputation and
// placement, and their errors; how a layout reads as a pipeline.
#include <gtest/gtest.h>

#include <string>

#include "giant/base/error.h"
#include "giant/layout/layout.h"
#include "giant/layout/schedule.h"
#include "support/error_message.h"

namespace giant {
namespace {

TEST(LayoutText, Parse) {  // whether a layout runs a model: tests/planner/test_specs.cc
  const LayoutFilter f = parse_layout_filter("tp=4,pp=4,dp=2,mb=2,schedule=interleaved,v=2,zero=1,recompute=full,sp=1,placement=dp<tp<pp");
  EXPECT_EQ(*f.tp, 4);
  EXPECT_EQ(*f.micro_batch, 2);
  EXPECT_EQ(*f.schedule, Schedule::interleaved);
  EXPECT_EQ(*f.recompute, Recompute::full);
  EXPECT_TRUE(*f.sequence_parallel);
  EXPECT_EQ((*f.order)[0], Axis::dp);
  EXPECT_NE(giant::test::error_message([] { parse_layout_filter("tp=4,xx=2"); }).find("--layout xx"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_layout_filter("tp=four"); }).find("--layout tp"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_layout_filter("schedule=zb"); }).find("--layout schedule"), std::string::npos);
  EXPECT_NE(giant::test::error_message([] { parse_layout_filter("placement=tp<tp<pp"); }).find("placement"), std::string::npos);
  EXPECT_EQ(*parse_layout_filter("dp=4,wire=int8").grad_wire, ccl::GradWire::int8);
  EXPECT_EQ(*parse_layout_filter("grad_wire=none").grad_wire, ccl::GradWire::none);
  EXPECT_NE(giant::test::error_message([] { parse_layout_filter("wire=int2"); }).find("--layout wire"), std::string::npos);
}

TEST(LayoutText, DescribesTheLayoutAndItsPlacement) {
  Layout l;
  l.tp = 4, l.pp = 4, l.dp = 2, l.recompute = Recompute::full;
  EXPECT_EQ(l.describe(), "tp=4 pp=4 dp=2 mb=1 1f1b zero=0 recompute=full placement=tp<dp<pp");
  EXPECT_EQ(l.stride_of(Axis::tp), 1);
  EXPECT_EQ(l.stride_of(Axis::dp), 4);
  EXPECT_EQ(l.stride_of(Axis::pp), 8);
  EXPECT_EQ(why_train_cannot_run(l), "");
  l.order = parse_placement("dp<tp<pp");
  EXPECT_NE(why_train_cannot_run(l).find("tp<dp<pp"), std::string::npos);
}

TEST(LayoutText, ThePipelineOfALayout) {
  Layout l;
  l.dp = 2, l.pp = 4, l.micro_batch = 2, l.schedule = Schedule::interleaved, l.virtual_stages = 2;
  EXPECT_EQ(l.micro_batches(32), 8);
  const PipelineShape shape = pipeline_shape(l, l.micro_batches(32));
  EXPECT_EQ(shape.schedule, Schedule::interleaved);
  EXPECT_EQ(shape.pp, 4);
  EXPECT_EQ(shape.virtual_stages, 2);
  EXPECT_EQ(shape.micro_batches, 8);
  EXPECT_EQ(shape.stages(), 8);
}

}  // namespace
}  // namespace giant
