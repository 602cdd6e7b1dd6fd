// giant_checkpoint_fuzz --iterations N --seed S [--target NAME]: feeds
// mutated safetensors headers (with mutated file sizes), manifests,
// manifest fragments and Hugging Face config.json files to their parsers.
// Each input must either parse or be a FormatError; anything else (another
// exception, bad_alloc from an unchecked length, a crash) is a failure,
// reported with the input in hex. What parses must also be self-consistent:
// a header's tensors in data order, inside the data section and not
// overlapping; a manifest, fragment or config written back parses again to
// the same text.
//
// Prints one line per target (accepted: the inputs that parsed):
//   fuzz target=NAME iterations=N failures=F seconds=S accepted=K
// and exits 1 on the first failure, 2 on bad flags.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <CLI/CLI.hpp>

#include "giant/base/timer.h"
#include "giant/checkpoint/hf_gpt2_config.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"
#include "mutator.h"

namespace giant::checkpoint::fuzz {
namespace {

namespace fs = std::filesystem;

struct Input {
  std::string text;
  uint64_t file_size = 0;  // safetensors only: the size of the file the header claims to be in
};

// A violated expectation about something that parsed.
class Inconsistent : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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

struct Target {
  std::string name;
  std::function<std::vector<Input>()> seeds;
  std::function<void(const Input&)> check;
  bool has_file_size = false;
};

void report_failure(const Target& target, const Input& input, const std::string& what) {
  std::cout << "failure: target=" << target.name << ": " << what << "\n"
            << "input (" << input.text.size() << " bytes";
  if (target.has_file_size) std::cout << ", file size " << input.file_size;
  std::cout << "):\n" << hex_dump(input.text);
}

// Runs one target; the number of failures (0 or 1: it stops at the first).
int run_target(const Target& target, int64_t iterations, uint64_t seed) {
  Mutator mutator(seed ^ std::hash<std::string>{}(target.name));
  const std::vector<Input> seeds = target.seeds();
  std::vector<std::string> seed_texts;
  for (const auto& s : seeds) seed_texts.push_back(s.text);
  std::vector<Input> pool = seeds;  // seeds and mutants that parsed: later mutations build on them
  constexpr size_t kPoolSize = 256;
  // Mutants that grew past this stay out of the pool: duplicated members
  // would otherwise compound into ever larger, ever slower inputs.
  size_t max_pool_input = 0;
  for (const auto& s : seeds) max_pool_input = std::max(max_pool_input, 4 * s.text.size());
  const Stopwatch clock;
  int64_t done = 0, accepted = 0;
  int failures = 0;
  for (; done < iterations && failures == 0; ++done) {
    const Input& parent = pool[mutator.below(pool.size())];
    Input input{mutator.mutate(parent.text, seed_texts), parent.file_size};
    if (target.has_file_size) {
      // Mostly the parent's data section behind the new header, so that a
      // header that still parses meets a file it could describe.
      const uint64_t parent_data = parent.file_size - std::min<uint64_t>(parent.file_size, 8 + parent.text.size());
      input.file_size = 8 + input.text.size() + parent_data;
      if (mutator.below(4) == 0) input.file_size = mutator.mutate_size(input.file_size);
    }
    try {
      target.check(input);
      ++accepted;
      if (input.text.size() > max_pool_input) continue;
      if (pool.size() < kPoolSize) {
        pool.push_back(std::move(input));
      } else {
        pool[seeds.size() + mutator.below(kPoolSize - seeds.size())] = std::move(input);
      }
    } catch (const FormatError&) {
      // The expected answer to a bad input.
    } catch (const Inconsistent& e) {
      report_failure(target, input, std::string("accepted but inconsistent: ") + e.what());
      ++failures;
    } catch (const std::exception& e) {
      report_failure(target, input, std::string("not a FormatError (") + typeid(e).name() + "): " + e.what());
      ++failures;
    } catch (...) {
      report_failure(target, input, "an exception that is not a std::exception");
      ++failures;
    }
  }
  std::cout << "fuzz target=" << target.name << " iterations=" << done << " failures=" << failures
            << " seconds=" << clock.seconds() << " accepted=" << accepted << std::endl;
  return failures;
}

}  // namespace
}  // namespace giant::checkpoint::fuzz

int main(int argc, char** argv) {
  using namespace giant::checkpoint::fuzz;
  CLI::App cli("Fuzzes the checkpoint format's parsers (safetensors headers, manifests, fragments).",
               "giant_checkpoint_fuzz");
  int64_t iterations = 100000;
  uint64_t seed = 1;
  std::string which = "all";
  cli.add_option("--iterations", iterations, "mutated inputs per target")->check(CLI::PositiveNumber);
  cli.add_option("--seed", seed, "the mutations' random seed");
  cli.add_option("--target", which, "safetensors_header, manifest, fragment, hf_config or all")
      ->check(CLI::IsMember({"safetensors_header", "manifest", "fragment", "hf_config", "all"}));
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e);
    return code == 0 ? 0 : 2;
  }
  const std::vector<Target> targets = {
      {"safetensors_header", safetensors_seeds, check_safetensors, true},
      {"manifest", manifest_seeds, check_manifest, false},
      {"fragment", fragment_seeds, check_fragment, false},
      {"hf_config", hf_config_seeds, check_hf_config, false},
  };
  int failures = 0;
  for (const Target& target : targets) {
    if (which == "all" || which == target.name) failures += run_target(target, iterations, seed);
  }
  return failures == 0 ? 0 : 1;
}
