// libgiant_sentencepiece.so: libsentencepiece behind a C interface
// (sentencepiece_module.h says why it is a module of its own).
#include "giant/data/sentencepiece_module.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

struct GiantSpm {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void set_error(char* error, size_t error_size, const std::string& text) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(text.size(), error_size - 1);
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

}  // namespace

extern "C" {

GiantSpm* giant_spm_load(const char* path, char* error, size_t error_size) {
  try {
    auto* model = new GiantSpm();
    const auto status = model->processor.Load(path);
    if (status.ok()) return model;
    set_error(error, error_size, status.ToString());
    delete model;
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
  }
  return nullptr;
}

void giant_spm_free(GiantSpm* model) { delete model; }
int giant_spm_piece_size(const GiantSpm* model) { return model->processor.GetPieceSize(); }
int giant_spm_eos_id(const GiantSpm* model) { return model->processor.eos_id(); }

int giant_spm_encode(const GiantSpm* model, const char* text, size_t size, int32_t** ids, size_t* count,
                     char* error, size_t error_size) {
  try {
    std::vector<int> pieces;
    const auto status = model->processor.Encode(absl::string_view(text, size), &pieces);
    if (!status.ok()) {
      set_error(error, error_size, status.ToString());
      return 1;
    }
    *count = pieces.size();
    *ids = static_cast<int32_t*>(std::malloc(std::max<size_t>(1, pieces.size()) * sizeof(int32_t)));
    if (*ids == nullptr) throw std::bad_alloc();
    std::copy(pieces.begin(), pieces.end(), *ids);
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
    return 1;
  }
}

int giant_spm_decode(const GiantSpm* model, const int32_t* ids, size_t count, char** text, size_t* size,
                     char* error, size_t error_size) {
  try {
    std::string decoded;
    const auto status = model->processor.Decode(std::vector<int>(ids, ids + count), &decoded);
    if (!status.ok()) {
      set_error(error, error_size, status.ToString());
      return 1;
    }
    *size = decoded.size();
    *text = static_cast<char*>(std::malloc(std::max<size_t>(1, decoded.size())));
    if (*text == nullptr) throw std::bad_alloc();
    std::memcpy(*text, decoded.data(), decoded.size());
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_size, e.what());
    return 1;
  }
}

void giant_spm_release(void* memory) { std::free(memory); }

}  // extern "C"
