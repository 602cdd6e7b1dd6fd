// Partitioning a layer list into pipeline stages: each method against brute
// force (every contiguous split with no empty stage) on small random cases,
// a GPT layer list, and every error with its key and rule.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <regex>
#include <tuple>

#include "giant/base/error.h"
#include "giant/planner/partition.h"

namespace giant::planner {
namespace {

using Wide = __int128;

std::vector<size_t> stage_counts(const StageBounds& bounds) {
  std::vector<size_t> counts;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) counts.push_back(bounds[s + 1] - bounds[s]);
  return counts;
}

void expect_well_formed(const StageBounds& bounds, size_t layers, int stages) {
  ASSERT_EQ(bounds.size(), size_t(stages) + 1);
  EXPECT_EQ(bounds.front(), 0u);
  EXPECT_EQ(bounds.back(), layers);
  for (size_t s = 0; s + 1 < bounds.size(); ++s) EXPECT_LT(bounds[s], bounds[s + 1]) << "stage " << s << " is empty";
}

// Every split of `layers` into `stages` non-empty contiguous stages.
void for_each_split(size_t layers, int stages, const std::function<void(const StageBounds&)>& visit) {
  StageBounds bounds{0};
  std::function<void()> extend = [&] {
    const size_t left = size_t(stages) + 1 - bounds.size();  // stages still to place
    if (left == 0) {
      if (bounds.back() == layers) visit(bounds);
      return;
    }
    for (size_t end = bounds.back() + 1; end + (left - 1) <= layers; ++end) {
      bounds.push_back(end);
      extend();
      bounds.pop_back();
    }
  };
  extend();
}

// Stage totals of a per-layer quantity.
std::vector<int64_t> totals(const std::vector<int64_t>& per_layer, const StageBounds& bounds) {
  std::vector<int64_t> out;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    int64_t sum = 0;
    for (size_t i = bounds[s]; i < bounds[s + 1]; ++i) sum += per_layer[i];
    out.push_back(sum);
  }
  return out;
}

int64_t largest(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

Wide squares(const std::vector<int64_t>& v) {
  Wide sum = 0;
  for (int64_t x : v) sum += Wide(x) * x;
  return sum;
}

struct Quantities {
  std::vector<int64_t> parameters, matching, ones;
};

Quantities quantities(const std::vector<PartitionLayer>& layers, const std::regex* pattern) {
  Quantities q;
  for (const PartitionLayer& layer : layers) {
    q.parameters.push_back(layer.parameters);
    q.matching.push_back(pattern && std::regex_match(layer.type_name, *pattern) ? 1 : 0);
    q.ones.push_back(1);
  }
  return q;
}

// The documented order of preference, written out directly as one key per
// split (smaller is better), with later bounds winning the last tie.
using Key = std::tuple<int64_t, int64_t, Wide, Wide, Wide>;

Key parameters_key(const Quantities& q, const StageBounds& b) {
  const auto p = totals(q.parameters, b);
  return {largest(p), 0, 0, squares(p), squares(totals(q.ones, b))};
}

Key type_key(const Quantities& q, const StageBounds& b) {
  const auto m = totals(q.matching, b), p = totals(q.parameters, b);
  return {largest(m), largest(p), squares(m), squares(p), squares(totals(q.ones, b))};
}

StageBounds brute_force(size_t layers, int stages, const std::function<Key(const StageBounds&)>& key) {
  StageBounds best;
  Key best_key;
  for_each_split(layers, stages, [&](const StageBounds& b) {
    const Key k = key(b);
    if (best.empty() || k < best_key || (k == best_key && b > best)) {
      best = b;
      best_key = k;
    }
  });
  return best;
}

std::vector<PartitionLayer> random_layers(std::mt19937& rng, size_t n) {
  static const char* kTypes[] = {"A", "B", "GptBlock", "Ab"};
  std::vector<PartitionLayer> layers;
  for (size_t i = 0; i < n; ++i) {
    PartitionLayer layer;
    layer.type_name = kTypes[rng() % 4];
    switch (rng() % 4) {
      case 0: layer.parameters = 0; break;                                            // a tied head, say
      case 1: layer.parameters = int64_t(rng() % 4); break;                           // many ties
      case 2: layer.parameters = int64_t(rng() % 30); break;
      default: layer.parameters = int64_t(100'000'000'000) + int64_t(rng() % 3); break;  // squares past 64 bits
    }
    layers.push_back(layer);
  }
  return layers;
}

TEST(Partition, ParametersMatchesBruteForce) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 1500; ++trial) {
    const size_t n = 1 + rng() % 9;
    const int stages = 1 + int(rng() % n);
    const auto layers = random_layers(rng, n);
    const Quantities q = quantities(layers, nullptr);
    const StageBounds got = partition_layers(layers, stages, "parameters");
    expect_well_formed(got, n, stages);
    const StageBounds want = brute_force(n, stages, [&](const StageBounds& b) { return parameters_key(q, b); });
    EXPECT_EQ(largest(totals(q.parameters, got)), largest(totals(q.parameters, want))) << "trial " << trial;
    EXPECT_EQ(got, want) << "trial " << trial << ": the tie-break differs";
  }
}

TEST(Partition, TypeMatchesBruteForce) {
  const char* kPatterns[] = {"A", "A|B", "[AB]", "Gpt.*", ".*", "A.*"};
  std::mt19937 rng(71);
  int checked = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const size_t n = 1 + rng() % 9;
    const int stages = 1 + int(rng() % n);
    const auto layers = random_layers(rng, n);
    const std::string pattern = kPatterns[rng() % 6];
    const std::regex regex(pattern);
    const Quantities q = quantities(layers, &regex);
    if (std::count(q.matching.begin(), q.matching.end(), 1) == 0) {
      EXPECT_THROW(partition_layers(layers, stages, "type:" + pattern), ConfigError);
      continue;
    }
    const StageBounds got = partition_layers(layers, stages, "type:" + pattern);
    expect_well_formed(got, n, stages);
    const StageBounds want = brute_force(n, stages, [&](const StageBounds& b) { return type_key(q, b); });
    EXPECT_EQ(largest(totals(q.matching, got)), largest(totals(q.matching, want))) << "trial " << trial;
    EXPECT_EQ(got, want) << "trial " << trial << " type:" << pattern << ": the tie-break differs";
    ++checked;
  }
  EXPECT_GT(checked, 1000);
}

TEST(Partition, UniformCountsDifferByAtMostOneEarlierStagesTakingMore) {
  std::mt19937 rng(5);
  for (size_t n = 1; n <= 20; ++n) {
    for (int stages = 1; stages <= int(n); ++stages) {
      const auto layers = random_layers(rng, n);
      const StageBounds got = partition_layers(layers, stages, "uniform");
      expect_well_formed(got, n, stages);
      const auto counts = stage_counts(got);
      EXPECT_LE(counts.front() - counts.back(), 1u);
      EXPECT_TRUE(std::is_sorted(counts.rbegin(), counts.rend())) << n << " layers on " << stages;
      // With nothing to balance, parameters ends on uniform's split.
      std::vector<PartitionLayer> weightless = layers;
      for (PartitionLayer& layer : weightless) layer.parameters = 0;
      EXPECT_EQ(partition_layers(weightless, stages, "parameters"), got);
    }
  }
}

TEST(Partition, ManualGivesExactlyTheCounts) {
  const std::vector<PartitionLayer> layers(7, {"GptBlock", 10});
  EXPECT_EQ(partition_layers(layers, 3, "manual:1,5,1"), (StageBounds{0, 1, 6, 7}));
  EXPECT_EQ(partition_layers(layers, 2, "manual: 3 , 4"), (StageBounds{0, 3, 7}));
  EXPECT_EQ(partition_layers(layers, 1, "manual:7"), (StageBounds{0, 7}));
  EXPECT_EQ(stage_counts(partition_layers(layers, 7, "manual:1,1,1,1,1,1,1")), std::vector<size_t>(7, 1));
}

std::vector<PartitionLayer> gpt_layers(int blocks, int64_t embedding, int64_t block) {
  std::vector<PartitionLayer> layers{{"GptEmbedding", embedding}};
  for (int i = 0; i < blocks; ++i) layers.push_back({"GptBlock", block});
  layers.push_back({"GptFinalNorm", 2 * 768});
  layers.push_back({"GptHead", 0});  // tied to the embedding, counted there
  return layers;
}

TEST(Partition, GptBlocksBalancedWithEmbeddingFirstAndHeadLast) {
  // GPT-2 small's shapes: the embedding is (50257 + 1024) x 768, a block 12 h^2 + 13 h.
  const int64_t embedding = (50257 + 1024) * 768, block = 12 * 768 * 768 + 13 * 768;
  EXPECT_EQ(partition_layers(gpt_layers(4, embedding, block), 2, "type:GptBlock"), (StageBounds{0, 3, 7}));
  EXPECT_EQ(partition_layers(gpt_layers(12, embedding, block), 4, "type:GptBlock"), (StageBounds{0, 4, 7, 10, 15}));
  // Blocks that do not divide: the embedding's stage takes fewer.
  EXPECT_EQ(partition_layers(gpt_layers(3, embedding, block), 2, "type:GptBlock"), (StageBounds{0, 2, 6}));
  // The embedding outweighs 5 blocks: a stage of its own, then 4 blocks on each other stage.
  EXPECT_EQ(partition_layers(gpt_layers(12, embedding, block), 4, "parameters"), (StageBounds{0, 1, 5, 9, 15}));
  // The bench model (hidden 256, 384 padded vocabulary rows + 128 positions)
  // under the default parameters: one or two blocks a stage, as the planner assumes.
  const int64_t bench_embedding = (384 + 128) * 256, bench_block = 12 * 256 * 256 + 13 * 256;
  EXPECT_EQ(partition_layers(gpt_layers(4, bench_embedding, bench_block), 2, "parameters"), (StageBounds{0, 3, 7}));
  EXPECT_EQ(partition_layers(gpt_layers(4, bench_embedding, bench_block), 4, "parameters"),
            (StageBounds{0, 2, 3, 4, 7}));
  // A small vocabulary: parameters balances blocks and embedding together.
  EXPECT_EQ(partition_layers(gpt_layers(4, 1000, 1000), 2, "parameters"), (StageBounds{0, 3, 7}));
  EXPECT_EQ(partition_layers(gpt_layers(4, 1000, 1000), 2, "uniform"), (StageBounds{0, 4, 7}));
  // Regexes are ECMAScript, case-sensitive, over the whole name.
  EXPECT_EQ(partition_layers(gpt_layers(4, 1000, 1000), 7, "type:Gpt(Block|Head)"), (StageBounds{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Partition, OneLayerPerStageWhenStagesEqualLayers) {
  const auto layers = gpt_layers(2, 100, 50);
  for (const char* method : {"uniform", "parameters", "type:GptBlock", "manual:1,1,1,1,1"}) {
    EXPECT_EQ(partition_layers(layers, 5, method), (StageBounds{0, 1, 2, 3, 4, 5})) << method;
  }
}

TEST(Partition, ManyLayersAndStagesStayValid) {
  const auto layers = gpt_layers(300, 40'000'000, 7'000'000);
  for (const char* method : {"parameters", "type:GptBlock"}) {
    const StageBounds got = partition_layers(layers, 64, method);
    expect_well_formed(got, layers.size(), 64);
  }
  // 300 blocks on 64 stages: at most ceil(300 / 64) = 5 on any.
  const auto counts = stage_counts(partition_layers(layers, 64, "type:GptBlock"));
  EXPECT_LE(*std::max_element(counts.begin() + 1, counts.end() - 1), 5u);
}

void expect_config_error(const std::function<void()>& run, const std::string& key, const std::string& says) {
  try {
    run();
    ADD_FAILURE() << "expected a ConfigError naming " << key;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(Partition, RefusesBadMethodsNamingTheKeyAndTheRule) {
  const auto layers = gpt_layers(4, 1000, 100);
  auto run = [&](const std::string& method, int stages = 2) {
    return [&layers, method, stages] { partition_layers(layers, stages, method, "parallel.partition"); };
  };
  const std::string key = "parallel.partition";
  expect_config_error(run("balanced"), key, "unknown partition method 'balanced' (valid: uniform, parameters, "
                                            "type:REGEX, manual:N0,N1,...)");
  expect_config_error(run(""), key, "unknown partition method ''");
  expect_config_error(run("Uniform"), key, "unknown partition method");
  expect_config_error(run("type:"), key, "type: needs a regular expression");
  expect_config_error(run("type:Gpt(Block"), key, "type:Gpt(Block is not a valid regular expression: ");
  expect_config_error(run("type:Block"), key,
                      "type:Block matches no layer's whole type name (the model's layer types: GptEmbedding, "
                      "GptBlock, GptFinalNorm, GptHead)");
  expect_config_error(run("type:gptblock"), key, "matches no layer");
  expect_config_error(run("manual:"), key, "positive whole layer counts");
  expect_config_error(run("manual:3,0,4", 3), key, "got '0' in manual:3,0,4");
  expect_config_error(run("manual:3,-1"), key, "got '-1'");
  expect_config_error(run("manual:3,x"), key, "got 'x'");
  expect_config_error(run("manual:3.5,3.5"), key, "got '3.5'");
  expect_config_error(run("manual:3,,4", 3), key, "got ''");
  expect_config_error(run("manual:3,4,"), key, "positive whole layer counts");
  expect_config_error(run("manual:99999999999999999999999,1"), key, "the model has only 7 layers");
  expect_config_error(run("manual:3,4", 3), key, "gives 2 counts but there are 3 pipeline stages");
  expect_config_error(run("manual:3,3"), key, "counts sum to 6 but the model has 7 layers (embedding, blocks");
  expect_config_error([&] { partition_layers(layers, 2, "manual:7", "my.key"); }, "my.key", "gives 1 counts");
}

TEST(Partition, RefusesMoreStagesThanLayers) {
  const auto layers = gpt_layers(2, 1000, 100);
  for (const char* method : {"uniform", "parameters", "type:GptBlock", "manual:1,1,1,1,1,1"}) {
    expect_config_error([&] { partition_layers(layers, 6, method); }, "parallel.pp",
                        "6 stages but the model has only 5 layers (embedding, blocks, final norm and head count as "
                        "layers)");
  }
  expect_config_error([] { partition_layers({}, 1, "uniform"); }, "parallel.pp", "1 stage but the model has only 0");
}

TEST(Partition, StagesBelowOneIsACallersBug) {
  const auto layers = gpt_layers(2, 1000, 100);
  EXPECT_THROW(partition_layers(layers, 0, "uniform"), Error);
  try {
    partition_layers(layers, -1, "uniform");
    ADD_FAILURE() << "-1 stages accepted";
  } catch (const ConfigError& e) {
    ADD_FAILURE() << "not a configuration error: " << e.what();
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace giant::planner
