// Hugging Face transformers' GPT-2 format (GPT2LMHeadModel): config.json
// and model.safetensors with its names and layout (Conv1D weights stored
// [in, out], the head tied to wte and not stored, no vocabulary padding).
#pragma once

#include <filesystem>

namespace giant::checkpoint {

// Writes `out`/config.json and `out`/model.safetensors from a Giant
// checkpoint's fp32 weights (any layout saved it), with the tokenizer files
// the checkpoint carries (vocab.json and merges.txt for GPT-2's BPE).
// FormatError for a bad checkpoint (a tokenizer copy that no longer matches
// its checksum too); giant::Error when `out` cannot be written.
void export_hf_gpt2(const std::filesystem::path& checkpoint, const std::filesystem::path& out);

// Turns a Hugging Face GPT-2 folder (config.json + model.safetensors) into
// a Giant checkpoint folder `out` (weights only, step 0: training from it
// starts a fresh optimizer), carrying the folder's vocab.json and
// merges.txt when it has both. FormatError naming the file and the field.
void import_hf_gpt2(const std::filesystem::path& hf_dir, const std::filesystem::path& out);

}  // namespace giant::checkpoint
