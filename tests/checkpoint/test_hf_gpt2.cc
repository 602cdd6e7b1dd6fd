// Hugging Face GPT-2 export and import: a plain PyTorch GPT-2 forward
// (support/hf_gpt2_forward.py, Debian's python3-torch, the file read with
// its own few lines) on an export reproduces Giant's logits, for both
// activations and with the vocabulary padding dropped; import of an export
// re-exports the same bytes and loads into the same model; every bad input
// is an error naming the file and what is wrong.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdio>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "giant/checkpoint/hf_gpt2.h"
#include "giant/checkpoint/loader.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"
#include "giant/checkpoint/saver.h"
#include "giant/checkpoint/tensor_slices.h"
#include "giant/models/gpt.h"
#include "giant/parallel/tensor_parallel/splits.h"
#include "support/gpt_rounding.h"

namespace giant::checkpoint {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kForwardScript = std::string(GIANT_SOURCE_DIR) + "/tests/checkpoint/support/hf_gpt2_forward.py";
// Debian's, which has python3-torch and numpy (not a python3 earlier on PATH).
const std::string kPython = "/usr/bin/python3";
// Giant's forward and the plain PyTorch one (both fp32) order every product
// otherwise: support/gpt_rounding.h's bound, which is norm-wise; for the
// largest difference of any one logit (relative to the largest logit) the
// probabilistic model's tail factor lambda = 6 (Higham and Mary 2019: a
// chance below 2 n e^-18 that an element exceeds it).
double logits_bound(const models::GptConfig& config) {
  return 6 * giant::test::cached_forward_bound(config, giant::test::unit_roundoff(Precision::fp32));
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/giant-hf-gpt2-test-XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A vocabulary that is no multiple of vocab_pad: export must drop rows.
models::GptConfig small_model(models::Activation activation, int64_t ffn) {
  models::GptConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.ffn = ffn;
  c.seq_len = 16;
  c.vocab = 300;
  c.vocab_pad = 64;  // padded to 320
  c.activation = activation;
  return c;
}

// A model with seeded weights, every one of them moved well off its
// initial value: biases start at zero and LayerNorms at one, which would
// hide a swapped weight and bias, and GPT-2's small initial weights keep
// the MLP's inputs where GELU and its tanh approximation agree to 1e-6.
parallel::LayerStack seeded_model(const models::GptConfig& config, uint64_t seed) {
  auto model = models::gpt_layer_list(config).build_all(seed, torch::kFloat);
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(seed + 1);
  for (auto& p : model->parameters()) p.add_(at::normal(0.0, 0.3, p.sizes(), generator));
  model->eval();
  return model;
}

std::vector<TensorSlice> model_slices(const parallel::LayerStack& model, const std::string& skip = "") {
  const auto splits = parallel::tensor_parallel_splits(*model);
  std::vector<TensorSlice> slices;
  for (const auto& item : model->named_parameters()) {
    const std::string name = "model/" + global_parameter_name(item.key());
    if (name == skip) continue;
    const auto split = splits.count(item.key()) ? splits.at(item.key()) : parallel::TensorSplit{};
    for (auto& s : slices_of(name, item.value().detach(), split, 0, 1)) slices.push_back(std::move(s));
  }
  return slices;
}

// Saves the model as a run of one process saves it; returns the checkpoint.dir.
fs::path save_checkpoint(const parallel::LayerStack& model, const models::GptConfig& config, const fs::path& root,
                         const std::string& skip = "") {
  Manifest meta;
  meta.model = config;
  meta.step = 7;
  meta.consumed_samples = 56;
  CheckpointSaver saver({root, 3, false, {}, {}}, nullptr);
  saver.save(meta, model_slices(model, skip), {});
  return root;
}

torch::Tensor tokens_for(const models::GptConfig& config) {
  auto generator = at::detail::createCPUGenerator(11);
  auto tokens = at::randint(0, config.vocab, {2, config.seq_len}, generator, torch::kLong);
  tokens[0][0] = config.vocab - 1;  // the last real row of the embedding
  return tokens;
}

// Giant's logits over the real vocabulary (the padding's are -inf).
torch::Tensor giant_logits(parallel::LayerStack& model, const torch::Tensor& tokens, int64_t vocab) {
  torch::NoGradGuard no_grad;
  return model->forward(tokens).narrow(-1, 0, vocab).contiguous();
}

std::string tokens_json(const torch::Tensor& tokens) {
  Json rows = Json::array();
  for (int64_t b = 0; b < tokens.size(0); ++b) {
    Json row = Json::array();
    for (int64_t s = 0; s < tokens.size(1); ++s) row.push_back(tokens[b][s].item<int64_t>());
    rows.push_back(row);
  }
  return rows.dump();
}

// The plain PyTorch forward's logits on the exported folder.
torch::Tensor python_logits(const fs::path& folder, const torch::Tensor& tokens) {
  const fs::path errors = folder.parent_path() / "python_stderr.txt";
  const std::string command = kPython + " " + kForwardScript + " " + folder.string() + " '" + tokens_json(tokens) +
                              "' 2>" + errors.string();
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return {};
  std::string output;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << command << "\n" << output << read_bytes(errors);
  if (status != 0) return {};
  const Json result = Json::parse(output);
  const auto shape = result.at("shape").get<std::vector<int64_t>>();
  const auto values = result.at("logits").get<std::vector<double>>();
  return torch::tensor(values, torch::kDouble).view(shape).to(torch::kFloat);
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

struct Exported {
  models::GptConfig config;
  parallel::LayerStack model{nullptr};
};

// A model saved as a checkpoint and exported to folder `out`.
Exported export_model(const TempDir& dir, const models::GptConfig& config, const fs::path& out) {
  Exported e{config, seeded_model(config, 5)};
  export_hf_gpt2(save_checkpoint(e.model, config, dir / "run"), out);
  return e;
}

TEST(HfGpt2, PlainPyTorchForwardOnTheExportGivesGiantsLogits) {
  struct Case {
    models::Activation activation;
    int64_t ffn;
    const char* hf_name;
  };
  for (const Case c : {Case{models::Activation::gelu_tanh, 0, "gelu_new"}, Case{models::Activation::gelu, 48, "gelu"}}) {
    SCOPED_TRACE(c.hf_name);
    TempDir dir;
    Exported e = export_model(dir, small_model(c.activation, c.ffn), dir / "hf");
    const Json config = Json::parse(read_bytes(dir / "hf" / "config.json"));
    EXPECT_EQ(config.at("model_type"), "gpt2");
    EXPECT_EQ(config.at("architectures"), Json::array({"GPT2LMHeadModel"}));
    EXPECT_EQ(config.at("activation_function"), c.hf_name);
    EXPECT_EQ(config.at("vocab_size"), 300);
    EXPECT_EQ(config.at("n_positions"), 16);
    EXPECT_EQ(config.at("n_inner"), c.ffn > 0 ? Json(c.ffn) : Json(nullptr));
    EXPECT_EQ(config.at("layer_norm_epsilon"), 1e-5);
    EXPECT_EQ(config.at("tie_word_embeddings"), true);
    EXPECT_FALSE(config.contains("eos_token_id"));  // only GPT-2's own vocabulary has one

    const SafetensorsReader weights(dir / "hf" / "model.safetensors");
    EXPECT_EQ(weights.header().metadata.at("format"), "pt");
    ASSERT_NE(weights.header().find("transformer.wte.weight"), nullptr);
    EXPECT_EQ(weights.header().find("transformer.wte.weight")->shape, (std::vector<int64_t>{300, 32}));
    EXPECT_EQ(weights.header().find("transformer.h.1.attn.c_attn.weight")->shape, (std::vector<int64_t>{32, 96}));
    EXPECT_EQ(weights.header().find("lm_head.weight"), nullptr);

    const torch::Tensor tokens = tokens_for(e.config);
    const torch::Tensor reference = python_logits(dir / "hf", tokens);
    ASSERT_TRUE(reference.defined());
    const torch::Tensor logits = giant_logits(e.model, tokens, e.config.vocab);
    ASSERT_EQ(reference.sizes(), logits.sizes());
    const double difference = relative_difference(logits, reference);
    EXPECT_LT(difference, logits_bound(e.config));
    std::cout << c.hf_name << ": Giant's logits and the plain PyTorch GPT-2's differ by " << difference
              << " of the largest\n";
  }
}

TEST(HfGpt2, ActivationsTellApart) {
  // The check above would pass for either activation if they gave nearly
  // the same logits on this model: they must differ by more than rounding
  // could (2e-4 apart here).
  TempDir dir;
  Exported e = export_model(dir, small_model(models::Activation::gelu_tanh, 0), dir / "hf");
  Json config = Json::parse(read_bytes(dir / "hf" / "config.json"));
  config["activation_function"] = "gelu";
  write_bytes(dir / "hf" / "config.json", config.dump());
  const torch::Tensor tokens = tokens_for(e.config);
  const torch::Tensor other = python_logits(dir / "hf", tokens);
  ASSERT_TRUE(other.defined());
  const double difference = relative_difference(giant_logits(e.model, tokens, e.config.vocab), other);
  EXPECT_GT(difference, logits_bound(e.config));
  std::cout << "gelu_tanh's logits and plain gelu's differ by " << difference << " of the largest\n";
}

TEST(HfGpt2, ImportOfAnExportReexportsTheSameBytes) {
  for (const auto activation : {models::Activation::gelu_tanh, models::Activation::gelu}) {
    TempDir dir;
    Exported e = export_model(dir, small_model(activation, activation == models::Activation::gelu ? 48 : 0),
                              dir / "hf");
    import_hf_gpt2(dir / "hf", dir / "imported");
    EXPECT_FALSE(fs::exists(dir / "imported.tmp"));
    export_hf_gpt2(dir / "imported", dir / "again");
    for (const char* file : {"config.json", "model.safetensors"}) {
      EXPECT_EQ(read_bytes(dir / "hf" / file), read_bytes(dir / "again" / file)) << file;
    }

    // A checkpoint to train on: step 0, no optimizer state, every file
    // checksummed, the model as config.json describes it.
    const CheckpointLoader loader(dir / "imported");
    const Manifest& m = loader.manifest();
    EXPECT_TRUE(verify_checkpoint(dir / "imported", m).empty());
    EXPECT_EQ(m.step, 0);
    EXPECT_FALSE(m.has_optimizer_state());
    EXPECT_EQ(m.model.vocab, 300);
    EXPECT_EQ(m.model.vocab_pad, 128);
    EXPECT_EQ(m.model.ffn, e.config.ffn);
    EXPECT_EQ(m.model.activation, activation);
    EXPECT_EQ(m.layout, SavedLayout{});
    EXPECT_EQ(m.tokenizer, "gpt2:" + (dir / "hf").string());  // vocabulary over 256 without BPE files: said
    const at::Tensor wte = loader.read("model/embedding.wte.weight");
    EXPECT_EQ(wte.sizes(), (at::IntArrayRef{384, 32}));
    EXPECT_TRUE(at::equal(wte.narrow(0, 300, 84), at::zeros({84, 32})));

    // Loaded into a model of its config, it computes what the original did.
    auto imported = models::gpt_layer_list(m.model).build_all(99, torch::kFloat);
    imported->eval();
    loader.load(model_slices(imported));
    const torch::Tensor tokens = tokens_for(e.config);
    // The same weights, bitwise, through the same code: the same logits up
    // to the matrix kernel's order of summation, which some BLAS kernels
    // (OpenBLAS's Haswell ones) choose by the weights' alignment in memory.
    EXPECT_LT(relative_difference(giant_logits(imported, tokens, 300), giant_logits(e.model, tokens, 300)),
              logits_bound(e.config));
  }
}

TEST(HfGpt2, ImportNamesItsTokenizer) {
  TempDir dir;
  export_model(dir, small_model(models::Activation::gelu_tanh, 0), dir / "hf");
  write_bytes(dir / "hf" / "vocab.json", "{}");
  write_bytes(dir / "hf" / "merges.txt", "#version: 0.2\n");
  import_hf_gpt2(dir / "hf/", dir / "imported/");  // trailing separators too
  const Manifest imported = read_manifest(dir / "imported");
  EXPECT_EQ(imported.tokenizer, "gpt2:" + (dir / "hf").string());
  // The BPE files are carried into the checkpoint, and checked with it.
  EXPECT_EQ(imported.tokenizer_files, (std::vector<std::string>{"merges.txt", "vocab.json"}));
  EXPECT_EQ(read_bytes(dir / "imported" / "vocab.json"), "{}");
  EXPECT_EQ(read_bytes(dir / "imported" / "merges.txt"), "#version: 0.2\n");
  EXPECT_TRUE(verify_checkpoint(dir / "imported", imported).empty());

  TempDir bytes;
  models::GptConfig small = small_model(models::Activation::gelu, 0);
  small.vocab = 256;
  export_model(bytes, small, bytes / "hf");
  import_hf_gpt2(bytes / "hf", bytes / "imported");
  EXPECT_EQ(read_manifest(bytes / "imported").tokenizer, "byte");
  EXPECT_TRUE(read_manifest(bytes / "imported").tokenizer_files.empty());
}

// A checkpoint carrying its tokenizer's files: the saver writes and lists
// them, the export writes them beside the weights (replacing a previous
// export's), and a copy changed since the save is not exported.
TEST(HfGpt2, ExportCarriesTheCheckpointsTokenizerFiles) {
  TempDir dir;
  const models::GptConfig config = small_model(models::Activation::gelu_tanh, 0);
  Manifest meta;
  meta.model = config;
  meta.tokenizer = "gpt2:somewhere";
  meta.step = 7;
  SaverOptions options{dir / "run", 3, false, {{"vocab.json", "{\"a\": 0}"}, {"merges.txt", "#version: 0.2\n"}}, {}};
  CheckpointSaver(options, nullptr).save(meta, model_slices(seeded_model(config, 5)), {});
  const fs::path step = dir / "run" / "step_00000007";
  const Manifest saved = read_manifest(step);
  EXPECT_EQ(saved.tokenizer_files, (std::vector<std::string>{"merges.txt", "vocab.json"}));
  EXPECT_EQ(read_bytes(step / "vocab.json"), "{\"a\": 0}");
  EXPECT_TRUE(verify_checkpoint(step, saved).empty());

  export_hf_gpt2(dir / "run", dir / "hf");
  export_hf_gpt2(dir / "run", dir / "hf");  // a previous export, with its tokenizer files, is replaced
  EXPECT_EQ(read_bytes(dir / "hf" / "vocab.json"), "{\"a\": 0}");
  EXPECT_EQ(read_bytes(dir / "hf" / "merges.txt"), "#version: 0.2\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "hf"), fs::directory_iterator()), 4);

  write_bytes(step / "vocab.json", "{\"b\": 0}");
  try {
    export_hf_gpt2(dir / "run", dir / "again");
    ADD_FAILURE() << "exported a changed tokenizer file";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.json"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "again"));
  // The saver refuses names the checkpoint's own files take.
  for (const std::string name : {"manifest.json", "rank_00000.safetensors", "a/b", ""}) {
    EXPECT_THROW(CheckpointSaver(SaverOptions{dir / "other", 3, false, {{name, "x"}}, {}}, nullptr), Error) << name;
  }
}

TEST(HfGpt2, ExportIsRepeatableAndReplacesOnlyAPreviousExport) {
  TempDir dir;
  const models::GptConfig config = small_model(models::Activation::gelu_tanh, 0);
  const fs::path root = save_checkpoint(seeded_model(config, 5), config, dir / "run");
  export_hf_gpt2(root, dir / "hf");
  const std::string first = read_bytes(dir / "hf" / "model.safetensors");
  export_hf_gpt2(root / "step_00000007", dir / "hf");  // the folder itself, or its checkpoint.dir
  EXPECT_EQ(read_bytes(dir / "hf" / "model.safetensors"), first);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "hf"), fs::directory_iterator()), 2);

  fs::create_directories(dir / "mine");
  write_bytes(dir / "mine" / "notes.txt", "keep me");
  try {
    export_hf_gpt2(root, dir / "mine");
    ADD_FAILURE() << "exported into a folder holding another file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("notes.txt"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_bytes(dir / "mine" / "notes.txt"), "keep me");
  EXPECT_FALSE(fs::exists(dir / "mine" / "config.json"));
}

// The message of the FormatError f() throws ("" when it throws none).
std::string format_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& message, const std::vector<std::string>& words) {
  EXPECT_FALSE(message.empty()) << "no FormatError";
  for (const auto& word : words) EXPECT_NE(message.find(word), std::string::npos) << word << " in: " << message;
}

TEST(HfGpt2, ExportNamesWhatTheCheckpointLacks) {
  TempDir dir;
  const models::GptConfig config = small_model(models::Activation::gelu, 0);
  const fs::path root = save_checkpoint(seeded_model(config, 5), config, dir / "run", "model/final_norm.bias");
  expect_mentions(format_error([&] { export_hf_gpt2(root, dir / "hf"); }),
                  {"manifest.json", "model/final_norm.bias", "missing"});
  expect_mentions(format_error([&] { export_hf_gpt2(dir / "nothing", dir / "hf"); }), {"nothing"});
  EXPECT_FALSE(fs::exists(dir / "hf"));
}

// An export's tensors, rewritten by `edit` into folder `to` beside its config.json.
struct StoredTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

void rewrite_weights(const fs::path& from, const fs::path& to,
                     const std::function<void(std::vector<StoredTensor>&)>& edit) {
  const SafetensorsReader reader(from / "model.safetensors");
  std::vector<StoredTensor> stored;
  for (const TensorInfo& t : reader.header().tensors) {
    StoredTensor s{t.name, t.dtype, t.shape, std::string(t.bytes(), '\0')};
    reader.read(t, s.bytes.data());
    stored.push_back(std::move(s));
  }
  edit(stored);
  std::vector<TensorToWrite> tensors;
  for (const StoredTensor& s : stored) tensors.push_back({s.name, s.dtype, s.shape, s.bytes.data()});
  fs::create_directories(to);
  if (from != to) fs::copy_file(from / "config.json", to / "config.json", fs::copy_options::overwrite_existing);
  write_safetensors(to / "model.safetensors", tensors, {{"format", "pt"}});
}

StoredTensor& find(std::vector<StoredTensor>& tensors, const std::string& name) {
  for (auto& t : tensors) {
    if (t.name == name) return t;
  }
  throw Error("no tensor " + name);
}

TEST(HfGpt2, ImportAcceptsWhatTransformersFilesHold) {
  // GPT2Model's names (no "transformer."), causal-mask buffers, a stored
  // lm_head equal to wte: the same checkpoint as from the plain export.
  TempDir dir;
  export_model(dir, small_model(models::Activation::gelu_tanh, 0), dir / "hf");
  rewrite_weights(dir / "hf", dir / "variant", [](std::vector<StoredTensor>& tensors) {
    StoredTensor head = find(tensors, "transformer.wte.weight");
    head.name = "lm_head.weight";
    for (auto& t : tensors) t.name = t.name.substr(std::string("transformer.").size());
    const std::string mask(16 * 16, '\1');
    tensors.push_back({"h.0.attn.bias", DType::u8, {1, 1, 16, 16}, mask});
    tensors.push_back({"h.0.attn.masked_bias", DType::f32, {}, std::string(4, '\0')});
    tensors.push_back(head);
  });
  import_hf_gpt2(dir / "hf", dir / "plain");
  import_hf_gpt2(dir / "variant", dir / "imported");
  EXPECT_EQ(read_bytes(dir / "plain" / "model.safetensors"), read_bytes(dir / "imported" / "model.safetensors"));
}

TEST(HfGpt2, ImportConvertsHalfPrecisionFiles) {
  TempDir dir;
  export_model(dir, small_model(models::Activation::gelu_tanh, 0), dir / "hf");
  at::Tensor half;
  rewrite_weights(dir / "hf", dir / "half", [&](std::vector<StoredTensor>& tensors) {
    StoredTensor& t = find(tensors, "transformer.ln_f.weight");
    const at::Tensor f32 = at::from_blob(t.bytes.data(), t.shape, at::kFloat);
    half = f32.to(at::kHalf);
    t.dtype = DType::f16;
    t.bytes.assign(static_cast<const char*>(half.data_ptr()), half.nbytes());
  });
  import_hf_gpt2(dir / "half", dir / "imported");
  EXPECT_TRUE(at::equal(CheckpointLoader(dir / "imported").read("model/final_norm.weight"), half.to(at::kFloat)));
}

TEST(HfGpt2, ImportErrorsNameTheFileAndTheField) {
  TempDir dir;
  export_model(dir, small_model(models::Activation::gelu_tanh, 0), dir / "hf");
  const Json good = Json::parse(read_bytes(dir / "hf" / "config.json"));
  auto with_config = [&](const std::function<void(Json&)>& edit) {
    fs::remove_all(dir / "bad");
    rewrite_weights(dir / "hf", dir / "bad", [](std::vector<StoredTensor>&) {});
    Json config = good;
    edit(config);
    write_bytes(dir / "bad" / "config.json", config.dump());
    return format_error([&] { import_hf_gpt2(dir / "bad", dir / "out"); });
  };
  expect_mentions(with_config([](Json& c) { c.erase("n_head"); }), {"config.json", "'n_head'", "missing"});
  expect_mentions(with_config([](Json& c) { c["n_embd"] = "32"; }), {"config.json", "'n_embd'", "integer"});
  expect_mentions(with_config([](Json& c) { c["n_head"] = 5; }), {"'n_head'", "does not divide"});
  expect_mentions(with_config([](Json& c) { c["model_type"] = "llama"; }), {"'model_type'", "llama"});
  expect_mentions(with_config([](Json& c) { c["activation_function"] = "relu"; }),
                  {"'activation_function'", "relu"});
  expect_mentions(with_config([](Json& c) { c["attn_pdrop"] = 0.2; }), {"'attn_pdrop'", "resid_pdrop"});
  expect_mentions(with_config([](Json& c) { c["layer_norm_epsilon"] = 1e-6; }), {"'layer_norm_epsilon'"});
  expect_mentions(with_config([](Json& c) { c["tie_word_embeddings"] = false; }), {"'tie_word_embeddings'"});
  expect_mentions(with_config([](Json& c) { c["n_positions"] = 32; }),  // the tensors no longer fit it
                  {"model.safetensors", "transformer.wpe.weight", "[16, 32]", "[32, 32]"});
  EXPECT_EQ(with_config([](Json& c) { c["activation_function"] = "gelu_pytorch_tanh"; }), "");
  fs::remove_all(dir / "out");

  auto with_weights = [&](const std::function<void(std::vector<StoredTensor>&)>& edit) {
    fs::remove_all(dir / "bad");
    rewrite_weights(dir / "hf", dir / "bad", edit);
    return format_error([&] { import_hf_gpt2(dir / "bad", dir / "out"); });
  };
  expect_mentions(with_weights([](std::vector<StoredTensor>& t) {
                    StoredTensor& w = find(t, "transformer.h.1.mlp.c_fc.weight");
                    w.shape = {w.shape[1], w.shape[0]};  // stored as a Linear, untransposed
                  }),
                  {"model.safetensors", "transformer.h.1.mlp.c_fc.weight", "[128, 32]", "[32, 128]"});
  expect_mentions(with_weights([](std::vector<StoredTensor>& t) {
                    t.erase(t.begin() + 3);
                  }),
                  {"model.safetensors", "missing"});
  expect_mentions(with_weights([](std::vector<StoredTensor>& t) {
                    t.push_back({"transformer.h.2.ln_1.weight", DType::f32, {32}, std::string(128, '\0')});
                  }),
                  {"model.safetensors", "transformer.h.2.ln_1.weight"});
  expect_mentions(with_weights([](std::vector<StoredTensor>& t) {
                    StoredTensor head = find(t, "transformer.wte.weight");
                    head.name = "lm_head.weight";
                    head.bytes[0] ^= 1;
                    t.push_back(head);
                  }),
                  {"lm_head.weight", "tied"});
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_FALSE(fs::exists(dir / "out.tmp"));
  expect_mentions(format_error([&] { import_hf_gpt2(dir / "nothing", dir / "out"); }), {"nothing/config.json"});
}

TEST(HfGpt2, ImportNeverReplacesAFolder) {
  TempDir dir;
  export_model(dir, small_model(models::Activation::gelu_tanh, 0), dir / "hf");
  fs::create_directories(dir / "out");
  EXPECT_THROW(import_hf_gpt2(dir / "hf", dir / "out"), Error);
  // An interrupted import's leftover is replaced; a folder of other files is not.
  fs::create_directories(dir / "next.tmp");
  write_bytes(dir / "next.tmp" / "manifest.json", "{");
  import_hf_gpt2(dir / "hf", dir / "next");
  EXPECT_TRUE(verify_checkpoint(dir / "next", read_manifest(dir / "next")).empty());
  fs::create_directories(dir / "other.tmp");
  write_bytes(dir / "other.tmp" / "notes.txt", "keep me");
  EXPECT_THROW(import_hf_gpt2(dir / "hf", dir / "other"), Error);
  EXPECT_EQ(read_bytes(dir / "other.tmp" / "notes.txt"), "keep me");
}

}  // namespace
}  // namespace giant::checkpoint
