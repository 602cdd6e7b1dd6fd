#include "giant/checkpoint/hf_gpt2.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "giant/base/crc32c.h"
#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/base/synced_files.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/hf_gpt2_config.h"
#include "giant/checkpoint/loader.h"
#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/safetensors.h"

namespace giant::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kHfPrefix = "transformer.";
// GPT-2's BPE files in a Hugging Face folder (GPT2Tokenizer's names).
constexpr const char* kHfTokenizerFiles[] = {"merges.txt", "vocab.json"};

// How a Giant tensor becomes its Hugging Face counterpart.
enum class Conversion {
  same,             // LayerNorms, biases, position embedding
  transposed,       // torch Linear [out, in] <-> GPT-2 Conv1D [in, out]
  vocabulary_rows,  // Giant's padded rows dropped on export, zero rows added on import
};

struct TensorPair {
  std::string giant, hf;  // "model/block.0.qkv.weight", "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> giant_shape, hf_shape;
  Conversion conversion = Conversion::same;
};

// Every weight of a Giant GPT and its Hugging Face name, sorted by the
// latter (the order both files are written in). Giant's names are the
// model's named_parameters() ("tp_" dropped, global_parameter_name): layer
// "block.3" is module "block_3" (LayerList::build: module names hold no
// '.'). The fused q/k/v weight's output rows are q | k | v, each heads x
// head_dim, as attention.cc views them: the order of c_attn's output
// columns, so transposing is all.
std::vector<TensorPair> tensor_pairs(const models::GptConfig& m) {
  const int64_t h = m.hidden, f = m.ffn_size();
  std::vector<TensorPair> pairs;
  auto same = [&](const std::string& giant, const std::string& hf, std::vector<int64_t> shape) {
    pairs.push_back({"model/" + giant, kHfPrefix + hf, shape, shape, Conversion::same});
  };
  auto linear = [&](const std::string& giant, const std::string& hf, int64_t in, int64_t out) {
    pairs.push_back({"model/" + giant + ".weight", kHfPrefix + hf + ".weight", {out, in}, {in, out},
                     Conversion::transposed});
    same(giant + ".bias", hf + ".bias", {out});
  };
  pairs.push_back({"model/embedding.wte.weight", std::string(kHfPrefix) + "wte.weight", {m.padded_vocab(), h},
                   {m.vocab, h}, Conversion::vocabulary_rows});
  same("embedding.wpe", "wpe.weight", {m.seq_len, h});
  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string g = "block_" + std::to_string(i) + ".", t = "h." + std::to_string(i) + ".";
    same(g + "ln1_weight", t + "ln_1.weight", {h});
    same(g + "ln1_bias", t + "ln_1.bias", {h});
    linear(g + "qkv", t + "attn.c_attn", h, 3 * h);
    linear(g + "proj", t + "attn.c_proj", h, h);
    same(g + "ln2_weight", t + "ln_2.weight", {h});
    same(g + "ln2_bias", t + "ln_2.bias", {h});
    linear(g + "fc1", t + "mlp.c_fc", h, f);
    linear(g + "fc2", t + "mlp.c_proj", f, h);
  }
  same("final_norm.weight", "ln_f.weight", {h});
  same("final_norm.bias", "ln_f.bias", {h});
  std::sort(pairs.begin(), pairs.end(), [](const TensorPair& a, const TensorPair& b) { return a.hf < b.hf; });
  return pairs;
}

// "dir/" and "dir" name the same folder; OUT.tmp must be a sibling of it.
fs::path without_trailing_separator(const fs::path& path) {
  fs::path p = path.lexically_normal();
  return p.has_filename() || !p.has_parent_path() ? p : p.parent_path();
}

void rename_path(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (error) throw Error("cannot rename " + from.string() + " to " + to.string() + ": " + error.message());
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path.string() + ": missing or unreadable");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- export ----------------------------------------------------------------

// The files an export writes (and the temporary names they are written
// under): an OUT holding nothing else is a previous export, safe to replace.
std::string temporary_name(const std::string& file) { return "." + file + ".tmp"; }

bool is_export_file(const std::string& name, const std::vector<std::string>& tokenizer_files) {
  std::vector<std::string> files = tokenizer_files;
  files.insert(files.end(), {kConfigFile, kWeightsFile});
  for (const std::string& file : files) {
    if (name == file || name == temporary_name(file)) return true;
  }
  return false;
}

void prepare_export_folder(const fs::path& out, const std::vector<std::string>& tokenizer_files) {
  if (fs::exists(out)) {
    if (!fs::is_directory(out)) throw Error(out.string() + " exists and is not a folder");
    for (const auto& entry : fs::directory_iterator(out)) {
      const std::string name = entry.path().filename().string();
      if (!is_export_file(name, tokenizer_files)) {
        throw Error(out.string() + " holds " + name + ", which a Hugging Face export does not write: "
                    "export into an empty or new folder (or a previous export's)");
      }
    }
  }
  std::error_code error;
  fs::create_directories(out, error);
  if (error) throw Error("cannot create " + out.string() + ": " + error.message());
}

// The checkpoint's model/ tensors are exactly a GPT's, fp32, with its shapes.
void check_checkpoint_tensors(const Manifest& manifest, const std::vector<TensorPair>& pairs,
                              const std::string& file) {
  std::set<std::string> expected;
  for (const TensorPair& pair : pairs) {
    expected.insert(pair.giant);
    const TensorEntry* entry = manifest.find(pair.giant);
    if (entry == nullptr) throw FormatError(file + ": tensor " + pair.giant + " is missing");
    if (entry->dtype != DType::f32) {
      throw FormatError(file + ": tensor " + pair.giant + " is " + dtype_name(entry->dtype) + ", not F32");
    }
    if (entry->shape != pair.giant_shape) {
      throw FormatError(file + ": tensor " + pair.giant + " has shape " + shape_text(entry->shape) +
                        ", the model config gives " + shape_text(pair.giant_shape));
    }
  }
  for (const TensorEntry& entry : manifest.tensors) {
    if (entry.name.rfind("model/", 0) == 0 && expected.count(entry.name) == 0) {
      throw FormatError(file + ": tensor " + entry.name + " has no place in a Hugging Face GPT-2");
    }
  }
}

at::Tensor to_hf(const at::Tensor& giant, const TensorPair& pair) {
  switch (pair.conversion) {
    case Conversion::same: return giant.contiguous();
    case Conversion::transposed: return giant.t().contiguous();
    case Conversion::vocabulary_rows: return giant.narrow(0, 0, pair.hf_shape[0]).contiguous();
  }
  throw Error("unknown tensor conversion");
}

// Written under a temporary name, then renamed: OUT never holds half a file
// under its real name.
void write_export_weights(const fs::path& out, const CheckpointLoader& loader, const std::vector<TensorPair>& pairs) {
  std::vector<at::Tensor> data;
  std::vector<TensorToWrite> tensors;
  data.reserve(pairs.size());
  for (const TensorPair& pair : pairs) {
    data.push_back(to_hf(loader.read(pair.giant), pair));
    tensors.push_back({pair.hf, DType::f32, pair.hf_shape, data.back().data_ptr()});
  }
  const fs::path temporary = out / temporary_name(kWeightsFile);
  write_safetensors(temporary, tensors, {{"format", "pt"}});  // transformers' loader asks for "pt"
  rename_path(temporary, out / kWeightsFile);
}

// The tokenizer files the checkpoint carries (GPT-2's are vocab.json and
// merges.txt, the names transformers' tokenizer reads), read and checked
// before anything is written: a copy changed since the save is refused.
std::vector<std::pair<std::string, std::string>> read_carried_tokenizer(const fs::path& checkpoint_dir,
                                                                        const Manifest& manifest) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& name : manifest.tokenizer_files) {
    const fs::path source = checkpoint_dir / name;
    std::string bytes = read_text_file(source);
    const auto entry = std::find_if(manifest.files.begin(), manifest.files.end(),
                                    [&](const FileEntry& f) { return f.name == name; });
    if (entry == manifest.files.end() || entry->bytes != bytes.size() || entry->crc32c != crc32c(bytes)) {
      throw FormatError(source.string() + ": not the tokenizer file the manifest lists (its size or CRC-32C "
                                          "changed)");
    }
    files.emplace_back(name, std::move(bytes));
  }
  return files;
}

// ---- import ----------------------------------------------------------------

// Where each GPT-2 tensor is in the file, by its Hugging Face name.
struct FoundTensors {
  std::map<std::string, const TensorInfo*> by_name;
  const TensorInfo* lm_head = nullptr;  // a copy of wte some files store
};

// transformers' GPT2Model saves names without "transformer.", GPT2LMHeadModel
// with it; either is accepted. Causal-mask buffers carry no weights.
FoundTensors find_hf_tensors(const SafetensorsHeader& header, const std::vector<TensorPair>& pairs,
                             const std::string& file) {
  static const std::regex mask(R"(h\.[0-9]+\.attn\.(bias|masked_bias))");
  std::map<std::string, const TensorPair*> by_short_name;
  for (const TensorPair& pair : pairs) by_short_name[pair.hf.substr(std::strlen(kHfPrefix))] = &pair;
  FoundTensors found;
  for (const TensorInfo& tensor : header.tensors) {
    if (tensor.name == "lm_head.weight") {
      found.lm_head = &tensor;
      continue;
    }
    const bool prefixed = tensor.name.rfind(kHfPrefix, 0) == 0;
    const std::string short_name = prefixed ? tensor.name.substr(std::strlen(kHfPrefix)) : tensor.name;
    if (std::regex_match(short_name, mask)) continue;
    const auto pair = by_short_name.find(short_name);
    if (pair == by_short_name.end()) {
      throw FormatError(file + ": tensor " + tensor.name + " is not part of a GPT-2 of this config.json");
    }
    if (!found.by_name.emplace(pair->second->hf, &tensor).second) {
      throw FormatError(file + ": tensor " + short_name + " is stored twice (with and without 'transformer.')");
    }
  }
  for (const TensorPair& pair : pairs) {
    const auto it = found.by_name.find(pair.hf);
    if (it == found.by_name.end()) throw FormatError(file + ": tensor " + pair.hf + " is missing");
    if (it->second->shape != pair.hf_shape) {
      throw FormatError(file + ": tensor " + it->second->name + " has shape " + shape_text(it->second->shape) +
                        ", config.json gives " + shape_text(pair.hf_shape));
    }
  }
  return found;
}

// A tensor of the file as fp32 (Hugging Face files are often f16 or bf16).
at::Tensor read_as_float(const SafetensorsReader& reader, const TensorInfo& tensor) {
  at::ScalarType type = at::kFloat;
  switch (tensor.dtype) {
    case DType::f32: type = at::kFloat; break;
    case DType::f16: type = at::kHalf; break;
    case DType::bf16: type = at::kBFloat16; break;
    case DType::f64: type = at::kDouble; break;
    default:
      throw FormatError(reader.path().string() + ": tensor " + tensor.name + " is " + dtype_name(tensor.dtype) +
                        ", not a floating-point type");
  }
  at::Tensor data = at::empty(tensor.shape, at::TensorOptions().dtype(type));
  reader.read(tensor, data.data_ptr());
  return data.to(at::kFloat);
}

at::Tensor to_giant(const at::Tensor& hf, const TensorPair& pair) {
  switch (pair.conversion) {
    case Conversion::same: return hf.contiguous();
    case Conversion::transposed: return hf.t().contiguous();
    case Conversion::vocabulary_rows: {
      at::Tensor padded = at::zeros(pair.giant_shape, hf.options());
      padded.narrow(0, 0, hf.size(0)).copy_(hf);
      return padded;
    }
  }
  throw Error("unknown tensor conversion");
}

// The Giant tensors, in the order of `pairs`; the tied head checked.
std::vector<at::Tensor> read_giant_tensors(const SafetensorsReader& reader, const std::vector<TensorPair>& pairs) {
  const std::string file = reader.path().string();
  const FoundTensors found = find_hf_tensors(reader.header(), pairs, file);
  std::vector<at::Tensor> giant;
  for (const TensorPair& pair : pairs) {
    const TensorInfo& stored = *found.by_name.at(pair.hf);
    const at::Tensor hf = read_as_float(reader, stored);
    if (found.lm_head != nullptr && pair.conversion == Conversion::vocabulary_rows) {
      if (found.lm_head->shape != pair.hf_shape || !at::equal(read_as_float(reader, *found.lm_head), hf)) {
        throw FormatError(file + ": lm_head.weight differs from " + stored.name +
                          ": Giant's head is tied to the token embedding");
      }
    }
    giant.push_back(to_giant(hf, pair));
  }
  return giant;
}

bool has_hf_tokenizer(const fs::path& hf_dir) {
  return std::all_of(std::begin(kHfTokenizerFiles), std::end(kHfTokenizerFiles),
                     [&](const char* name) { return fs::exists(hf_dir / name); });
}

// data.tokenizer for the imported model: GPT-2's BPE files beside the
// weights (carried into the checkpoint), else bytes for a vocabulary they
// fit in.
std::string tokenizer_of(const fs::path& hf_dir, int64_t vocab) {
  const std::string gpt2 = "gpt2:" + without_trailing_separator(fs::absolute(hf_dir)).string();
  if (has_hf_tokenizer(hf_dir)) return gpt2;
  if (vocab <= 256) return "byte";
  GIANT_LOG(warn) << hf_dir.string() << " has no vocab.json and merges.txt: the checkpoint names tokenizer '"
                  << gpt2 << "', which needs them there (or give data.tokenizer when training on it)";
  return gpt2;
}

std::string piece_key(const std::string& name, const std::vector<int64_t>& offset) {
  std::string key = name + "@";
  for (size_t i = 0; i < offset.size(); ++i) key += (i ? "," : "") + std::to_string(offset[i]);
  return key;
}

// Writes the checkpoint's files into `folder`: one safetensors file holding
// every tensor whole, copies of the tokenizer files manifest.tokenizer_files
// names from `hf_dir`, and the manifest.
void write_imported_checkpoint(const fs::path& folder, const fs::path& hf_dir, Manifest manifest,
                               const std::vector<TensorPair>& pairs, const std::vector<at::Tensor>& giant) {
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::vector<int64_t> origin(pairs[i].giant_shape.size(), 0);
    const std::string key = piece_key(pairs[i].giant, origin);
    tensors.push_back({key, DType::f32, pairs[i].giant_shape, giant[i].data_ptr()});
    manifest.tensors.push_back({pairs[i].giant, DType::f32, pairs[i].giant_shape,
                                {Piece{kWeightsFile, key, origin, pairs[i].giant_shape}}});
  }
  const WrittenFile written = write_safetensors(folder / kWeightsFile, tensors);
  manifest.files.push_back({kWeightsFile, written.bytes, written.crc32c});
  for (const std::string& name : manifest.tokenizer_files) {
    const std::string bytes = read_text_file(hf_dir / name);
    write_synced(folder / name, bytes);
    manifest.files.push_back({name, bytes.size(), crc32c(bytes)});
  }
  std::sort(manifest.tensors.begin(), manifest.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  write_synced(folder / "manifest.json", manifest_to_json(manifest));
  sync_path(folder);
}

// OUT.tmp of an import that stopped midway holds only what an import
// writes; anything else there is not ours to remove.
void clear_leftover(const fs::path& temporary) {
  if (!fs::exists(temporary)) return;
  for (const auto& entry : fs::directory_iterator(temporary)) {
    const std::string name = entry.path().filename().string();
    const bool tokenizer = std::find(std::begin(kHfTokenizerFiles), std::end(kHfTokenizerFiles), name) !=
                           std::end(kHfTokenizerFiles);
    if (name != kWeightsFile && name != "manifest.json" && !tokenizer) {
      throw Error(temporary.string() + " exists and holds " + name + ": move it away to import here");
    }
  }
  fs::remove_all(temporary);
}

}  // namespace

void export_hf_gpt2(const fs::path& checkpoint, const fs::path& out) {
  const CheckpointLoader loader(resolve_checkpoint(checkpoint));
  const Manifest& manifest = loader.manifest();
  const std::vector<TensorPair> pairs = tensor_pairs(manifest.model);
  check_checkpoint_tensors(manifest, pairs, (loader.dir() / "manifest.json").string());
  const auto tokenizer = read_carried_tokenizer(loader.dir(), manifest);
  prepare_export_folder(out, manifest.tokenizer_files);
  write_export_weights(out, loader, pairs);
  for (const auto& [name, bytes] : tokenizer) {
    const fs::path temporary = out / temporary_name(name);
    write_synced(temporary, bytes);
    rename_path(temporary, out / name);
  }
  const fs::path config = out / temporary_name(kConfigFile);
  write_synced(config, hf_gpt2_config_json(manifest.model));
  rename_path(config, out / kConfigFile);
  sync_path(out);
}

void import_hf_gpt2(const fs::path& hf_dir, const fs::path& out) {
  const fs::path target = without_trailing_separator(out);
  if (fs::exists(target)) throw Error(target.string() + " exists: import writes a new checkpoint folder");
  const fs::path config_file = hf_dir / kConfigFile;
  Manifest manifest;
  manifest.model = parse_hf_gpt2_config(read_text_file(config_file), config_file.string());
  const std::vector<TensorPair> pairs = tensor_pairs(manifest.model);
  const std::vector<at::Tensor> giant = read_giant_tensors(SafetensorsReader(hf_dir / kWeightsFile), pairs);
  manifest.tokenizer = tokenizer_of(hf_dir, manifest.model.vocab);
  if (has_hf_tokenizer(hf_dir)) {
    manifest.tokenizer_files.assign(std::begin(kHfTokenizerFiles), std::end(kHfTokenizerFiles));
  }

  const fs::path temporary = target.string() + ".tmp";
  clear_leftover(temporary);
  std::error_code error;
  fs::create_directories(temporary, error);
  if (error) throw Error("cannot create " + temporary.string() + ": " + error.message());
  write_imported_checkpoint(temporary, hf_dir, std::move(manifest), pairs, giant);
  rename_path(temporary, target);
  sync_path(target.has_parent_path() ? target.parent_path() : fs::path("."));
}

}  // namespace giant::checkpoint
