// giant checkpoint info and giant checkpoint verify on the fixture
// checkpoint (support/format_fixture.h): what they print, and their exit
// statuses (0 good, 1 a problem found or an invalid manifest, 2 bad flags or
// a DIR that is no checkpoint).
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/support/format_fixture.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/manifest.h"

namespace giant::checkpoint {
namespace {

using test::CommandResult;
namespace fs = std::filesystem;
using test::read_bytes;
using test::TempDir;
using test::write_bytes;

CommandResult giant(const std::string& args) {
  return test::run_command(std::string(GIANT_BINARY_DIR) + "/giant checkpoint " + args);
}

::testing::AssertionResult prints_all(const CommandResult& result, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    if (result.output.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << part << "' not in:\n" << result.output;
    }
  }
  return ::testing::AssertionSuccess();
}

class InspectCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = dir_.path() / step_folder_name(12);
    manifest_ = test::write_fixture_checkpoint(folder_);
    write_bytes(dir_.path() / "latest", step_folder_name(12) + "\n");
  }
  TempDir dir_;
  fs::path folder_;
  Manifest manifest_;
};

TEST_F(InspectCommand, InfoPrintsStepModelLayoutTrainStateAndTensors) {
  const auto result = giant("info " + folder_.string());
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_TRUE(prints_all(result, {"step: 12", "consumed samples: 96", "layers=1 hidden=8 heads=2 ffn=32 seq_len=4",
                                  "vocab=10 vocab_pad=8", "activation=gelu", "tokenizer: byte",
                                  "dp=2 tp=1 pp=1 virtual_stages=1 zero=1", "world_size=2", "optimizer_steps=12",
                                  "loss_scaling=off", "optimizer state: yes"}));
  // The table: name, dtype, global shape, pieces, MB; then the totals.
  EXPECT_TRUE(prints_all(result, {"total: 4 tensors", "files: 2"}));
  auto row_of = [&](const std::string& name) {
    const size_t at = result.output.find("\n" + name + " ");
    if (at == std::string::npos) return std::vector<std::string>{};
    std::istringstream row(result.output.substr(at + 1, result.output.find('\n', at + 1) - at - 1));
    std::vector<std::string> fields;
    for (std::string field; row >> field;) fields.push_back(field);
    return fields;
  };
  EXPECT_EQ(row_of("model/embedding.wte.weight"),
            (std::vector<std::string>{"model/embedding.wte.weight", "F32", "[16,8]", "2", "0.001"}));
  EXPECT_EQ(row_of("rng/0"), (std::vector<std::string>{"rng/0", "U8", "[16]", "1", "0.000"}));
}

TEST_F(InspectCommand, InfoOfACheckpointDirShowsItsLatestAndJsonIsTheManifest) {
  const auto result = giant("info " + dir_.path().string());
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_TRUE(prints_all(result, {folder_.string(), "step: 12"}));
  const auto as_json = giant("info --json " + folder_.string());
  ASSERT_EQ(as_json.status, 0) << as_json.output;
  EXPECT_EQ(nlohmann::json::parse(as_json.output), nlohmann::json::parse(manifest_to_json(manifest_)));
}

TEST_F(InspectCommand, VerifyOfAGoodCheckpointSaysOk) {
  const auto result = giant("verify " + dir_.path().string());
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(result.output.rfind("ok: 2 files, 4 tensors, ", 0), 0u) << result.output;
  EXPECT_TRUE(prints_all(result, {" GB checked in ", " s (", " GB/s)"}));
}

TEST_F(InspectCommand, VerifyNamesEveryProblemAndExitsOne) {
  const fs::path first = folder_ / "rank_00000.safetensors", second = folder_ / "rank_00001.safetensors";
  std::string bytes = read_bytes(first);
  bytes.back() ^= 0x01;
  write_bytes(first, bytes);
  fs::remove(second);
  const auto result = giant("verify " + folder_.string());
  EXPECT_EQ(result.status, 1) << result.output;
  EXPECT_TRUE(prints_all(result, {first.string() + ": CRC-32C", second.string() + ": missing", "2 problems"}));
}

TEST_F(InspectCommand, AnInvalidManifestIsARuntimeFailure) {
  write_bytes(folder_ / "manifest.json", "{\"format\":\"giant-checkpoint\",\"format_version\":9}");
  for (const std::string sub : {"info", "verify"}) {
    const auto result = giant(sub + " " + folder_.string());
    EXPECT_EQ(result.status, 1) << sub << ": " << result.output;
    EXPECT_TRUE(prints_all(result, {"giant checkpoint " + sub + ": ", (folder_ / "manifest.json").string()}));
  }
}

TEST_F(InspectCommand, NoCheckpointOrBadFlagsAreBadInput) {
  const fs::path empty = dir_.path() / "empty";
  fs::create_directories(empty);
  for (const std::string sub : {"info", "verify"}) {
    const auto none = giant(sub + " " + empty.string());
    EXPECT_EQ(none.status, 2) << sub << ": " << none.output;
    EXPECT_TRUE(prints_all(none, {empty.string()}));
    const auto absent = giant(sub + " " + (dir_.path() / "absent").string());
    EXPECT_EQ(absent.status, 2) << sub << ": " << absent.output;
    EXPECT_EQ(giant(sub).status, 2) << "DIR is required";
    const auto flag = giant(sub + " --frobnicate " + folder_.string());
    EXPECT_EQ(flag.status, 2) << flag.output;
    EXPECT_TRUE(prints_all(flag, {"--frobnicate"}));
    EXPECT_EQ(giant(sub + " " + folder_.string() + " " + folder_.string()).status, 2) << "one DIR";
    const auto help = giant(sub + " --help");
    EXPECT_EQ(help.status, 0);
    EXPECT_TRUE(prints_all(help, {"DIR"}));
  }
  EXPECT_EQ(giant("verify --json " + folder_.string()).status, 2) << "--json is info's";
}

}  // namespace
}  // namespace giant::checkpoint
