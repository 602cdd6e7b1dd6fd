// manifest.json: every field round-trips (doubles exactly) in the schema
// docs/architecture.md documents; every broken manifest is a FormatError
// naming the file and the field; fragments merge into one manifest; model
// differences are named per key; the checkpoint.dir folder functions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/support/format_fixture.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/manifest.h"
#include "support/error_message.h"

namespace giant::checkpoint {
namespace {

using giant::test::error_message;
using giant::test::names_all;

using nlohmann::json;
namespace fs = std::filesystem;
using test::TempDir;
using test::write_bytes;

const std::string kFile = "/ckpt/step_00000012/manifest.json";

// A manifest with every field away from its default, doubles that only an
// exact printing keeps, and file entries (as if written).
Manifest full_manifest() {
  Manifest m = test::fixture_manifest();
  m.model.ffn = 24;
  m.model.dropout = 0.1;
  m.model.init_std = 0.1 + 0.2;  // 0.30000000000000004
  m.model.activation = models::Activation::gelu_tanh;
  m.tokenizer = "gpt2:/data/tokenizer";
  m.step = (int64_t{1} << 40) + 1;
  m.consumed_samples = (int64_t{1} << 50) + 3;
  m.layout = {2, 2, 2, 2, 1, "interleaved", "balanced", "fp16", "fp32", 8};
  m.train.optimizer_steps = 977;
  m.train.loss_scaling = true;
  m.train.loss_scale = std::nextafter(65536.0, 1e9);
  m.train.loss_scale_good_steps = 123;
  m.train.loss_scale_hysteresis_left = 1;
  m.train.loss_scale_overflows = 4;
  m.train.bad_steps_in_a_row = 2;
  m.train.skipped_steps = 5;
  m.train.loss_scale_skips = 4;
  m.files = {{"rank_00000.safetensors", uint64_t{1} << 40, 0xdeadbeef},
             {"rank_00001.safetensors", 12345, 0xffffffff},
             {"vocab.json", 77, 0x12345678}};
  m.tokenizer_files = {"vocab.json"};
  return m;
}

void expect_same(const Manifest& a, const Manifest& b) {
  EXPECT_EQ(a.format_version, b.format_version);
  EXPECT_TRUE(model_differences(a.model, b.model).empty());
  EXPECT_EQ(a.model.ffn, b.model.ffn);
  EXPECT_EQ(a.model.dropout, b.model.dropout);
  EXPECT_EQ(a.model.init_std, b.model.init_std);
  EXPECT_EQ(a.model.activation, b.model.activation);
  EXPECT_EQ(a.tokenizer, b.tokenizer);
  EXPECT_EQ(a.tokenizer_files, b.tokenizer_files);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.consumed_samples, b.consumed_samples);
  EXPECT_TRUE(a.layout == b.layout);
  const TrainState &s = a.train, &t = b.train;
  EXPECT_EQ(s.optimizer_steps, t.optimizer_steps);
  EXPECT_EQ(s.loss_scaling, t.loss_scaling);
  EXPECT_EQ(s.loss_scale, t.loss_scale);
  EXPECT_EQ(s.loss_scale_good_steps, t.loss_scale_good_steps);
  EXPECT_EQ(s.loss_scale_hysteresis_left, t.loss_scale_hysteresis_left);
  EXPECT_EQ(s.loss_scale_overflows, t.loss_scale_overflows);
  EXPECT_EQ(s.bad_steps_in_a_row, t.bad_steps_in_a_row);
  EXPECT_EQ(s.skipped_steps, t.skipped_steps);
  EXPECT_EQ(s.loss_scale_skips, t.loss_scale_skips);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (size_t i = 0; i < a.files.size(); ++i) {
    EXPECT_EQ(a.files[i].name, b.files[i].name);
    EXPECT_EQ(a.files[i].bytes, b.files[i].bytes);
    EXPECT_EQ(a.files[i].crc32c, b.files[i].crc32c);
  }
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorEntry &x = a.tensors[i], &y = b.tensors[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.dtype, y.dtype) << x.name;
    EXPECT_EQ(x.shape, y.shape) << x.name;
    ASSERT_EQ(x.pieces.size(), y.pieces.size()) << x.name;
    for (size_t p = 0; p < x.pieces.size(); ++p) {
      EXPECT_EQ(x.pieces[p].file, y.pieces[p].file) << x.name;
      EXPECT_EQ(x.pieces[p].key, y.pieces[p].key) << x.name;
      EXPECT_EQ(x.pieces[p].offset, y.pieces[p].offset) << x.name;
      EXPECT_EQ(x.pieces[p].shape, y.pieces[p].shape) << x.name;
    }
  }
}

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.insert(it.key());
  return keys;
}

TEST(Manifest, RoundTripsEveryFieldAndDoubleExactlyWithStableText) {
  const Manifest m = full_manifest();
  const std::string text = manifest_to_json(m);
  const Manifest back = manifest_from_json(text, kFile);
  expect_same(back, m);
  EXPECT_EQ(manifest_to_json(back), text);
  Manifest reordered = m;  // the text does not depend on the order in memory
  std::reverse(reordered.tensors.begin(), reordered.tensors.end());
  std::reverse(reordered.files.begin(), reordered.files.end());
  EXPECT_EQ(manifest_to_json(reordered), text);
  ASSERT_NE(back.find("rng/0"), nullptr);
  EXPECT_EQ(back.find("rng/0")->dtype, DType::u8);
  EXPECT_EQ(back.find("absent"), nullptr);
  EXPECT_TRUE(back.has_optimizer_state());
}

TEST(Manifest, TextIsTheDocumentedSchema) {
  const json j = json::parse(manifest_to_json(full_manifest()));
  EXPECT_EQ(j.at("format"), "giant-checkpoint");
  EXPECT_EQ(j.at("format_version"), 1);
  EXPECT_EQ(keys_of(j), (std::set<std::string>{"format", "format_version", "model", "tokenizer", "tokenizer_files",
                                               "step", "consumed_samples", "layout", "train_state", "files",
                                               "tensors"}));
  EXPECT_EQ(j.at("tokenizer_files"), json::array({"vocab.json"}));
  EXPECT_EQ(keys_of(j.at("model")), (std::set<std::string>{"layers", "hidden", "heads", "ffn", "seq_len", "vocab",
                                                           "vocab_pad", "dropout", "init_std", "activation"}));
  EXPECT_EQ(j.at("model").at("activation"), "gelu_tanh");
  EXPECT_EQ(keys_of(j.at("layout")),
            (std::set<std::string>{"dp", "tp", "pp", "virtual_stages", "zero", "schedule", "partition", "precision",
                                   "grad_dtype", "world_size"}));
  EXPECT_EQ(keys_of(j.at("train_state")),
            (std::set<std::string>{"optimizer_steps", "loss_scaling", "loss_scale", "loss_scale_good_steps",
                                   "loss_scale_hysteresis_left", "loss_scale_overflows", "bad_steps_in_a_row",
                                   "skipped_steps", "loss_scale_skips"}));
  EXPECT_EQ(keys_of(j.at("files").at(0)), (std::set<std::string>{"name", "bytes", "crc32c"}));
  EXPECT_EQ(j.at("files").at(0).at("bytes"), uint64_t{1} << 40);
  const json& wte = j.at("tensors").at(0);
  EXPECT_EQ(keys_of(wte), (std::set<std::string>{"name", "dtype", "shape", "pieces"}));
  EXPECT_EQ(wte.at("name"), "model/embedding.wte.weight");
  EXPECT_EQ(wte.at("dtype"), "F32");
  EXPECT_EQ(wte.at("shape"), json::array({16, 8}));
  EXPECT_EQ(keys_of(wte.at("pieces").at(1)), (std::set<std::string>{"file", "key", "offset", "shape"}));
  EXPECT_EQ(wte.at("pieces").at(1).at("key"), "model/embedding.wte.weight@8,0");
  EXPECT_EQ(wte.at("pieces").at(1).at("offset"), json::array({8, 0}));
}

// The keys a resume compares: JSON values in the file, JSON text in memory;
// a manifest without them (older, imported) has no field.
TEST(Manifest, RunKeysRoundTripAsJsonValues) {
  Manifest m = full_manifest();
  EXPECT_EQ(json::parse(manifest_to_json(m)).count("run_keys"), 0u);
  m.run_keys = {{"data.path", "\"/d/kjv.txt\""},
                {"data.paths", "[\"0.7\",\"/d/books\"]"},
                {"data.unused", "null"},
                {"train.lr", "0.002"},
                {"train.steps", "1000"}};
  const std::string text = manifest_to_json(m);
  const json j = json::parse(text);
  EXPECT_EQ(j.at("run_keys").at("data.path"), "/d/kjv.txt");
  EXPECT_EQ(j.at("run_keys").at("train.lr"), 0.002);
  EXPECT_EQ(j.at("run_keys").at("train.steps"), 1000);
  const Manifest back = manifest_from_json(text, kFile);
  EXPECT_EQ(back.run_keys, m.run_keys);
  EXPECT_EQ(manifest_to_json(back), text);

  json bad = j;
  bad["run_keys"] = json::array();
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { manifest_from_json(bad.dump(), kFile); }), {kFile, "run_keys"}));
  bad["run_keys"] = {{"train.lr", {{"nested", 1}}}};
  EXPECT_TRUE(
      names_all(error_message<FormatError>([&] { manifest_from_json(bad.dump(), kFile); }), {kFile, "run_keys.train.lr"}));
}

// manifest_from_json's error for the full manifest's JSON after edit(j).
std::string error_after(const std::function<void(json&)>& edit) {
  json j = json::parse(manifest_to_json(full_manifest()));
  edit(j);
  return error_message<FormatError>([&] { manifest_from_json(j.dump(), kFile); });
}

json& tensor_named(json& j, const std::string& name) {
  for (json& t : j.at("tensors")) {
    if (t.at("name") == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

const std::string kWte = "model/embedding.wte.weight";

TEST(ManifestErrors, MissingPiece) {
  EXPECT_TRUE(names_all(error_after([](json& j) { tensor_named(j, kWte).at("pieces").erase(1); }),
                        {kFile, kWte, "missing piece"}));
}

TEST(ManifestErrors, OverlappingPieces) {
  const std::string message = error_after([](json& j) {
    tensor_named(j, kWte).at("pieces").push_back(
        {{"file", "rank_00001.safetensors"}, {"key", "x"}, {"offset", {4, 0}}, {"shape", {4, 8}}});
  });
  EXPECT_TRUE(names_all(message, {kFile, kWte, "overlap"}));
}

TEST(ManifestErrors, PieceOutsideItsTensor) {
  for (const json& offset : {json{12, 0}, json{8, 1}, json{-1, 0}, json{8}}) {
    const std::string message =
        error_after([&](json& j) { tensor_named(j, kWte).at("pieces").at(1).at("offset") = offset; });
    EXPECT_TRUE(names_all(message, {kFile, kWte})) << offset;
  }
  const std::string negative = error_after([](json& j) { tensor_named(j, kWte).at("pieces").at(1).at("shape") = {8, -8}; });
  EXPECT_TRUE(names_all(negative, {kFile, kWte}));
}

TEST(ManifestErrors, PieceInAnUnlistedFile) {
  const std::string message =
      error_after([](json& j) { tensor_named(j, "rng/0").at("pieces").at(0).at("file") = "rank_00005.safetensors"; });
  EXPECT_TRUE(names_all(message, {kFile, "rank_00005.safetensors"}));
}

TEST(ManifestErrors, FileNamesOutsideTheCheckpointFolder) {
  for (const std::string name : {"../rank_00000.safetensors", "/etc/passwd", "sub/../../x.safetensors", "..", ""}) {
    const std::string message = error_after([&](json& j) {
      j.at("files").at(0).at("name") = name;
      for (json& t : j.at("tensors")) {
        for (json& p : t.at("pieces")) {
          if (p.at("file") == "rank_00000.safetensors") p.at("file") = name;
        }
      }
    });
    EXPECT_TRUE(names_all(message, {kFile, name})) << "file name '" << name << "': " << message;
  }
}

TEST(ManifestErrors, AnotherFormatOrVersion) {
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("format_version") = 2; }), {kFile, "format_version", "2"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("format") = "megatron"; }), {kFile, "format"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.erase("format_version"); }), {kFile, "format_version"}));
}

TEST(ManifestErrors, InvalidModel) {
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("model").at("heads") = 3; }), {kFile, "model.heads"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("model").at("layers") = 0; }), {kFile, "model.layers"}));
  EXPECT_TRUE(
      names_all(error_after([](json& j) { j.at("model").at("activation") = "relu"; }), {kFile, "activation", "relu"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("model").erase("hidden"); }), {kFile, "hidden"}));
}

TEST(ManifestErrors, WrongTypesAndRanges) {
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("step") = "12"; }), {kFile, "step"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("step") = -1; }), {kFile, "step"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("consumed_samples") = 1.5; }), {kFile, "consumed_samples"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("layout").at("tp") = 0; }), {kFile, "tp"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("train_state").at("loss_scaling") = 1; }),
                        {kFile, "loss_scaling"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("files").at(0).at("crc32c") = int64_t{1} << 33; }),
                        {kFile, "crc32c"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { tensor_named(j, kWte).at("dtype") = "F128"; }),
                        {kFile, "dtype", "F128"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tensors") = json::object(); }), {kFile, "tensors"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j = json::array(); }), {kFile}));
  EXPECT_TRUE(names_all(error_message<FormatError>([] { manifest_from_json("{\"format\": ", kFile); }), {kFile}));
  EXPECT_TRUE(names_all(error_message<FormatError>([] { manifest_from_json("", kFile); }), {kFile}));
}

TEST(ManifestErrors, TheSameTensorOrFileTwice) {
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tensors").push_back(tensor_named(j, "rng/0")); }),
                        {kFile, "rng/0"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("files").push_back(j.at("files").at(1)); }),
                        {kFile, "rank_00001.safetensors"}));
}

// Checkpoints from before the tokenizer's files were carried have no key.
TEST(Manifest, TokenizerFilesMayBeAbsent) {
  json j = json::parse(manifest_to_json(full_manifest()));
  j.erase("tokenizer_files");
  EXPECT_TRUE(manifest_from_json(j.dump(), kFile).tokenizer_files.empty());
}

TEST(ManifestErrors, TokenizerFilesOutsideTheFolderUnlistedOrTwice) {
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tokenizer_files") = {"merges.txt"}; }),
                        {kFile, "merges.txt", "not among the manifest's files"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tokenizer_files") = {"../vocab.json"}; }),
                        {kFile, "tokenizer_files[0]", "../vocab.json"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tokenizer_files") = {"vocab.json", "vocab.json"}; }),
                        {kFile, "tokenizer_files", "twice"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tokenizer_files") = "vocab.json"; }),
                        {kFile, "tokenizer_files"}));
  EXPECT_TRUE(names_all(error_after([](json& j) { j.at("tokenizer_files") = {3}; }), {kFile, "tokenizer_files[0]"}));
}

TEST(ManifestFragment, RoundTripsAndMergesIntoTheManifest) {
  const Manifest whole = full_manifest();
  // What each rank wrote: its file and the pieces in it (the leader's with
  // the tokenizer file).
  std::vector<ManifestFragment> fragments(2);
  fragments[0].files.push_back(whole.files[2]);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = "rank_0000" + std::to_string(rank) + ".safetensors";
    fragments[rank].files.push_back(whole.files[rank]);
    for (const TensorEntry& t : whole.tensors) {
      TensorEntry mine{t.name, t.dtype, t.shape, {}};
      for (const Piece& p : t.pieces) {
        if (p.file == file) mine.pieces.push_back(p);
      }
      if (!mine.pieces.empty()) fragments[rank].tensors.push_back(mine);
    }
  }
  Manifest merged = whole;
  merged.tensors.clear();
  merged.files.clear();
  for (int rank : {1, 0}) {  // in any order
    const std::string text = fragment_to_json(fragments[rank]);
    const ManifestFragment back = fragment_from_json(text, "fragment_" + std::to_string(rank) + ".json");
    EXPECT_EQ(fragment_to_json(back), text);
    merge_fragment(merged, back);
  }
  for (auto& t : merged.tensors) {  // pieces in whatever order they came
    std::sort(t.pieces.begin(), t.pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  }
  expect_same(merged, whole);
  EXPECT_NO_THROW(manifest_from_json(manifest_to_json(merged), kFile));
}

TEST(ManifestFragment, DisagreeingShapesOrDTypesAndBadTextAreErrors) {
  Manifest m = test::fixture_manifest();
  ManifestFragment other;
  other.tensors.push_back({"rng/0", DType::u8, {32}, {}});
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { merge_fragment(m, other); }), {"rng/0"}));
  other.tensors[0] = {"rng/0", DType::i8, {16}, {}};
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { merge_fragment(m, other); }), {"rng/0"}));
  EXPECT_TRUE(names_all(error_message<FormatError>([] { fragment_from_json("{\"tensors\": 3}", "frag.json"); }), {"frag.json"}));
  EXPECT_TRUE(names_all(error_message<FormatError>([] { fragment_from_json("not json", "frag.json"); }), {"frag.json"}));
}

TEST(Manifest, AnImportedModelHasNoOptimizerState) {
  Manifest m = test::fixture_manifest();
  EXPECT_TRUE(m.has_optimizer_state());
  m.tensors.erase(std::remove_if(m.tensors.begin(), m.tensors.end(),
                                 [](const TensorEntry& t) { return t.name.rfind("optim/", 0) == 0; }),
                  m.tensors.end());
  EXPECT_FALSE(m.has_optimizer_state());
}

TEST(Manifest, ReadManifestNamesTheFolderOrFile) {
  TempDir dir;
  const auto missing = dir.path() / "step_00000001";
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { read_manifest(missing); }), {missing.string()}));
  const Manifest written = test::write_fixture_checkpoint(dir.path() / "good");
  expect_same(read_manifest(dir.path() / "good"), written);
  write_bytes(dir.path() / "good" / "manifest.json", "{\"format\":\"giant-checkpoint\"");
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { read_manifest(dir.path() / "good"); }),
                        {(dir.path() / "good" / "manifest.json").string()}));
}

TEST(ModelDifferences, OneLinePerKeyInTheUsersTerms) {
  const models::GptConfig saved = test::fixture_model();
  EXPECT_TRUE(model_differences(saved, saved).empty());
  models::GptConfig run = saved;
  run.hidden = 16;
  run.layers = 3;
  run.activation = models::Activation::gelu_tanh;
  run.dropout = 0.5;  // not what the weights mean: not compared
  run.init_std = 1;
  const std::vector<std::string> lines = model_differences(saved, run);
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  EXPECT_EQ(all,
            "model.activation: \"gelu\" in the checkpoint, \"gelu_tanh\" in this run\n"
            "model.ffn: 32 in the checkpoint, 64 in this run\n"  // 4 x hidden, ffn = 0 in both
            "model.hidden: 8 in the checkpoint, 16 in this run\n"
            "model.layers: 1 in the checkpoint, 3 in this run\n");
}

TEST(ModelDifferences, AnFfnOfZeroIsFourTimesHidden) {
  const models::GptConfig saved = test::fixture_model();  // ffn 0: 4 x 8
  models::GptConfig run = saved;
  run.ffn = 4 * saved.hidden;  // an imported model states its MLP width
  EXPECT_TRUE(model_differences(saved, run).empty()) << model_differences(saved, run).front();
  EXPECT_TRUE(model_differences(run, saved).empty());
  run.ffn = 3 * saved.hidden;
  ASSERT_EQ(model_differences(saved, run).size(), 1u);
  EXPECT_EQ(model_differences(saved, run)[0], "model.ffn: 32 in the checkpoint, 24 in this run");
}

TEST(CheckpointDir, StepFolderNames) {
  EXPECT_EQ(step_folder_name(0), "step_00000000");
  EXPECT_EQ(step_folder_name(1000), "step_00001000");
  EXPECT_EQ(step_folder_name(123456789), "step_123456789");
  EXPECT_EQ(step_of_folder("step_00001000"), 1000);
  EXPECT_EQ(step_of_folder("step_123456789"), 123456789);
  for (const std::string name : {"step_", "step_abc", "step_12x", ".tmp.step_00000001", "latest", "step_-0000001",
                                 "xstep_00000001", "step_99999999999999999999999"}) {
    EXPECT_EQ(step_of_folder(name), std::nullopt) << name;
  }
}

class CheckpointRoot : public ::testing::Test {
 protected:
  fs::path checkpoint(int64_t step) {
    const fs::path folder = dir_.path() / step_folder_name(step);
    test::write_fixture_checkpoint(folder);
    return folder;
  }
  TempDir dir_;
};

TEST_F(CheckpointRoot, ListsCommittedCheckpointsNewestFirst) {
  const auto a = checkpoint(99999999), b = checkpoint(123456789), c = checkpoint(5);
  fs::create_directories(dir_.path() / step_folder_name(7));  // no manifest: not committed
  fs::create_directories(dir_.path() / ".tmp.step_00000009");
  write_bytes(dir_.path() / ".tmp.step_00000009" / "manifest.json", "{}");
  write_bytes(dir_.path() / "step_00000011", "a file, not a folder");
  EXPECT_EQ(list_checkpoints(dir_.path()), (std::vector<fs::path>{b, a, c}));
  EXPECT_TRUE(list_checkpoints(dir_.path() / "absent").empty());
}

TEST_F(CheckpointRoot, LatestAndResolve) {
  EXPECT_EQ(latest_checkpoint(dir_.path()), std::nullopt);
  const auto older = checkpoint(10), newer = checkpoint(20);
  EXPECT_EQ(latest_checkpoint(dir_.path()), std::nullopt) << "no latest file yet";
  write_bytes(dir_.path() / "latest", step_folder_name(10) + "\n");
  EXPECT_EQ(latest_checkpoint(dir_.path()), older);
  EXPECT_EQ(resolve_checkpoint(dir_.path()), older);
  EXPECT_EQ(resolve_checkpoint(newer), newer);
  write_bytes(dir_.path() / "latest", "step_00000030\n");  // names no folder
  EXPECT_EQ(latest_checkpoint(dir_.path()), std::nullopt);
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { resolve_checkpoint(dir_.path()); }), {dir_.path().string()}));
  const auto nothing = dir_.path() / "nothing";
  fs::create_directories(nothing);
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { resolve_checkpoint(nothing); }), {nothing.string()}));
  EXPECT_TRUE(names_all(error_message<FormatError>([&] { resolve_checkpoint(dir_.path() / "absent"); }), {"absent"}));
}

}  // namespace
}  // namespace giant::checkpoint
