// giant_checkpoint_fuzz [--iterations N] [--seconds S] [--seed S] [--target
// NAME]: feeds
// mutated safetensors headers (with mutated file sizes), manifests,
// manifest fragments and Hugging Face config.json files to their parsers.
// Each input must either parse or be a FormatError; anything else (another
// exception, bad_alloc from an unchecked length, a crash) is a failure,
// reported with the input in hex. What parses must also be self-consistent:
// a header's tensors in data order, inside the data section and not
// overlapping; a manifest, fragment or config written back parses again to
// the same text.
//
// The command line and output are bench/fuzz's (fuzz_driver.h).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "giant/checkpoint/hf_gpt2_config.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"
#include "fuzz_driver.h"

namespace giant::checkpoint::fuzz {
using giant::fuzz::Inconsistent;
using giant::fuzz::Mutator;
using giant::fuzz::Target;
using giant::fuzz::Verdict;

namespace {

namespace fs = std::filesystem;

struct Input {
  std::string text;
  uint64_t file_size = 0;  // safetensors only: the size of the file the header claims to be in
};

void require(bool condition, const std::string& what) {
  if (!condition) throw Inconsistent(what);
}

// Headers as Giant's writer makes them, with their files' sizes: written
// to a temporary folder and read back.
std::vector<Input> safetensors_seeds() {
  std::string pattern = (fs::temp_directory_path() / "giant-fuzz-XXXXXX").string();
  const fs::path dir = mkdtemp(pattern.data());
  const std::vector<float> values(64, 0.25f);
  const std::vector<std::vector<TensorToWrite>> files = {
      {{"model/embedding.wte.weight@0,0", DType::f32, {4, 8}, values.data()},
       {"model/final_norm.weight@0", DType::f32, {8}, values.data()},
       {"rng/0@0", DType::u8, {16}, values.data()}},
      {{"scalar", DType::f64, {}, values.data()},
       {"empty", DType::bf16, {0, 3}, nullptr},
       {"half", DType::f16, {2, 2, 2}, values.data()},
       {"ids", DType::i64, {3}, values.data()},
       {"flags", DType::boolean, {4}, values.data()}}};
  std::vector<Input> seeds;
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path path = dir / ("seed" + std::to_string(i) + ".safetensors");
    const std::map<std::string, std::string> metadata =
        i == 0 ? std::map<std::string, std::string>{} : std::map<std::string, std::string>{{"format", "pt"}};
    const WrittenFile written = write_safetensors(path, files[i], metadata);
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t length = 0;
    for (int b = 7; b >= 0; --b) length = (length << 8) | static_cast<unsigned char>(bytes[b]);
    seeds.push_back({bytes.substr(8, length), written.bytes});
  }
  fs::remove_all(dir);
  return seeds;
}

Manifest seed_manifest(bool mixed_precision) {
  Manifest m;
  m.model.layers = 2;
  m.model.hidden = 16;
  m.model.heads = 2;
  m.model.vocab = 50;
  m.model.vocab_pad = 16;
  m.model.dropout = 0.1;
  m.step = 100;
  m.consumed_samples = 3200;
  m.layout = {2, 2, 1, 1, 1, "1f1b", "balanced", mixed_precision ? "fp16" : "fp32", "fp32", 4};
  m.train.optimizer_steps = 100;
  if (mixed_precision) {
    m.train.loss_scaling = true;
    m.train.loss_scale = 32768;
    m.train.loss_scale_good_steps = 17;
  }
  const std::string r0 = "rank_00000.safetensors", r1 = "rank_00001.safetensors";
  m.files = {{r0, 4096, 0x12345678}, {r1, 2048, 0x9abcdef0}};
  m.tensors = {
      {"model/embedding.wte.weight", DType::f32, {64, 16},
       {{r0, "model/embedding.wte.weight@0,0", {0, 0}, {32, 16}},
        {r1, "model/embedding.wte.weight@32,0", {32, 0}, {32, 16}}}},
      {"model/block.0.qkv.weight", DType::f32, {48, 16},
       {{r0, "model/block.0.qkv.weight@0,0", {0, 0}, {48, 8}}, {r1, "model/block.0.qkv.weight@0,8", {0, 8}, {48, 8}}}},
      {"optim/exp_avg/final_norm.weight", DType::f32, {16}, {{r1, "optim/exp_avg/final_norm.weight@0", {0}, {16}}}},
      {"rng/0", DType::u8, {16}, {{r0, "rng/0@0", {0}, {16}}}},
  };
  return m;
}

std::vector<Input> manifest_seeds() {
  return {{manifest_to_json(seed_manifest(false)), 0}, {manifest_to_json(seed_manifest(true)), 0}};
}

std::vector<Input> fragment_seeds() {
  std::vector<Input> seeds;
  for (const bool mixed : {false, true}) {
    const Manifest m = seed_manifest(mixed);
    ManifestFragment fragment{m.tensors, {m.files[0]}};
    seeds.push_back({fragment_to_json(fragment), 0});
  }
  return seeds;
}

void check_safetensors(const Input& input) {
  const SafetensorsHeader header = parse_safetensors_header(input.text, input.file_size, "fuzz.safetensors");
  require(header.data_offset == 8 + input.text.size(), "data_offset is not 8 + the header's length");
  require(input.file_size >= header.data_offset, "a header longer than its file was accepted");
  const uint64_t data_bytes = input.file_size - header.data_offset;
  uint64_t previous_end = 0;
  for (const TensorInfo& t : header.tensors) {
    require(t.begin >= previous_end, "tensor " + t.name + " overlaps the one before it, or is out of data order");
    require(t.begin <= t.end && t.end <= data_bytes, "tensor " + t.name + " is outside the data section");
    require(t.elements() >= 0 && t.bytes() == static_cast<uint64_t>(t.elements()) * dtype_size(t.dtype),
            "tensor " + t.name + "'s bytes are not its elements x dtype size");
    require(header.find(t.name) == &t, "find(" + t.name + ") is not its tensor");
    previous_end = t.end;
  }
}

// What `parse` accepts, `write` writes back to a text that parses again to
// the same text (`what`: the format, for the failure).
template <class Parse, class Write>
void check_round_trip(const Input& input, const std::string& what, Parse parse, Write write) {
  const std::string text = write(parse(input.text, "fuzz/" + what));
  try {
    require(write(parse(text, "rewritten")) == text, "the " + what + " does not round-trip");
  } catch (const FormatError& e) {
    throw Inconsistent("the " + what + " written back does not parse: " + e.what());
  }
}

void check_manifest(const Input& input) {
  check_round_trip(input, "manifest", manifest_from_json, manifest_to_json);
}

void check_fragment(const Input& input) {
  check_round_trip(input, "fragment", fragment_from_json, fragment_to_json);
}

// Hugging Face GPT-2 config.json files: as Giant writes them, and one with
// the fields HF adds that Giant ignores.
std::vector<Input> hf_config_seeds() {
  models::GptConfig small;
  small.layers = 2;
  small.hidden = 16;
  small.vocab = 50;
  return {{hf_gpt2_config_json(small), 0},
          {hf_gpt2_config_json(models::GptConfig{}), 0},
          {R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_head": 12,
               "n_layer": 12, "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257, "activation_function":
               "gelu_new", "layer_norm_epsilon": 1e-05, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
               "initializer_range": 0.02, "bos_token_id": 50256, "eos_token_id": 50256})",
           0}};
}

// What parses writes back (hf_gpt2_config_json) to a config that parses to
// the same model.
void check_hf_config(const Input& input) {
  check_round_trip(input, "config.json", parse_hf_gpt2_config, hf_gpt2_config_json);
}

// The safetensors target's inputs as the driver's strings: the file's size
// (8 bytes), then the header.
std::string encode_sized(const Input& input) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &input.file_size, 8);
  return bytes + input.text;
}

Input decode_sized(const std::string& bytes) {
  if (bytes.size() < 8) return {bytes, 0};
  Input input{bytes.substr(8), 0};
  std::memcpy(&input.file_size, bytes.data(), 8);
  return input;
}

// A new header, and mostly the parent's data section behind it, so that a
// header that still parses meets a file it could describe.
std::string mutate_sized(Mutator& mutator, const std::string& parent_bytes, const std::vector<std::string>& seeds) {
  const Input parent = decode_sized(parent_bytes);
  std::vector<std::string> seed_texts;
  for (const std::string& s : seeds) seed_texts.push_back(decode_sized(s).text);
  Input input{mutator.mutate(parent.text, seed_texts), 0};
  const uint64_t parent_data = parent.file_size - std::min<uint64_t>(parent.file_size, 8 + parent.text.size());
  input.file_size = 8 + input.text.size() + parent_data;
  if (mutator.below(4) == 0) input.file_size = mutator.mutate_size(input.file_size);
  return encode_sized(input);
}

// A parser's check as a fuzz target: FormatError is the expected answer to a bad input.
Target target_of(std::string name, const std::vector<Input>& seeds, std::function<void(const Input&)> check,
                 bool sized) {
  std::vector<std::string> seed_bytes;
  for (const Input& s : seeds) seed_bytes.push_back(sized ? encode_sized(s) : s.text);
  Target target{std::move(name), seed_bytes, [check, sized](const std::string& bytes) {
                  try {
                    check(sized ? decode_sized(bytes) : Input{bytes, 0});
                    return Verdict::accepted;
                  } catch (const FormatError&) {
                    return Verdict::refused;
                  }
                }};
  if (sized) target.mutate = mutate_sized;
  // Duplicated members would otherwise compound into ever larger, ever slower inputs.
  size_t longest = 0;
  for (const std::string& s : seed_bytes) longest = std::max(longest, s.size());
  target.max_pool_input = 4 * longest;
  return target;
}

std::vector<Target> targets() {
  return {target_of("safetensors_header", safetensors_seeds(), check_safetensors, true),
          target_of("manifest", manifest_seeds(), check_manifest, false),
          target_of("fragment", fragment_seeds(), check_fragment, false),
          target_of("hf_config", hf_config_seeds(), check_hf_config, false)};
}

}  // namespace
}  // namespace giant::checkpoint::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv,
                                "Fuzzes the checkpoint format's parsers (safetensors headers, manifests, fragments, "
                                "Hugging Face config.json; in a safetensors failure's hex, the first 8 bytes are the "
                                "file's size).",
                                "giant_checkpoint_fuzz", giant::checkpoint::fuzz::targets);
}
