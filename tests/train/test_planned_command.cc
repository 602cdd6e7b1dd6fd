// What `giant plan` recommends, `giant train` runs: the command line it
// prints for each of its top plans (presets from one host to sixteen) is a
// config the trainer accepts, whose layout check passes and whose layout,
// as the planner sees it, is the plan's; and the placement the planner
// takes for the trainer's (kTrainPlacement) is the one its mesh makes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "giant/parallel/mesh.h"
#include "giant/planner/search.h"
#include "giant/planner/train_command_line.h"
#include "giant/train/memory_check.h"
#include "giant/train/run_config.h"
#include "giant/train/trainer.h"

namespace giant::train {
namespace {

TEST(PlannedCommand, TrainRunsTheLayoutsPlanRecommends) {
  struct Case {
    const char* model;
    const char* cluster;
    int hosts;
  };
  for (const Case k : {Case{"gpt-13b", "v100-tcp", 4}, Case{"gpt-1.3b", "a100-40g-tcp", 1},
                       Case{"gpt-175b", "a100-80g-ib", 16}, Case{"gpt-350m", "v100-rdma", 2}}) {
    const planner::ModelSpec model = planner::model_preset(k.model);
    planner::ClusterSpec cluster = planner::cluster_preset(k.cluster);
    cluster.hosts = k.hosts;
    cluster = cluster.resolved();
    planner::SearchOptions options;
    options.top = 5;
    const planner::SearchResult result = planner::search_layouts(model, cluster, options);
    ASSERT_FALSE(result.best.empty()) << k.model << " on " << k.cluster;
    for (const planner::Estimate& plan : result.best) {
      const planner::TrainCommandLine line = planner::train_command_line(model, cluster, plan);
      SCOPED_TRACE(line.text());
      EXPECT_EQ(line.launcher.empty(), cluster.devices() == 1);
      Tunables keys;
      define_run_keys(keys);
      for (const std::string& setting : line.settings) apply_override(keys, setting);
      const RunConfig config = run_config_from(keys);
      EXPECT_NO_THROW(check_layout(config, cluster.devices()));
      EXPECT_EQ(planner_layout(config).describe(), plan.layout.describe());
      EXPECT_EQ(planner_precision(config).describe(), plan.precision.describe());
      const planner::ModelSpec trained = planner_model(config);
      EXPECT_EQ(trained.layers, model.layers);
      EXPECT_EQ(trained.hidden, model.hidden);
      EXPECT_EQ(trained.heads, model.heads);
      EXPECT_EQ(trained.ffn_size(), model.ffn_size());
      EXPECT_EQ(trained.seq_len, model.seq_len);
      EXPECT_EQ(trained.vocab, model.vocab);
      EXPECT_EQ(trained.global_batch, model.global_batch);
    }
  }
}

TEST(PlannedCommand, TheMeshPlacesRanksAsThePlannerSaysTrainDoes) {
  for (const parallel::MeshShape shape : {parallel::MeshShape{2, 3, 4}, parallel::MeshShape{1, 2, 2},
                                          parallel::MeshShape{4, 1, 2}, parallel::MeshShape{3, 2, 1}}) {
    Layout layout;
    layout.dp = shape.dp;
    layout.pp = shape.pp;
    layout.tp = shape.tp;
    layout.order = kTrainPlacement;
    EXPECT_EQ(why_train_cannot_run(layout), "");
    for (int dp = 0; dp < shape.dp; ++dp) {
      for (int pp = 0; pp < shape.pp; ++pp) {
        for (int tp = 0; tp < shape.tp; ++tp) {
          const int planned = dp * layout.stride_of(Axis::dp) + pp * layout.stride_of(Axis::pp) +
                              tp * layout.stride_of(Axis::tp);
          EXPECT_EQ(parallel::Mesh::rank_of(shape, dp, pp, tp), planned) << layout.describe();
        }
      }
    }
  }
}

}  // namespace
}  // namespace giant::train
