#include "giant/checkpoint/manifest.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "giant/layout/layout.h"

namespace giant::checkpoint {
namespace {

using Json = nlohmann::json;


// Typed reads of a JSON object's fields, each error naming the field.
class Fields {
 public:
  Fields(const Json& object, std::string file, std::string where)
      : object_(object), file_(std::move(file)), where_(std::move(where)) {
    if (!object_.is_object()) fail_in_file(file_, where_ + " must be an object");
  }
  const Json& at(const std::string& key) const {
    const auto found = object_.find(key);
    if (found == object_.end()) fail_in_file(file_, name(key) + " is missing");
    return *found;
  }
  int64_t integer(const std::string& key, int64_t min = 0, int64_t max = std::numeric_limits<int64_t>::max()) const {
    const Json& v = at(key);
    if (!v.is_number_integer()) fail_in_file(file_, name(key) + " must be an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
      fail_in_file(file_, name(key) + " is out of range: " + v.dump());
    }
    const auto value = v.get<int64_t>();
    if (value < min || value > max) fail_in_file(file_, name(key) + " is out of range: " + v.dump());
    return value;
  }
  double real(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_number()) fail_in_file(file_, name(key) + " must be a number, got " + v.dump());
    return v.get<double>();
  }
  bool boolean(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_boolean()) fail_in_file(file_, name(key) + " must be true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string text(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_string()) fail_in_file(file_, name(key) + " must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  const Json& array(const std::string& key) const {
    const Json& v = at(key);
    if (!v.is_array()) fail_in_file(file_, name(key) + " must be an array");
    return v;
  }
  std::vector<int64_t> sizes(const std::string& key) const {
    const Json& v = array(key);
    if (v.size() > 64) fail_in_file(file_, name(key) + " has more than 64 dimensions");
    std::vector<int64_t> out;
    for (const Json& d : v) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 ||
          (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
        fail_in_file(file_, name(key) + " must hold non-negative integers, got " + v.dump());
      }
      out.push_back(d.get<int64_t>());
    }
    return out;
  }
  const std::string& file() const { return file_; }
  std::string name(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }

 private:
  const Json& object_;
  std::string file_, where_;
};

Json model_json(const models::GptConfig& m) {
  return {{"layers", m.layers},   {"hidden", m.hidden},     {"heads", m.heads},
          {"ffn", m.ffn},         {"seq_len", m.seq_len},   {"vocab", m.vocab},
          {"vocab_pad", m.vocab_pad}, {"dropout", m.dropout}, {"init_std", m.init_std},
          {"activation", models::activation_name(m.activation)}};
}

models::GptConfig model_from(const Fields& f) {
  models::GptConfig m;
  m.layers = f.integer("layers", 1, 1 << 20);
  m.hidden = f.integer("hidden", 1, 1 << 24);
  m.heads = f.integer("heads", 1, 1 << 20);
  m.ffn = f.integer("ffn", 0, 1 << 26);
  m.seq_len = f.integer("seq_len", 1, 1 << 26);
  m.vocab = f.integer("vocab", 1, 1 << 28);
  m.vocab_pad = f.integer("vocab_pad", 1, 1 << 20);
  m.dropout = f.real("dropout");
  m.init_std = f.real("init_std");
  const std::string activation = f.text("activation");
  if (activation == "gelu") {
    m.activation = models::Activation::gelu;
  } else if (activation == "gelu_tanh") {
    m.activation = models::Activation::gelu_tanh;
  } else {
    fail_in_file(f.file(), f.name("activation") + " must be gelu or gelu_tanh, got '" + activation + "'");
  }
  try {
    m.validate();
  } catch (const ConfigError& e) {
    fail_in_file(f.file(), std::string("the model is invalid: ") + e.what());
  }
  return m;
}

Json layout_json(const SavedLayout& l) {
  return {{"dp", l.dp},
          {"tp", l.tp},
          {"pp", l.pp},
          {"virtual_stages", l.virtual_stages},
          {"zero", l.zero},
          {"schedule", l.schedule},
          {"partition", l.partition},
          {"precision", l.precision},
          {"grad_dtype", l.grad_dtype},
          {"world_size", l.world_size}};
}

SavedLayout layout_from(const Fields& f) {
  SavedLayout l;
  l.dp = f.integer("dp", 1, 1 << 24);
  l.tp = f.integer("tp", 1, 1 << 24);
  l.pp = f.integer("pp", 1, 1 << 24);
  l.virtual_stages = f.integer("virtual_stages", 1, 1 << 16);
  l.zero = f.integer("zero", 0, kMaxZeroStage);
  l.schedule = f.text("schedule");
  l.partition = f.text("partition");
  l.precision = f.text("precision");
  l.grad_dtype = f.text("grad_dtype");
  l.world_size = f.integer("world_size", 1, 1 << 24);
  return l;
}

Json train_json(const TrainState& t) {
  return {{"optimizer_steps", t.optimizer_steps},
          {"loss_scaling", t.loss_scaling},
          {"loss_scale", t.loss_scale},
          {"loss_scale_good_steps", t.loss_scale_good_steps},
          {"loss_scale_hysteresis_left", t.loss_scale_hysteresis_left},
          {"loss_scale_overflows", t.loss_scale_overflows},
          {"bad_steps_in_a_row", t.bad_steps_in_a_row},
          {"skipped_steps", t.skipped_steps},
          {"loss_scale_skips", t.loss_scale_skips}};
}

TrainState train_from(const Fields& f) {
  TrainState t;
  t.optimizer_steps = f.integer("optimizer_steps");
  t.loss_scaling = f.boolean("loss_scaling");
  t.loss_scale = f.real("loss_scale");
  t.loss_scale_good_steps = f.integer("loss_scale_good_steps");
  t.loss_scale_hysteresis_left = f.integer("loss_scale_hysteresis_left");
  t.loss_scale_overflows = f.integer("loss_scale_overflows");
  t.bad_steps_in_a_row = f.integer("bad_steps_in_a_row");
  t.skipped_steps = f.integer("skipped_steps");
  t.loss_scale_skips = f.integer("loss_scale_skips");
  return t;
}

// Each value is JSON text: stored as the value it spells (a string when it
// is not JSON, which only a caller's mistake makes).
Json run_keys_json(const std::map<std::string, std::string>& keys) {
  Json out = Json::object();
  for (const auto& [key, text] : keys) {
    Json value = Json::parse(text, nullptr, false);
    out[key] = value.is_discarded() ? Json(text) : std::move(value);
  }
  return out;
}

std::map<std::string, std::string> run_keys_from(const Fields& f, const Json& object) {
  std::map<std::string, std::string> keys;
  for (const auto& item : object.items()) {
    if (item.value().is_object()) fail_in_file(f.file(), f.name(item.key()) + " must be a key's value, got an object");
    keys[item.key()] = item.value().dump();
  }
  return keys;
}

Json tensors_json(const std::vector<TensorEntry>& tensors) {
  Json out = Json::array();
  for (const auto& t : tensors) {
    Json pieces = Json::array();
    for (const auto& p : t.pieces) pieces.push_back({{"file", p.file}, {"key", p.key}, {"offset", p.offset}, {"shape", p.shape}});
    out.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"pieces", pieces}});
  }
  return out;
}

Json files_json(const std::vector<FileEntry>& files) {
  Json out = Json::array();
  for (const auto& f : files) out.push_back({{"name", f.name}, {"bytes", f.bytes}, {"crc32c", f.crc32c}});
  return out;
}

// A file name a manifest may point at: plain, inside the checkpoint folder.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.size() < 256 && name.find('/') == std::string::npos && name != "." && name != ".." &&
         name.find('\0') == std::string::npos;
}

std::vector<FileEntry> files_from(const Fields& root) {
  std::vector<FileEntry> files;
  for (const Json& item : root.array("files")) {
    const Fields f(item, root.file(), "files[" + std::to_string(files.size()) + "]");
    FileEntry e;
    e.name = f.text("name");
    if (!plain_file_name(e.name)) fail_in_file(root.file(), f.name("name") + " '" + e.name + "' is not a plain file name");
    e.bytes = static_cast<uint64_t>(f.integer("bytes"));
    e.crc32c = static_cast<uint32_t>(f.integer("crc32c", 0, 0xFFFFFFFFll));
    files.push_back(e);
  }
  return files;
}

// The optional list of tokenizer files: plain names, each once.
std::vector<std::string> tokenizer_files_from(const Json& root, const std::string& file) {
  const auto found = root.find("tokenizer_files");
  if (found == root.end()) return {};  // written before checkpoints carried them
  if (!found->is_array()) fail_in_file(file, "tokenizer_files must be an array");
  std::vector<std::string> names;
  for (const Json& item : *found) {
    if (!item.is_string() || !plain_file_name(item.get<std::string>())) {
      fail_in_file(file, "tokenizer_files[" + std::to_string(names.size()) + "] " + item.dump() + " is not a plain file name");
    }
    names.push_back(item.get<std::string>());
  }
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) fail_in_file(file, "tokenizer_files lists a file twice");
  return names;
}

std::vector<TensorEntry> tensors_from(const Fields& root) {
  std::vector<TensorEntry> tensors;
  for (const Json& item : root.array("tensors")) {
    const Fields f(item, root.file(), "tensors[" + std::to_string(tensors.size()) + "]");
    TensorEntry t;
    t.name = f.text("name");
    const std::string dtype = f.text("dtype");
    const auto parsed = parse_dtype(dtype);
    if (!parsed) fail_in_file(root.file(), f.name("dtype") + " '" + dtype + "' is unknown");
    t.dtype = *parsed;
    t.shape = f.sizes("shape");
    for (const Json& piece_json : f.array("pieces")) {
      const Fields p(piece_json, root.file(), "tensor '" + t.name + "' piece " + std::to_string(t.pieces.size()));
      Piece piece{p.text("file"), p.text("key"), p.sizes("offset"), p.sizes("shape")};
      if (!plain_file_name(piece.file)) fail_in_file(root.file(), p.name("file") + " '" + piece.file + "' is not a plain file name");
      t.pieces.push_back(std::move(piece));
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Each piece inside its tensor, and the pieces tiling it: no overlap, no gap.
void check_pieces_tile(const TensorEntry& t, const std::string& file) {
  long double total = 1;
  for (int64_t d : t.shape) total *= static_cast<long double>(d);
  long double covered = 0;
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    const Piece& p = t.pieces[i];
    const std::string where = "tensor '" + t.name + "' piece " + std::to_string(i) + " (" + p.key + ")";
    if (p.offset.size() != t.shape.size() || p.shape.size() != t.shape.size()) {
      fail_in_file(file, where + " has another number of dimensions than the tensor");
    }
    long double volume = 1;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (p.offset[k] > t.shape[k] || p.shape[k] > t.shape[k] - p.offset[k]) {
        fail_in_file(file, where + " reaches outside the tensor along dimension " + std::to_string(k));
      }
      volume *= static_cast<long double>(p.shape[k]);
    }
    covered += volume;
    for (size_t j = 0; j < i; ++j) {
      const Piece& q = t.pieces[j];
      bool meet = volume > 0;
      for (size_t k = 0; k < t.shape.size() && meet; ++k) {
        meet = p.offset[k] < q.offset[k] + q.shape[k] && q.offset[k] < p.offset[k] + p.shape[k];
      }
      if (meet) fail_in_file(file, where + " overlaps piece " + std::to_string(j) + " (" + q.key + ")");
    }
  }
  if (covered != total) {
    fail_in_file(file, "tensor '" + t.name + "' is missing pieces: they cover " + std::to_string(static_cast<double>(covered)) +
                   " of its " + std::to_string(static_cast<double>(total)) + " elements");
  }
}

template <class T>
void sort_by_name(std::vector<T>& items) {
  std::sort(items.begin(), items.end(), [](const T& a, const T& b) { return a.name < b.name; });
}

Json parse_object(std::string_view json, const std::string& file) {
  Json root = Json::parse(json.begin(), json.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) fail_in_file(file, "is not a JSON object");
  return root;
}

}  // namespace

bool SavedLayout::operator==(const SavedLayout& o) const {
  return dp == o.dp && tp == o.tp && pp == o.pp && virtual_stages == o.virtual_stages && zero == o.zero &&
         schedule == o.schedule && partition == o.partition && precision == o.precision &&
         grad_dtype == o.grad_dtype && world_size == o.world_size;
}

const TensorEntry* Manifest::find(const std::string& name) const {
  const auto found = std::lower_bound(tensors.begin(), tensors.end(), name,
                                      [](const TensorEntry& t, const std::string& n) { return t.name < n; });
  return found != tensors.end() && found->name == name ? &*found : nullptr;
}

bool Manifest::has_optimizer_state() const {
  return std::any_of(tensors.begin(), tensors.end(), [](const TensorEntry& t) { return t.name.rfind("optim/", 0) == 0; });
}

std::string manifest_to_json(const Manifest& m) {
  std::vector<TensorEntry> tensors = m.tensors;
  std::vector<FileEntry> files = m.files;
  std::vector<std::string> tokenizer_files = m.tokenizer_files;
  sort_by_name(tensors);
  sort_by_name(files);
  std::sort(tokenizer_files.begin(), tokenizer_files.end());
  Json root = {{"format", "giant-checkpoint"},
               {"format_version", m.format_version},
               {"model", model_json(m.model)},
               {"tokenizer", m.tokenizer},
               {"tokenizer_files", tokenizer_files},
               {"step", m.step},
               {"consumed_samples", m.consumed_samples},
               {"layout", layout_json(m.layout)},
               {"train_state", train_json(m.train)},
               {"files", files_json(files)},
                     {"tensors", tensors_json(tensors)}};
  if (!m.run_keys.empty()) root["run_keys"] = run_keys_json(m.run_keys);
  return root.dump(1) + "\n";
}

Manifest manifest_from_json(std::string_view json, const std::string& file) {
  const Json root = parse_object(json, file);
  const Fields f(root, file, "");
  if (f.text("format") != "giant-checkpoint") fail_in_file(file, "is not a Giant checkpoint manifest (format is not giant-checkpoint)");
  Manifest m;
  m.format_version = static_cast<int>(f.integer("format_version", 0, 1 << 20));
  if (m.format_version != kFormatVersion) {
    fail_in_file(file, "format_version " + std::to_string(m.format_version) + " is not the version this Giant reads (" +
                   std::to_string(kFormatVersion) + ")");
  }
  m.model = model_from(Fields(f.at("model"), file, "model"));
  m.tokenizer = f.text("tokenizer");
  m.tokenizer_files = tokenizer_files_from(root, file);
  m.step = f.integer("step");
  m.consumed_samples = f.integer("consumed_samples");
  m.layout = layout_from(Fields(f.at("layout"), file, "layout"));
  m.train = train_from(Fields(f.at("train_state"), file, "train_state"));
  if (root.contains("run_keys")) {
    const Json& keys = root.at("run_keys");
    m.run_keys = run_keys_from(Fields(keys, file, "run_keys"), keys);
  }
  m.files = files_from(f);
  m.tensors = tensors_from(f);
  sort_by_name(m.files);
  sort_by_name(m.tensors);
  for (size_t i = 1; i < m.files.size(); ++i) {
    if (m.files[i].name == m.files[i - 1].name) fail_in_file(file, "file '" + m.files[i].name + "' is listed twice");
  }
  for (size_t i = 1; i < m.tensors.size(); ++i) {
    if (m.tensors[i].name == m.tensors[i - 1].name) fail_in_file(file, "tensor '" + m.tensors[i].name + "' is listed twice");
  }
  auto listed_in_files = [&](const std::string& name) {
    return std::any_of(m.files.begin(), m.files.end(), [&](const FileEntry& e) { return e.name == name; });
  };
  for (const auto& name : m.tokenizer_files) {
    if (!listed_in_files(name)) fail_in_file(file, "tokenizer file '" + name + "' is not among the manifest's files");
  }
  for (const auto& t : m.tensors) {
    for (const auto& p : t.pieces) {
      const bool listed = listed_in_files(p.file);
      if (!listed) fail_in_file(file, "tensor '" + t.name + "' has a piece in '" + p.file + "', which the manifest does not list");
    }
    check_pieces_tile(t, file);
  }
  return m;
}

std::string fragment_to_json(const ManifestFragment& fragment) {
  return Json{{"files", files_json(fragment.files)}, {"tensors", tensors_json(fragment.tensors)}}.dump() + "\n";
}

ManifestFragment fragment_from_json(std::string_view json, const std::string& file) {
  const Json root = parse_object(json, file);
  const Fields f(root, file, "");
  return {tensors_from(f), files_from(f)};
}

void merge_fragment(Manifest& manifest, ManifestFragment fragment) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < manifest.tensors.size(); ++i) index[manifest.tensors[i].name] = i;
  for (auto& t : fragment.tensors) {
    const auto found = index.find(t.name);
    if (found == index.end()) {
      index[t.name] = manifest.tensors.size();
      manifest.tensors.push_back(std::move(t));
      continue;
    }
    TensorEntry& into = manifest.tensors[found->second];
    if (into.shape != t.shape || into.dtype != t.dtype) {
      throw FormatError("tensor '" + t.name + "' was saved with two shapes or dtypes by different ranks");
    }
    for (auto& p : t.pieces) into.pieces.push_back(std::move(p));
  }
  for (auto& f : fragment.files) manifest.files.push_back(std::move(f));
  sort_by_name(manifest.tensors);
  sort_by_name(manifest.files);
}

Manifest read_manifest(const std::filesystem::path& checkpoint_dir) {
  const std::filesystem::path path = checkpoint_dir / "manifest.json";
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_in_file(file, "cannot be read (is '" + checkpoint_dir.string() + "' a checkpoint?)");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(std::max<std::streamoff>(in.tellg(), 0));
  if (size > (uint64_t{256} << 20)) fail_in_file(file, "is " + std::to_string(size) + " bytes, more than a manifest can be");
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in) fail_in_file(file, "cannot be read");
  return manifest_from_json(text, file);
}

std::vector<std::string> model_differences(const models::GptConfig& saved, const models::GptConfig& run) {
  Json a = model_json(saved), b = model_json(run);
  // Not what the weights mean: dropout and the initialisation's spread.
  for (const char* key : {"dropout", "init_std"}) {
    a.erase(key);
    b.erase(key);
  }
  // ffn = 0 means 4 x hidden: compared by the width it stands for.
  a["ffn"] = saved.ffn_size();
  b["ffn"] = run.ffn_size();
  std::vector<std::string> lines;
  for (const auto& item : a.items()) {
    if (item.value() != b[item.key()]) {
      lines.push_back("model." + item.key() + ": " + item.value().dump() + " in the checkpoint, " +
                      b[item.key()].dump() + " in this run");
    }
  }
  return lines;
}

}  // namespace giant::checkpoint
