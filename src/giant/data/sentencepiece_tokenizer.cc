#include "giant/data/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "giant/base/error.h"
#include "giant/data/sentencepiece_module.h"

#ifndef GIANT_SENTENCEPIECE_MODULE
#error "GIANT_SENTENCEPIECE_MODULE (the module's installed and build-tree paths) comes from src/giant/data/CMakeLists.txt"
#endif

namespace giant::data {

// The module's functions, resolved once per process (sentencepiece_module.h says why it is loaded apart).
struct SentencePieceTokenizer::Module {
  decltype(&giant_spm_load) load;
  decltype(&giant_spm_free) free;
  decltype(&giant_spm_piece_size) piece_size;
  decltype(&giant_spm_eos_id) eos_id;
  decltype(&giant_spm_encode) encode;
  decltype(&giant_spm_decode) decode;
  decltype(&giant_spm_release) release;
};

namespace {

template <class F>
void resolve(void* handle, const char* name, F& function) {
  function = reinterpret_cast<F>(::dlsym(handle, name));
  if (function == nullptr) throw Error(std::string("SentencePiece module lacks ") + name);
}

// The first of the ':'-separated candidates (installed, then build tree) that loads.
void* open_module() {
  std::string reasons;
  const std::string candidates = GIANT_SENTENCEPIECE_MODULE;
  for (size_t begin = 0; begin <= candidates.size();) {
    const size_t end = std::min(candidates.find(':', begin), candidates.size());
    const std::string path = candidates.substr(begin, end - begin);
    begin = end + 1;
    if (path.empty()) continue;
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND)) return handle;
    reasons += std::string("; ") + ::dlerror();
  }
  throw ConfigError("data.tokenizer", "SentencePiece support is not available (libgiant_sentencepiece.so" + reasons + ")");
}

}  // namespace

const SentencePieceTokenizer::Module& SentencePieceTokenizer::module() {
  static std::once_flag once;
  static Module functions;
  std::call_once(once, [] {
    void* handle = open_module();  // kept loaded for the process's life
    resolve(handle, "giant_spm_load", functions.load);
    resolve(handle, "giant_spm_free", functions.free);
    resolve(handle, "giant_spm_piece_size", functions.piece_size);
    resolve(handle, "giant_spm_eos_id", functions.eos_id);
    resolve(handle, "giant_spm_encode", functions.encode);
    resolve(handle, "giant_spm_decode", functions.decode);
    resolve(handle, "giant_spm_release", functions.release);
  });
  return functions;
}

SentencePieceTokenizer::SentencePieceTokenizer(std::string spec, const std::string& model_file)
    : spec_(std::move(spec)), module_(module()) {
  struct stat st {};
  if (::stat(model_file.c_str(), &st) != 0) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "' is not a file");
  }
  char error[512] = "";
  model_ = module_.load(model_file.c_str(), error, sizeof error);
  if (model_ == nullptr) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file +
                                            "' does not load (not a SentencePiece model?): " + error);
  }
  piece_size_ = module_.piece_size(model_);
}

SentencePieceTokenizer::~SentencePieceTokenizer() { module_.free(model_); }

int64_t SentencePieceTokenizer::vocab_size() const { return piece_size_; }

int32_t SentencePieceTokenizer::end_of_document() const {
  const int eos = module_.eos_id(model_);
  return eos >= 0 && eos < piece_size_ ? eos : -1;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  int32_t* ids = nullptr;
  size_t count = 0;
  char error[512] = "";
  GIANT_CHECK(module_.encode(model_, text.data(), text.size(), &ids, &count, error, sizeof error) == 0,
              "SentencePiece tokenizer '", spec_, "': cannot encode: ", error);
  std::vector<int32_t> tokens(ids, ids + count);
  module_.release(ids);
  return tokens;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    GIANT_CHECK(tokens[i] >= 0 && tokens[i] < piece_size_, "SentencePiece tokenizer '", spec_, "': token id ",
                tokens[i], " at position ", i, " is outside the vocabulary [0, ", piece_size_, ")");
  }
  char* text = nullptr;
  size_t size = 0;
  char error[512] = "";
  GIANT_CHECK(module_.decode(model_, tokens.data(), tokens.size(), &text, &size, error, sizeof error) == 0,
              "SentencePiece tokenizer '", spec_, "': cannot decode: ", error);
  std::string decoded(text, size);
  module_.release(text);
  return decoded;
}

}  // namespace giant::data
