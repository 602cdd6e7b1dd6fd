// The key table is the one declaration of every run key: docs/config.md is
// what it generates, `giant train --print-config-reference` prints the same,
// and RunConfig's initial values are the keys' defaults.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/train/config_reference.h"
#include "giant/train/run_keys.h"
#include "train/support/giant_process.h"

namespace {

using namespace giant;
using namespace giant::train;
using giant::train::test::giant;
using giant::train::test::Outcome;
using giant::train::test::read_file;

constexpr const char* kRegenerate =
    "docs/config.md differs from what the key table (src/giant/train/run_keys.cc) generates; regenerate it "
    "from the repository root: build/bin/giant train --print-config-reference > docs/config.md";

// The first line where two texts differ, with both versions.
std::string first_difference(const std::string& expected, const std::string& actual) {
  std::istringstream a(expected), b(actual);
  std::string x, y;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, x)), more_b = static_cast<bool>(std::getline(b, y));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || x != y) {
      return "line " + std::to_string(line) + ":\n  generated: " + (more_a ? x : "(end)") +
             "\n  in docs:   " + (more_b ? y : "(end)");
    }
  }
}

TEST(ConfigReference, DocsConfigIsWhatTheTableGenerates) {
  const std::string generated = config_reference();
  const std::string in_docs = read_file(std::string(GIANT_SOURCE_DIR) + "/docs/config.md");
  EXPECT_TRUE(generated == in_docs) << kRegenerate << "\nfirst difference at " << first_difference(generated, in_docs);
}

TEST(ConfigReference, GiantTrainPrintsIt) {
  const Outcome r = giant("train --print-config-reference");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out == config_reference()) << first_difference(config_reference(), r.out);
}

TEST(ConfigReference, NamesEveryKeyGiantTrainReads) {
  Tunables keys;
  define_train_keys(keys);
  const std::string reference = config_reference();
  for (const std::string& name : keys.names()) {
    EXPECT_NE(reference.find("| `" + name + "` |"), std::string::npos) << name;
  }
}

TEST(KeyTable, EachKeyOnceWithHelp) {
  std::set<std::string> names;
  for (const RunKey& key : run_keys()) {
    EXPECT_TRUE(names.insert(key.name).second) << key.name << " is declared twice";
    EXPECT_FALSE(key.help.empty()) << key.name;
  }
  Tunables keys;
  define_run_keys(keys);
  EXPECT_EQ(keys.names().size(), names.size());
}

// Each key reads into the field it takes its default from: the defaults read
// back are RunConfig's initial values (checkpoint.dir aside, resolved under
// train.out_dir when empty, and checkpoint.local_dir, named after it).
TEST(KeyTable, StructDefaultsAreTheKeysDefaults) {
  Tunables defaults;
  define_run_keys(defaults);
  const RunConfig read = run_config_from(defaults);
  EXPECT_EQ(read.checkpoint.dir, read.train.out_dir + "/checkpoints");
  EXPECT_EQ(read.checkpoint.local_dir, checkpoint::default_local_root(read.checkpoint.dir).string());
  for (const RunKey& key : run_keys()) {
    if (key.name == "checkpoint.dir" || key.name == "checkpoint.local_dir") continue;
    Tunables again;
    key.define(again, read);
    EXPECT_EQ(again.value_text(key.name), defaults.value_text(key.name)) << key.name;
  }
}

// A value outside what the reference says a key accepts is refused naming
// the key, in the reference's words.
TEST(KeyTable, ErrorsSayTheAcceptedValues) {
  auto error_of = [](const std::string& assignment) -> std::string {
    Tunables keys;
    define_run_keys(keys);
    apply_override(keys, assignment);
    try {
      run_config_from(keys);
    } catch (const ConfigError& e) {
      return e.key() + ": " + e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("parallel.zero=4").find("must be 0, 1, 2 or 3, got 4"), std::string::npos);
  EXPECT_NE(error_of("parallel.schedule=\"zigzag\"").find("must be gpipe, 1f1b or interleaved, got 'zigzag'"),
            std::string::npos);
  EXPECT_NE(error_of("train.retain_memory_mb=4096").find("must be at most 2047, got 4096"), std::string::npos);
  EXPECT_NE(error_of("checkpoint.every=-1").find("must not be negative (0: only at the end), got -1"),
            std::string::npos);
  EXPECT_EQ(error_of("train.beta1=1").rfind("train.beta1: ", 0), 0u) << error_of("train.beta1=1");
}

}  // namespace
