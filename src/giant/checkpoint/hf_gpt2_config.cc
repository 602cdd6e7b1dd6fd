#include "giant/checkpoint/hf_gpt2_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "giant/checkpoint/safetensors.h"

namespace giant::checkpoint {
namespace {

using Json = nlohmann::json;  // keys sorted: the same text for the same model

// Transformers' names of the activations: "gelu_new" is GPT-2's tanh
// approximation ("gelu_pytorch_tanh" the same formula through torch's
// kernel), "gelu" the erf form.
constexpr const char* kGeluTanhName = "gelu_new";
constexpr const char* kGeluName = "gelu";

// GPT2Config's defaults for fields a config.json may leave out.
constexpr double kDefaultDropout = 0.1;
constexpr double kDefaultInitializerRange = 0.02;

// The Giant models import with: vocabulary padded as a default run pads it.
constexpr int64_t kImportVocabPad = 128;

class ConfigReader {
 public:
  ConfigReader(const Json& json, std::string file) : json_(json), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw FormatError(file_ + ": field '" + field + "': " + what);
  }
  bool has(const std::string& field) const { return json_.contains(field) && !json_.at(field).is_null(); }

  int64_t positive_integer(const std::string& field) const {
    if (!json_.contains(field)) fail(field, "missing");
    const Json& value = json_.at(field);
    if (!value.is_number_integer()) fail(field, "must be an integer, got " + value.dump());
    const auto n = value.get<int64_t>();
    if (n <= 0) fail(field, "must be positive, got " + value.dump());
    return n;
  }
  double number(const std::string& field, double fallback) const {
    if (!has(field)) return fallback;
    const Json& value = json_.at(field);
    if (!value.is_number()) fail(field, "must be a number, got " + value.dump());
    return value.get<double>();
  }
  std::string string(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    const Json& value = json_.at(field);
    if (!value.is_string()) fail(field, "must be a string, got " + value.dump());
    return value.get<std::string>();
  }
  // A boolean that Giant's GPT supports only at `required`.
  void require_flag(const std::string& field, bool required, const std::string& why) const {
    if (!has(field)) return;
    const Json& value = json_.at(field);
    if (!value.is_boolean()) fail(field, "must be true or false, got " + value.dump());
    if (value.get<bool>() != required) fail(field, value.dump() + " is not supported: " + why);
  }

 private:
  const Json& json_;
  std::string file_;
};

models::Activation activation_of(const ConfigReader& reader) {
  const std::string name = reader.string("activation_function", kGeluTanhName);
  if (name == kGeluTanhName || name == "gelu_pytorch_tanh") return models::Activation::gelu_tanh;
  if (name == kGeluName) return models::Activation::gelu;
  reader.fail("activation_function", "'" + name + "' is not supported (gelu_new, gelu_pytorch_tanh or gelu)");
}

// Giant's GPT has one dropout probability for embeddings, attention
// weights and residual branches.
double dropout_of(const ConfigReader& reader) {
  const double p = reader.number("resid_pdrop", kDefaultDropout);
  if (!(p >= 0.0 && p < 1.0)) reader.fail("resid_pdrop", "must be in [0, 1), got " + std::to_string(p));
  for (const char* other : {"embd_pdrop", "attn_pdrop"}) {
    const double q = reader.number(other, kDefaultDropout);
    if (q != p) {
      reader.fail(other, std::to_string(q) + " differs from resid_pdrop = " + std::to_string(p) +
                             " (Giant's model.dropout is one probability for all three)");
    }
  }
  return p;
}

// Fields whose other values change what the model computes.
void check_supported(const ConfigReader& reader) {
  const double epsilon = reader.number("layer_norm_epsilon", models::kLayerNormEpsilon);
  if (std::abs(epsilon - models::kLayerNormEpsilon) > 1e-6 * models::kLayerNormEpsilon) {
    reader.fail("layer_norm_epsilon", std::to_string(epsilon) + " is not supported: Giant's LayerNorm uses 1e-05");
  }
  reader.require_flag("tie_word_embeddings", true, "Giant's head is tied to the token embedding");
  reader.require_flag("scale_attn_weights", true, "Giant scales attention scores by 1/sqrt(head size)");
  reader.require_flag("scale_attn_by_inverse_layer_idx", false, "Giant does not scale scores by the layer");
  reader.require_flag("add_cross_attention", false, "Giant's GPT is a decoder only");
}

}  // namespace

std::string hf_gpt2_config_json(const models::GptConfig& model) {
  Json json;
  json["model_type"] = "gpt2";
  json["architectures"] = Json::array({"GPT2LMHeadModel"});
  json["vocab_size"] = model.vocab;
  json["n_positions"] = model.seq_len;
  json["n_ctx"] = model.seq_len;
  json["n_embd"] = model.hidden;
  json["n_layer"] = model.layers;
  json["n_head"] = model.heads;
  // null means 4 x n_embd to transformers, as 0 does to Giant.
  json["n_inner"] = model.ffn > 0 ? Json(model.ffn) : Json(nullptr);
  json["activation_function"] = model.activation == models::Activation::gelu_tanh ? kGeluTanhName : kGeluName;
  json["layer_norm_epsilon"] = models::kLayerNormEpsilon;
  json["resid_pdrop"] = model.dropout;
  json["embd_pdrop"] = model.dropout;
  json["attn_pdrop"] = model.dropout;
  json["initializer_range"] = model.init_std;
  json["tie_word_embeddings"] = true;
  json["torch_dtype"] = "float32";
  // Only GPT-2's own vocabulary has a known end-of-text token (its last
  // id). Other vocabularies (Giant's byte tokenizer has none) leave them
  // out: GPT2Config's default then names 50256, which only generation
  // with transformers reads, never the forward.
  if (model.vocab == kGpt2VocabSize) {
    json["bos_token_id"] = kGpt2VocabSize - 1;
    json["eos_token_id"] = kGpt2VocabSize - 1;
  }
  return json.dump(2) + "\n";
}

models::GptConfig parse_hf_gpt2_config(std::string_view text, const std::string& file) {
  Json json;
  try {
    json = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    throw FormatError(file + ": not valid JSON (" + e.what() + ")");
  }
  if (!json.is_object()) throw FormatError(file + ": not a JSON object");
  const ConfigReader reader(json, file);
  if (!json.contains("model_type")) reader.fail("model_type", "missing (a GPT-2 config has \"gpt2\")");
  const std::string type = reader.string("model_type", "");
  if (type != "gpt2") reader.fail("model_type", "'" + type + "' is not gpt2");

  models::GptConfig model;
  model.vocab = reader.positive_integer("vocab_size");
  model.vocab_pad = kImportVocabPad;
  model.seq_len = reader.positive_integer("n_positions");
  model.hidden = reader.positive_integer("n_embd");
  model.layers = reader.positive_integer("n_layer");
  model.heads = reader.positive_integer("n_head");
  if (model.hidden % model.heads != 0) {
    reader.fail("n_head", std::to_string(model.heads) + " does not divide n_embd = " + std::to_string(model.hidden));
  }
  model.ffn = reader.has("n_inner") ? reader.positive_integer("n_inner") : 0;
  model.activation = activation_of(reader);
  model.dropout = dropout_of(reader);
  model.init_std = reader.number("initializer_range", kDefaultInitializerRange);
  if (!(model.init_std > 0.0)) reader.fail("initializer_range", "must be positive");
  check_supported(reader);
  try {
    model.validate();
  } catch (const Error& e) {
    throw FormatError(file + ": " + e.what());  // a check above should have named the field
  }
  return model;
}

}  // namespace giant::checkpoint
