// Layer lists: lazy building, parameter counts, seeded initialisation that
// does not depend on build order or thread, and tied weights.
#include <gtest/gtest.h>

#include <thread>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/layer_list.h"
#include "giant/parallel/seeded_init.h"

namespace giant::parallel {
namespace {

// A linear layer whose weight is drawn from its context; the last layer of
// the test list ties its weight to the first's ("w0").
class ScaleImpl : public torch::nn::Module {
 public:
  ScaleImpl(const LayerContext& c, int64_t width, bool tied) {
    if (tied && c.shared().contains("w0")) {
      weight_ = c.shared().get("w0");
    } else if (tied) {
      weight_ = register_parameter("weight", c.normal_as(0, "weight", {width, width}, 0.5));
    } else {
      weight_ = register_parameter("weight", c.normal("weight", {width, width}, 0.5));
      bias_ = register_parameter("bias", c.zeros({width}));
      if (c.index() == 0) c.shared().publish("w0", weight_);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::matmul(x, weight_);
    return bias_.defined() ? x + bias_ : x;
  }

 private:
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(Scale);

constexpr int64_t kWidth = 6;

LayerList test_list(int layers) {
  LayerList list;
  for (int i = 0; i < layers; ++i) {
    list.add({"scale." + std::to_string(i), "Scale", kWidth * kWidth + kWidth,
              [](const LayerContext& c) { return torch::nn::AnyModule(Scale(c, kWidth, false)); }});
  }
  list.add({"tied", "Scale", 0,
            [](const LayerContext& c) { return torch::nn::AnyModule(Scale(c, kWidth, true)); }});
  return list;
}

std::vector<torch::Tensor> values(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

bool bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

TEST(SeededInit, DependsOnlyOnSeedLayerAndName) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  const auto a = seeded_normal({4, 5}, 1.0, parameter_seed(7, 3, "w"), options);
  const auto b = seeded_normal({4, 5}, 1.0, parameter_seed(7, 3, "w"), options);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, seeded_normal({4, 5}, 1.0, parameter_seed(7, 4, "w"), options)));
  EXPECT_FALSE(torch::equal(a, seeded_normal({4, 5}, 1.0, parameter_seed(7, 3, "v"), options)));
  EXPECT_FALSE(torch::equal(a, seeded_normal({4, 5}, 1.0, parameter_seed(8, 3, "w"), options)));
  // Global generator state plays no part.
  torch::manual_seed(99);
  torch::rand({100});
  EXPECT_TRUE(torch::equal(a, seeded_normal({4, 5}, 1.0, parameter_seed(7, 3, "w"), options)));
  // A double-precision copy holds the same draws.
  const auto d = seeded_normal({4, 5}, 1.0, parameter_seed(7, 3, "w"), options.dtype(torch::kDouble));
  EXPECT_TRUE(torch::equal(a, d.to(torch::kFloat)));
  const double std = a.std().item<double>();
  EXPECT_GT(std, 0.3);
  EXPECT_LT(std, 3.0);
}

TEST(LayerList, SpecCountsMatchBuiltModules) {
  const LayerList list = test_list(3);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  LayerStack all = list.build_all(1, options);
  EXPECT_EQ(count_parameters(*all), list.total_parameters());
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    EXPECT_EQ(count_parameters(*list.build(1, options, i, i + 1)), list.at(i).num_parameters) << i;
  }
  // The tied layer built without its owner holds its own copy, which its
  // spec leaves to the owner's count.
  LayerStack alone = list.build(1, options, list.size() - 1, list.size());
  EXPECT_EQ(count_parameters(*alone), kWidth * kWidth);
}

TEST(LayerList, SameWeightsInAnyOrderAndThread) {
  const LayerList list = test_list(4);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  const auto reference = values(*list.build_all(11, options));
  // Layer by layer, last first.
  std::vector<torch::Tensor> reversed;
  for (size_t i = list.size() - 1; i-- > 0;) {
    auto v = values(*list.build(11, options, i, i + 1));
    reversed.insert(reversed.begin(), v.begin(), v.end());
  }
  auto all_but_tied = reference;
  EXPECT_TRUE(bitwise_equal(reversed, all_but_tied));
  // In another thread.
  std::vector<torch::Tensor> threaded;
  std::thread([&] { threaded = values(*list.build_all(11, options)); }).join();
  EXPECT_TRUE(bitwise_equal(threaded, reference));
  // Another seed, other weights.
  EXPECT_FALSE(bitwise_equal(values(*list.build_all(12, options)), reference));
}

TEST(LayerList, TiedLayerSharesTheOwnersWeight) {
  const LayerList list = test_list(2);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  LayerStack all = list.build_all(5, options);
  // Built together, the output of x through the tied layer uses layer 0's weight.
  const auto x = torch::eye(kWidth);
  auto& first = all->layer(0);
  auto& tied = all->layer(all->size() - 1);
  const auto w0 = first.forward<torch::Tensor>(x) - first.ptr()->parameters()[1];  // minus bias
  EXPECT_TRUE(torch::allclose(tied.forward<torch::Tensor>(x), w0));
  // Built alone, the copy equals the owner's weight bitwise.
  LayerStack alone = list.build(5, options, list.size() - 1, list.size());
  EXPECT_TRUE(torch::equal(alone->parameters()[0], all->parameters()[0]));
  // A gradient through both uses reaches the one shared tensor.
  all->forward(torch::ones({2, kWidth})).sum().backward();
  EXPECT_TRUE(all->parameters()[0].grad().defined());
}

TEST(LayerList, RejectsDuplicateNamesAndBadRanges) {
  LayerList list = test_list(1);
  EXPECT_THROW(list.add({"scale.0", "Scale", 0, list.at(0).build}), Error);
  EXPECT_THROW(list.add({"nobuild", "Scale", 0, nullptr}), Error);
  EXPECT_THROW(list.build(0, torch::TensorOptions(), 1, 5), Error);
  LayerStack empty = list.build(0, torch::TensorOptions(), 1, 1);
  EXPECT_EQ(empty->size(), 0u);
  const auto x = torch::ones({2});
  EXPECT_TRUE(torch::equal(empty->forward(x), x));  // no layers: identity
}

}  // namespace
}  // namespace giant::parallel
