// Activation recomputation: the recompute function on its own (it runs the
// function again in backward, accumulates into the parameters through their
// gradient accumulators, keeps nothing without gradients, restores the
// generator), and GPT blocks with train.recompute none, selective and full:
// every parameter's gradient and the blocks' input gradient bitwise equal,
// fp32 and bf16, with and without dropout, over several accumulated
// micro-batches, forwards interleaved with backwards as a pipeline runs them.
#include <gtest/gtest.h>

#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/gpt.h"
#include "giant/models/recompute.h"

namespace giant::models {
namespace {

TEST(Recompute, RunsTheFunctionAgainInBackwardWithTheSameGradients) {
  torch::manual_seed(1);
  const torch::Tensor w = torch::randn({6}).requires_grad_(true);
  const torch::Tensor x = torch::randn({3, 6}).requires_grad_(true);
  int runs = 0;
  const TensorFunction f = [&](const torch::Tensor& input) {
    ++runs;
    return torch::dropout((input * w).tanh(), 0.5, true) * w;
  };
  // The plain graph, drawing its dropout mask from seed 7.
  torch::manual_seed(7);
  f(x).pow(2).sum().backward();
  const torch::Tensor w_grad = w.grad().clone(), x_grad = x.grad().clone();
  w.mutable_grad().reset();
  x.mutable_grad().reset();

  int hook_calls = 0;
  struct Counter : torch::autograd::FunctionPostHook {
    explicit Counter(int& calls) : calls_(calls) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& out,
                                              const torch::autograd::variable_list&) override {
      ++calls_;
      return out;
    }
    int& calls_;
  };
  auto accumulator = torch::autograd::impl::grad_accumulator(w);
  accumulator->add_post_hook(std::make_unique<Counter>(hook_calls));

  torch::manual_seed(7);
  runs = 0;
  const torch::Tensor y = recompute(f, x);
  EXPECT_EQ(runs, 1);
  torch::rand({100});  // draws between forward and backward (other micro-batches' dropout)
  y.pow(2).sum().backward();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(hook_calls, 1);
  EXPECT_TRUE(torch::equal(w.grad(), w_grad));
  EXPECT_TRUE(torch::equal(x.grad(), x_grad));
}

TEST(Recompute, RestoresTheGeneratorAfterBackward) {
  const torch::Tensor x = torch::randn({4, 4}).requires_grad_(true);
  const TensorFunction f = [](const torch::Tensor& input) { return torch::dropout(input, 0.3, true); };
  torch::manual_seed(3);
  const torch::Tensor y = recompute(f, x);
  torch::manual_seed(11);
  y.sum().backward();
  const torch::Tensor after_backward = torch::rand({8});
  torch::manual_seed(11);
  EXPECT_TRUE(torch::equal(after_backward, torch::rand({8})));
  // The mask backward used is the forward's: the gradient is zero exactly where y is.
  EXPECT_TRUE(torch::equal(x.grad() == 0, y.detach() == 0));
}

TEST(Recompute, WithoutGradientsItIsThePlainFunction) {
  const torch::Tensor w = torch::randn({5}).requires_grad_(true);
  const torch::Tensor x = torch::randn({2, 5});
  int runs = 0;
  const TensorFunction f = [&](const torch::Tensor& input) {
    ++runs;
    return input * w;
  };
  torch::NoGradGuard no_grad;
  const torch::Tensor y = recompute(f, x);
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y, x * w));
}

TEST(Recompute, AnInputWithoutGradientStillTrainsTheParameters) {
  const torch::Tensor w = torch::randn({5}).requires_grad_(true);
  const torch::Tensor x = torch::randn({2, 5});
  const TensorFunction f = [&](const torch::Tensor& input) { return (input * w).sin(); };
  f(x).sum().backward();
  const torch::Tensor expected = w.grad().clone();
  w.mutable_grad().reset();
  const torch::Tensor y = recompute(f, x);
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), expected));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Recompute, AnErrorInTheRecomputationReachesBackwardsCaller) {
  const torch::Tensor x = torch::randn({3}).requires_grad_(true);
  int runs = 0;
  const TensorFunction f = [&](const torch::Tensor& input) {
    GIANT_CHECK(++runs == 1, "recomputation failed on purpose");
    return input * 2;
  };
  const torch::Tensor y = recompute(f, x);
  try {
    y.sum().backward();
    FAIL() << "no error from the recomputation";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("recomputation failed on purpose"), std::string::npos) << e.what();
  }
}

GptConfig small(double dropout) {
  GptConfig c;
  c.layers = 3;
  c.hidden = 32;
  c.heads = 4;
  c.seq_len = 16;
  c.vocab = 60;
  c.vocab_pad = 32;
  c.dropout = dropout;
  return c;
}

struct Gradients {
  std::vector<std::string> names;
  std::vector<torch::Tensor> parameters;  // their gradients, in names' order
  std::vector<torch::Tensor> inputs;      // block.0's input gradient per micro-batch
  std::vector<torch::Tensor> losses;
  torch::Tensor next_draw;                // the generator after the step
};

// Three micro-batches accumulated in the order of a pipeline's 1F1B with two
// in flight: F0 F1 B0 F2 B1 B2, so the generator moves between a forward and
// its backward.
Gradients train_step(Recompute recompute, double dropout, torch::ScalarType dtype) {
  const GptConfig c = small(dropout);
  auto model = gpt_layer_list(c, recompute).build_all(5, torch::kFloat);
  model->to(dtype);
  model->train();
  torch::manual_seed(42);
  const torch::Tensor tokens = torch::randint(c.vocab, {3, 2, c.seq_len + 1}, torch::kLong);
  Gradients g;
  std::vector<torch::Tensor> losses(3), embedded(3);
  auto forward = [&](int m) {
    const torch::Tensor inputs = tokens[m].narrow(1, 0, c.seq_len), targets = tokens[m].narrow(1, 1, c.seq_len);
    torch::Tensor x = model->layer(0).forward<torch::Tensor>(inputs);
    x.retain_grad();
    embedded[m] = x;
    for (size_t i = 1; i < model->size(); ++i) x = model->layer(i).forward<torch::Tensor>(std::move(x));
    losses[m] = gpt_loss(x, targets) / 3;
  };
  auto backward = [&](int m) { losses[m].backward(); };
  forward(0);
  forward(1);
  backward(0);
  forward(2);
  backward(1);
  backward(2);
  for (const auto& item : model->named_parameters()) {
    g.names.push_back(item.key());
    g.parameters.push_back(item.value().grad().clone());
  }
  for (const auto& e : embedded) g.inputs.push_back(e.grad().clone());
  for (const auto& l : losses) g.losses.push_back(l.detach());
  g.next_draw = torch::rand({4});
  return g;
}

void expect_bitwise_equal(const Gradients& a, const Gradients& b) {
  ASSERT_EQ(a.names, b.names);
  for (size_t i = 0; i < a.names.size(); ++i) {
    ASSERT_TRUE(a.parameters[i].defined()) << a.names[i];
    EXPECT_TRUE(torch::equal(a.parameters[i], b.parameters[i])) << a.names[i];
  }
  for (size_t m = 0; m < a.inputs.size(); ++m) {
    EXPECT_TRUE(torch::equal(a.inputs[m], b.inputs[m])) << "block.0's input gradient, micro-batch " << m;
    EXPECT_TRUE(torch::equal(a.losses[m], b.losses[m])) << "loss of micro-batch " << m;
  }
  EXPECT_TRUE(torch::equal(a.next_draw, b.next_draw)) << "the generator after the step";
}

class RecomputeBlocks : public ::testing::TestWithParam<std::tuple<double, torch::ScalarType>> {};

TEST_P(RecomputeBlocks, GradientsAreBitwiseThoseWithoutRecomputation) {
  torch::set_num_threads(1);
  const auto [dropout, dtype] = GetParam();
  const Gradients none = train_step(Recompute::none, dropout, dtype);
  for (Recompute r : {Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(recompute_name(r));
    expect_bitwise_equal(train_step(r, dropout, dtype), none);
  }
  if (dropout > 0) {  // the masks are real: without them the gradients differ
    const Gradients plain = train_step(Recompute::none, 0.0, dtype);
    EXPECT_FALSE(torch::equal(plain.inputs[0], none.inputs[0]));
  }
}

INSTANTIATE_TEST_SUITE_P(DropoutAndPrecision, RecomputeBlocks,
                         ::testing::Combine(::testing::Values(0.0, 0.2),
                                            ::testing::Values(torch::kFloat, torch::kBFloat16)));

TEST(RecomputeBlocks, EvaluationAndInferenceNeverRecompute) {
  const GptConfig c = small(0.2);
  torch::manual_seed(3);
  const torch::Tensor tokens = torch::randint(c.vocab, {2, c.seq_len}, torch::kLong);
  auto none = gpt_layer_list(c).build_all(5, torch::kFloat);
  auto full = gpt_layer_list(c, Recompute::full).build_all(5, torch::kFloat);
  auto selective = gpt_layer_list(c, Recompute::selective).build_all(5, torch::kFloat);
  for (auto* model : {&none, &full, &selective}) (*model)->eval();
  const torch::Tensor expected = none->forward(tokens);
  EXPECT_TRUE(torch::equal(full->forward(tokens), expected));
  EXPECT_TRUE(torch::equal(selective->forward(tokens), expected));
  torch::NoGradGuard no_grad;
  full->train();
  EXPECT_FALSE(full->forward(tokens).requires_grad());
}

}  // namespace
}  // namespace giant::models
