// The pipeline executor on toy stages (a seeded linear layer and tanh each),
// ranks as threads: for each schedule the loss and every stage's weight
// gradient equal a sequential run of the same layers on one thread (the
// same operations in the same order per micro-batch: bitwise, except the
// gradient sum over micro-batches, which runs in the schedule's backward
// order: two orders of a sum of M terms differ by at most 2 gamma_M of the
// terms' magnitudes, support/rounding.h; the loss, summed in double, the
// same at double's unit roundoff); the executor's peak in-flight activations are
// the simulator's; a stage whose output has the wrong shape is an error
// naming the stage, and its peer fails instead of waiting.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/pipeline/executor.h"
#include "giant/planner/schedule_simulate.h"
#include "parallel/support/rank_threads.h"
#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::parallel {
namespace {

constexpr int64_t kWidth = 8, kRows = 3;

at::Tensor stage_weight(int stage) {
  return torch::randn({kWidth, kWidth}, torch::TensorOptions().dtype(torch::kFloat))
             .mul_(0.5)
             .add_(torch::eye(kWidth))
             .mul_(1.0 + 0.1 * stage);
}

at::Tensor micro_batch_input(int64_t m) {
  return torch::arange(kRows * kWidth, torch::kFloat).reshape({kRows, kWidth}).div_(10.0 + m);
}

at::Tensor stage_forward(const at::Tensor& x, const at::Tensor& w) { return torch::tanh(torch::matmul(x, w)); }
at::Tensor loss_of(const at::Tensor& y, int64_t m) { return y.pow(2).mean() * (1.0 + 0.25 * m); }

struct Reference {
  double loss_sum = 0;
  std::vector<at::Tensor> grads;  // per stage
};

Reference sequential(const std::vector<at::Tensor>& weights, int64_t micro_batches, double factor) {
  Reference r;
  std::vector<at::Tensor> leaves;
  for (const auto& w : weights) leaves.push_back(w.detach().clone().requires_grad_(true));
  for (int64_t m = 0; m < micro_batches; ++m) {
    at::Tensor x = micro_batch_input(m);
    for (const auto& w : leaves) x = stage_forward(x, w);
    at::Tensor loss = loss_of(x, m);
    r.loss_sum += loss.item<double>();
    (loss * factor).backward();
  }
  for (const auto& w : leaves) r.grads.push_back(w.grad().clone());
  return r;
}

void check_schedule(Schedule schedule, int pp, int v, int64_t m) {
  PipelineShape shape;
  shape.schedule = schedule;
  shape.pp = pp;
  shape.virtual_stages = v;
  shape.micro_batches = m;
  SCOPED_TRACE(std::string(schedule_name(schedule)) + " p=" + std::to_string(pp) + " v=" +
               std::to_string(v) + " m=" + std::to_string(m));
  const PipelineSchedule lowered = lower_communication(generate_schedule(shape));
  torch::manual_seed(7);
  std::vector<at::Tensor> weights;
  for (int s = 0; s < shape.stages(); ++s) weights.push_back(stage_weight(s));
  const double factor = 1.0 / static_cast<double>(m);
  const Reference expected = sequential(weights, m, factor);
  const planner::SimulationResult simulated =
      planner::simulate_schedule(lowered, planner::ActionCosts::uniform(shape.stages(), 1.0, 2.0));
  test::run_ranks(pp, [&](ccl::Communicator& comm) {
    std::vector<PipelineChunk> chunks;
    std::vector<at::Tensor> mine;
    for (int c = 0; c < v; ++c) {
      const int stage = c * pp + comm.rank();
      at::Tensor w = weights[stage].detach().clone().requires_grad_(true);
      mine.push_back(w);
      chunks.push_back({stage, [w](const at::Tensor& x) { return stage_forward(x, w); }});
    }
    PipelineExecutor executor(comm, chunks);
    PipelineStepFunctions functions;
    functions.input = [](int64_t micro) { return micro_batch_input(micro); };
    functions.loss = [](int64_t micro, const at::Tensor& y) { return loss_of(y, micro); };
    const PipelineStepResult result =
        executor.run(lowered, functions, {kRows, kWidth}, torch::TensorOptions().dtype(torch::kFloat), factor);
    for (int c = 0; c < v; ++c) {
      const int stage = c * pp + comm.rank();
      const double error = giant::test::relative_error(mine[c].grad(), expected.grads[stage]);
      EXPECT_LE(error, 2 * giant::test::gamma(m, giant::test::unit_roundoff(Precision::fp32))) << "stage " << stage;
      EXPECT_EQ(result.peak_in_flight[c], simulated.peak_in_flight[stage]) << "stage " << stage;
    }
    if (comm.rank() == shape.rank_of_stage(shape.stages() - 1)) {
      EXPECT_NEAR(result.loss_sum, expected.loss_sum,
                  2 * giant::test::gamma(m, giant::test::kDoubleUnitRoundoff) * std::abs(expected.loss_sum));
    } else {
      EXPECT_EQ(result.loss_sum, 0.0);
    }
  });
}

TEST(PipelineExecutor, EveryScheduleGivesTheSequentialGradients) {
  torch::set_num_threads(1);
  for (int pp : {2, 3}) {
    check_schedule(Schedule::gpipe, pp, 1, 5);
    check_schedule(Schedule::one_f_one_b, pp, 1, 5);
    check_schedule(Schedule::one_f_one_b, pp, 1, 1);
    check_schedule(Schedule::interleaved, pp, 2, 2 * pp);
  }
}

TEST(PipelineExecutor, ForwardOnlyRunsWithoutAutograd) {
  PipelineShape shape;
  shape.pp = 2;
  shape.micro_batches = 3;
  const auto lowered = lower_communication(generate_forward_only(shape));
  torch::manual_seed(3);
  const std::vector<at::Tensor> weights{stage_weight(0), stage_weight(1)};
  double expected = 0;
  for (int64_t m = 0; m < 3; ++m) {
    expected += loss_of(stage_forward(stage_forward(micro_batch_input(m), weights[0]), weights[1]), m).item<double>();
  }
  test::run_ranks(2, [&](ccl::Communicator& comm) {
    at::Tensor w = weights[comm.rank()].clone().requires_grad_(true);
    PipelineExecutor executor(comm, {{comm.rank(), [w](const at::Tensor& x) { return stage_forward(x, w); }}});
    PipelineStepFunctions functions;
    functions.input = [](int64_t micro) { return micro_batch_input(micro); };
    functions.loss = [](int64_t micro, const at::Tensor& y) {
      EXPECT_FALSE(y.requires_grad());
      return loss_of(y, micro);
    };
    const auto result = executor.run(lowered, functions, {kRows, kWidth}, torch::TensorOptions().dtype(torch::kFloat));
    if (comm.rank() == 1) {
      EXPECT_NEAR(result.loss_sum, expected, 2 * giant::test::gamma(3, giant::test::kDoubleUnitRoundoff) * expected);
    }
    EXPECT_FALSE(w.grad().defined());
  });
}

TEST(PipelineExecutor, AStageOfTheWrongShapeIsAnErrorNamingIt) {
  PipelineShape shape;
  shape.pp = 2;
  shape.micro_batches = 2;
  const auto lowered = lower_communication(generate_schedule(shape));
  std::vector<std::string> errors(2);
  test::run_ranks(2, [&](ccl::Communicator& comm) {
    at::Tensor w = torch::eye(kWidth).requires_grad_(true);
    PipelineExecutor executor(comm, {{comm.rank(), [w](const at::Tensor& x) {
                                        return torch::cat({torch::matmul(x, w), x}, 0);  // twice the rows
                                      }}});
    PipelineStepFunctions functions;
    functions.input = [](int64_t micro) { return micro_batch_input(micro); };
    functions.loss = [](int64_t micro, const at::Tensor& y) { return loss_of(y, micro); };
    try {
      executor.run(lowered, functions, {kRows, kWidth}, torch::TensorOptions().dtype(torch::kFloat));
    } catch (const Error& e) {
      errors[comm.rank()] = e.what();
      comm.abort(e.what());  // as the trainer's mesh does: the peer must not wait out the timeout
    }
  });
  EXPECT_NE(errors[0].find("pipeline stage 0's output is [6, 8]"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("[3, 8]"), std::string::npos) << errors[0];
  EXPECT_FALSE(errors[1].empty()) << "the next stage must fail too";
}

}  // namespace
}  // namespace giant::parallel
