// Hugging Face GPT-2's config.json (GPT2Config) for a Giant model config,
// and back. Only fields Giant's GPT has a meaning for are written; on
// reading, absent optional fields take GPT2Config's defaults and any field
// that would change the computation in a way Giant's GPT cannot follow is
// an error. No libtorch here.
#pragma once

#include <string>
#include <string_view>

#include "giant/models/gpt_config.h"

namespace giant::checkpoint {

// The vocabulary of OpenAI's GPT-2 tokenizer, whose last id is
// <|endoftext|>: the only vocabulary config.json names bos/eos ids for.
constexpr int64_t kGpt2VocabSize = 50257;

// config.json's text (keys sorted, indented, a final newline): the same
// bytes for the same model.
std::string hf_gpt2_config_json(const models::GptConfig& model);

// The Giant model config a config.json describes (vocab_pad 128; model.ffn
// 0 when n_inner is null, as both mean 4 x hidden). FormatError naming
// `file` and the field when a field is missing, of the wrong type or out
// of range, or asks for what Giant's GPT does not compute.
models::GptConfig parse_hf_gpt2_config(std::string_view json, const std::string& file);

}  // namespace giant::checkpoint
