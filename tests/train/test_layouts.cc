// Every (dp, tp) layout reproduces the single process: after one step the
// loss and every gradient (a shard against the slice of the whole gradient),
// the losses over 20 steps, and replicated parameters stay bitwise equal on
// every rank. Ranks run as threads over one MemoryStore; dropout is 0.
// Bounds (relative norms) come from the rounding model of
// train/support/layout_bounds.h: the roundings the layout makes that the
// single process does not (tp's split reductions, dp's other grouping of
// the micro-batch gradients), in the run's precision. With a sharded
// optimizer (parallel.zero=1), whose ranks hold the average of their own
// blocks only, the final parameters are checked instead against the same
// layout without it: bitwise equal without clipping; with clipping within
// the model's bound for another grouping of the gradient reduction, since
// the gradient norm then sums the owners' stretches in another order (in
// double since issue 20, so the clipping scale rounds to the same float).
// Buckets are small (parallel.bucket_mb=0.01), so gradients are reduced in
// several pieces and the sharded parameters gathered layer by layer behind
// the next forward.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/ccl/config.h"
#include "giant/train/auto_layout.h"
#include "train/support/layout_bounds.h"
#include "train/support/layout_runner.h"

namespace giant::train {
namespace {

using test::expected_shard;
using test::Layout;
using test::layout_bounds;
using test::LayoutBounds;
using test::RankResult;
using test::relative_error;
using test::RunResult;

class LayoutTest : public ::testing::Test {
 protected:
  RunResult run(Layout layout) const { return runner_.run(layout); }
  LayoutBounds bounds(Layout layout, test::Reference reference = test::Reference::single_process) const {
    return layout_bounds(runner_.config(layout), reference);
  }
  test::LayoutRunner runner_;
};

TEST_F(LayoutTest, EveryLayoutReproducesTheSingleProcess) {
  torch::set_num_threads(1);
  const RunResult single = run({1, 1});
  ASSERT_EQ(single.losses.size(), 20u);
  EXPECT_LT(single.losses.back(), single.losses.front());
  const RankResult& reference = single.ranks[0];

  std::map<std::tuple<int, int, bool>, RunResult> unsharded;  // by (dp, tp, clip)
  for (Layout layout : {Layout{1, 2}, Layout{2, 1}, Layout{2, 2}, Layout{1, 4}, Layout{2, 1, 1}, Layout{2, 2, 1},
                        Layout{2, 1, 0, false}, Layout{2, 1, 1, false}}) {
    SCOPED_TRACE("dp " + std::to_string(layout.dp) + " tp " + std::to_string(layout.tp) + " zero " +
                 std::to_string(layout.zero) + (layout.clip ? "" : " without clipping"));
    if (!layout.clip && layout.zero == 0) {  // only the reference of the next
      unsharded.emplace(std::make_tuple(layout.dp, layout.tp, false), run(layout));
      continue;
    }
    const RunResult result = run(layout);
    ASSERT_EQ(result.losses.size(), single.losses.size());
    const LayoutBounds bound = bounds(layout);
    double worst_grad = 0, worst_loss = 0;
    if (layout.clip) {  // the single process clips
      for (size_t step = 0; step < single.losses.size(); ++step) {
        const double error = std::abs(result.losses[step] - single.losses[step]) / single.losses[step];
        EXPECT_LE(error, bound.loss) << step;
        worst_loss = std::max(worst_loss, error);
      }
    }
    double worst_param = 0, param_bound = 0;
    for (const RankResult& rank : result.ranks) {
      if (layout.zero == 1) break;  // its ranks hold the average of their own blocks only
      ASSERT_EQ(rank.first_grads.size(), reference.first_grads.size());
      for (const auto& [name, grad] : rank.first_grads) {
        const torch::Tensor expected =
            expected_shard(name, reference.first_grads.at(name), rank.tp_rank, layout.tp);
        ASSERT_EQ(grad.sizes(), expected.sizes()) << name;
        worst_grad = std::max(worst_grad, relative_error(grad, expected));
        EXPECT_LE(relative_error(grad, expected), bound.first_gradient)
            << name << " on dp " << rank.dp_rank << " tp " << rank.tp_rank;
      }
    }
    if (layout.zero == 1) {
      const RunResult& plain = unsharded.at({layout.dp, layout.tp, layout.clip});
      const LayoutBounds against_zero0 = bounds(layout, test::Reference::other_zero_stage);
      for (size_t r = 0; r < result.ranks.size(); ++r) {
        for (const auto& [name, value] : result.ranks[r].final_params) {
          const torch::Tensor& expected = plain.ranks[r].final_params.at(name);
          const double error = relative_error(value, expected);
          worst_param = std::max(worst_param, error);
          param_bound = std::max(param_bound, against_zero0.parameter(expected));
          if (layout.clip) {
            EXPECT_LE(error, against_zero0.parameter(expected)) << name << " on rank " << r << " against zero=0";
          } else {
            EXPECT_TRUE(torch::equal(value, expected)) << name << " on rank " << r << " against zero=0";
          }
        }
      }
    }
    std::printf("layout dp=%d tp=%d zero=%d%s: worst gradient relative error %.2e (bound %.2e), worst loss "
                "relative error %.2e (bound %.2e), worst final parameter relative error against zero=0 %.2e "
                "(loosest bound %.2e)\n",
                layout.dp, layout.tp, layout.zero, layout.clip ? "" : " (no clipping)", worst_grad,
                bound.first_gradient, worst_loss, bound.loss, worst_param, param_bound);
    // Replicated parameters are bitwise equal on every rank; a shard on every
    // data-parallel replica of its tp rank.
    for (const RankResult& rank : result.ranks) {
      for (const auto& [name, value] : rank.final_params) {
        const bool shard = parallel::is_tensor_parallel_shard(name);
        const RankResult& other = result.ranks[shard ? rank.tp_rank : 0];
        EXPECT_TRUE(torch::equal(value, other.final_params.at(name)))
            << name << " differs between ranks (dp " << rank.dp_rank << ", tp " << rank.tp_rank << ")";
      }
    }
    if (layout.zero == 0) unsharded.emplace(std::make_tuple(layout.dp, layout.tp, layout.clip), result);
  }
}

// The same in bf16 against the single bf16 process, with the same model's
// bounds at bf16's unit roundoff (2^-8): they hold whatever kernels libtorch
// takes, those that accumulate a product in fp32 (oneDNN with AVX-512) and
// those that accumulate in bf16 (its fallback gemm, on CPUs without
// AVX-512), which err about five times more here (measured: gradients
// within 4.9e-3 with oneDNN, 2.5e-2 with the fallback, as on a Zen 3;
// model 1.8e-1). A missing reduction errs by about 1. dp alone is exact,
// its micro-batch gradients summing in fp32. Replicated parameters are
// still bitwise equal on every rank: the update runs on the same fp32
// masters and gradients, and rounds them the same way.
TEST_F(LayoutTest, Bf16LayoutsReproduceTheSingleBf16Process) {
  torch::set_num_threads(1);
  const RunResult single = run({1, 1, 0, true, "bf16"});
  ASSERT_EQ(single.losses.size(), 20u);
  EXPECT_LT(single.losses.back(), single.losses.front());
  const RankResult& reference = single.ranks[0];
  for (Layout layout : {Layout{2, 1, 0, true, "bf16"}, Layout{1, 2, 0, true, "bf16"}, Layout{2, 2, 0, true, "bf16"},
                        Layout{2, 2, 1, true, "bf16"}}) {
    SCOPED_TRACE("bf16 dp " + std::to_string(layout.dp) + " tp " + std::to_string(layout.tp) + " zero " +
                 std::to_string(layout.zero));
    const RunResult result = run(layout);
    ASSERT_EQ(result.losses.size(), single.losses.size());
    const LayoutBounds bound = bounds(layout);
    double worst_loss = 0, worst_grad = 0;
    for (size_t step = 0; step < single.losses.size(); ++step) {
      const double error = std::abs(result.losses[step] - single.losses[step]) / single.losses[step];
      EXPECT_LE(error, bound.loss) << step;
      worst_loss = std::max(worst_loss, error);
    }
    for (const RankResult& rank : result.ranks) {
      if (layout.zero == 1) break;  // its ranks hold the average of their own blocks only
      for (const auto& [name, grad] : rank.first_grads) {
        const torch::Tensor expected = expected_shard(name, reference.first_grads.at(name), rank.tp_rank, layout.tp);
        ASSERT_EQ(grad.sizes(), expected.sizes()) << name;
        const double error = relative_error(grad, expected);
        worst_grad = std::max(worst_grad, error);
        EXPECT_LE(error, bound.first_gradient) << name << " on dp " << rank.dp_rank << " tp " << rank.tp_rank;
      }
    }
    std::printf("bf16 layout dp=%d tp=%d zero=%d: worst gradient relative error %.2e (bound %.2e), worst loss relative "
                "error %.2e (bound %.2e)\n",
                layout.dp, layout.tp, layout.zero, worst_grad, bound.first_gradient, worst_loss, bound.loss);
    for (const RankResult& rank : result.ranks) {
      for (const auto& [name, value] : rank.final_params) {
        EXPECT_EQ(value.scalar_type(), torch::kBFloat16) << name;
        const bool shard = parallel::is_tensor_parallel_shard(name);
        const RankResult& other = result.ranks[shard ? rank.tp_rank : 0];
        EXPECT_TRUE(torch::equal(value, other.final_params.at(name)))
            << name << " differs between ranks (dp " << rank.dp_rank << ", tp " << rank.tp_rank << ")";
      }
    }
  }
}

TEST(LayoutChecks, BadLayoutsNameTheKeyBeforeAnyWork) {
  auto key_of = [](std::vector<std::string> overrides, int world_size) {
    try {
      check_layout(run_config_from(test::keys_with(overrides)), world_size);
    } catch (const ConfigError& e) {
      return e.key();
    }
    return std::string("none");
  };
  EXPECT_EQ(key_of({"parallel.tp=2"}, 2), "none");
  // The MLP (192) splits over 3, the padded vocabulary (256) does not.
  EXPECT_EQ(key_of({"parallel.tp=3", "model.heads=6", "model.hidden=48"}, 3), "model.vocab_pad");
  EXPECT_EQ(key_of({"parallel.tp=8"}, 8), "model.heads");
  EXPECT_EQ(key_of({"parallel.tp=2", "model.ffn=33", "model.heads=4"}, 2), "model.ffn");
  EXPECT_EQ(key_of({"parallel.tp=4", "model.vocab_pad=2", "model.vocab=250"}, 4), "model.vocab_pad");
  EXPECT_EQ(key_of({"parallel.dp=2"}, 2), "train.global_batch");  // 16 / (2 x 16)
  EXPECT_EQ(key_of({"parallel.dp=2", "train.micro_batch=8"}, 3), "parallel.dp");
  EXPECT_EQ(key_of({"parallel.dp=2", "train.micro_batch=8"}, 1), "parallel.dp");
  EXPECT_EQ(key_of({"parallel.auto=true"}, 1), "parallel.auto");  // not chosen yet
}

// A cluster file of two CPU ranks, on one host or on two.
std::string two_cpus_toml(int hosts) {
  return "name = \"two cpus\"\nhosts = " + std::to_string(hosts) + "\ndevices_per_host = " +
         std::to_string(2 / hosts) +
         "\n[device]\ntype = \"cpu\"\npeak_tflops = 0.08\nmemory_gib = 8\n"
         "memory_gbytes_per_s = 10\ngemm_efficiency = 0.8\ngemm_half_dim = 8\n"
         "[intra_host]\ntransport = \"tcp\"\nbandwidth_gbytes_per_s = 1.5\nlatency_us = 40\n"
         "efficiency = 0.9\n"
         "[inter_host]\ntransport = \"tcp\"\nbandwidth_gbytes_per_s = 0.1\nlatency_us = 60\n"
         "efficiency = 0.9\n";
}

TEST(AutoLayout, ThePlannerChoosesForTheRanksStarted) {
  const test::TempDir dir("giant-auto-layout");
  const std::string file = dir.file("cluster.toml", two_cpus_toml(1));
  auto configured = [](std::vector<std::string> overrides) { return run_config_from(test::keys_with(overrides)); };
  RunConfig c = configured({"parallel.auto=true", "parallel.cluster=\"" + file + "\""});
  const std::string chosen = choose_layout(c, 2);
  std::printf("%s\n", chosen.c_str());
  EXPECT_FALSE(c.parallel.automatic);
  EXPECT_EQ(c.layout.dp * c.layout.pp * c.layout.tp, 2);
  EXPECT_EQ(c.train.global_batch % (c.layout.dp * c.layout.micro_batch), 0);
  EXPECT_NE(chosen.find("parallel.auto: dp="), std::string::npos);
  EXPECT_NO_THROW(check_layout(c, 2));
  // The planner is asked about the ZeRO stage parallel.zero sets (1 by default, here 0).
  RunConfig replicated = configured({"parallel.auto=true", "parallel.cluster=\"" + file + "\"", "parallel.zero=0"});
  EXPECT_NE(choose_layout(replicated, 2).find("parallel.auto: dp="), std::string::npos);
  EXPECT_EQ(replicated.layout.zero, 0);
  EXPECT_NO_THROW(check_layout(replicated, 2));

  auto key_of = [&](std::vector<std::string> overrides, int world_size) {
    try {
      RunConfig bad = configured(overrides);
      choose_layout(bad, world_size);
    } catch (const ConfigError& e) {
      return e.key();
    }
    return std::string("none");
  };
  EXPECT_EQ(key_of({"parallel.auto=true"}, 2), "parallel.cluster");
  EXPECT_EQ(key_of({"parallel.auto=true", "parallel.cluster=\"" + file + "\""}, 4), "parallel.cluster");
  EXPECT_EQ(key_of({"parallel.auto=true", "parallel.cluster=\"" + dir.path() + "/missing.toml\""}, 2),
            "parallel.cluster");
}

// Without parallel.auto, parallel.cluster is only the cluster whose links
// ccl's groups choose their algorithms on (make_mesh): read and checked
// alike, the layout left as set. ccl.model.* set by hand outrank it.
TEST(AutoLayout, AClusterFileWithoutAutoGivesOnlyItsLinks) {
  const test::TempDir dir("giant-cluster-links");
  const std::string file = dir.file("cluster.toml", two_cpus_toml(2));
  RunConfig c = run_config_from(test::keys_with({"parallel.dp=2", "train.micro_batch=8",
                                                 "parallel.cluster=\"" + file + "\""}));
  const giant::Layout as_set = c.layout;
  read_cluster_file(c, 2);
  ASSERT_TRUE(c.parallel.known_cluster.has_value());
  EXPECT_EQ(c.parallel.known_cluster->hosts, 2);
  EXPECT_EQ(c.layout.describe(), as_set.describe());
  EXPECT_FALSE(c.parallel.ccl_model_set);
  EXPECT_EQ(test::error_key([&] { read_cluster_file(c, 4); }), "parallel.cluster");
  RunConfig missing = run_config_from(test::keys_with({"parallel.cluster=\"" + dir.path() + "/none.toml\""}));
  EXPECT_EQ(test::error_key([&] { read_cluster_file(missing, 2); }), "parallel.cluster");
  const std::string corrupt = dir.file("corrupt.toml", "hosts = [\n");
  RunConfig bad = run_config_from(test::keys_with({"parallel.cluster=\"" + corrupt + "\""}));
  EXPECT_EQ(test::error_key([&] { read_cluster_file(bad, 2); }), "parallel.cluster");

  Tunables keys = test::keys_with({});
  ccl::CommConfig::define_tunables(keys);
  EXPECT_FALSE(run_config_from(keys).parallel.ccl_model_set);
  apply_override(keys, "ccl.model.tcp_gbps=0.5");
  EXPECT_TRUE(run_config_from(keys).parallel.ccl_model_set);
}

}  // namespace
}  // namespace giant::train
