#include "giant/data/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "giant/base/error.h"

namespace giant::data {
namespace {

// The module's C interface (sentencepiece_module.cc).
struct SentencePieceModule {
  void* (*load)(const char*, char**);
  void (*destroy)(void*);
  int (*piece_size)(const void*);
  int (*eos_id)(const void*);
  long (*encode)(const void*, const char*, size_t, int**, char**);
  long (*decode)(const void*, const int*, size_t, char**, char**);
  void (*free)(void*);
  std::string error;  // why it could not be loaded; empty when it was
};

std::string program_folder() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

template <class Function>
void find(void* library, const char* name, Function* function, std::string* error) {
  *function = reinterpret_cast<Function>(::dlsym(library, name));
  if (*function == nullptr && error->empty()) *error = std::string("it has no ") + name;
}

// Local and deep-bound: its libsentencepiece keeps to its own protobuf.
// AddressSanitizer refuses deep binding; its builds bind locally only,
// enough where no libtorch (and its protobuf) is in the program, as in the
// sanitized builds CI makes.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kModuleFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kModuleFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

SentencePieceModule open_module() {
  SentencePieceModule m{};
  const std::string candidates[] = {program_folder() + "/" GIANT_SENTENCEPIECE_MODULE_FROM_PROGRAM,
                                    GIANT_SENTENCEPIECE_MODULE_IN_BUILD};
  void* library = nullptr;
  std::string tried;
  for (const std::string& path : candidates) {
    library = ::dlopen(path.c_str(), kModuleFlags);
    if (library != nullptr) break;
    tried += (tried.empty() ? "" : "; ") + std::string(::dlerror());
  }
  if (library == nullptr) {
    m.error = "Giant's SentencePiece module cannot be loaded (" + tried + ")";
    return m;
  }
  find(library, "giant_spm_load", &m.load, &m.error);
  find(library, "giant_spm_destroy", &m.destroy, &m.error);
  find(library, "giant_spm_piece_size", &m.piece_size, &m.error);
  find(library, "giant_spm_eos_id", &m.eos_id, &m.error);
  find(library, "giant_spm_encode", &m.encode, &m.error);
  find(library, "giant_spm_decode", &m.decode, &m.error);
  find(library, "giant_spm_free", &m.free, &m.error);
  return m;  // the library stays loaded for the process's life
}

const SentencePieceModule& module() {
  static const SentencePieceModule m = open_module();  // loaded once, read-only after
  return m;
}

// Takes a message the module allocated.
std::string take(char* message) {
  std::string text = message != nullptr ? message : "(no message)";
  module().free(message);
  return text;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string spec, const std::string& model_file)
    : spec_(std::move(spec)), processor_(nullptr) {
  struct stat st {};
  if (::stat(model_file.c_str(), &st) != 0) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "' is not a file");
  }
  const SentencePieceModule& m = module();
  if (!m.error.empty()) throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "': " + m.error);
  char* error = nullptr;
  processor_ = m.load(model_file.c_str(), &error);
  if (processor_ == nullptr) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file +
                                            "' does not load (not a SentencePiece model?): " + take(error));
  }
  vocab_size_ = m.piece_size(processor_);
  const int eos = m.eos_id(processor_);
  end_of_document_ = eos >= 0 && eos < vocab_size_ ? eos : -1;
}

SentencePieceTokenizer::~SentencePieceTokenizer() { module().destroy(processor_); }

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  int* ids = nullptr;
  char* error = nullptr;
  const long count = module().encode(processor_, text.data(), text.size(), &ids, &error);
  GIANT_CHECK(count >= 0, "SentencePiece tokenizer '", spec_, "': cannot encode: ", take(error));
  std::vector<int32_t> out(ids, ids + count);
  module().free(ids);
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    GIANT_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size_, "SentencePiece tokenizer '", spec_, "': token id ",
                tokens[i], " at position ", i, " is outside the vocabulary [0, ", vocab_size_, ")");
  }
  const std::vector<int> ids(tokens.begin(), tokens.end());
  char* text = nullptr;
  char* error = nullptr;
  const long length = module().decode(processor_, ids.data(), ids.size(), &text, &error);
  GIANT_CHECK(length >= 0, "SentencePiece tokenizer '", spec_, "': cannot decode: ", take(error));
  std::string out(text, static_cast<size_t>(length));
  module().free(text);
  return out;
}

}  // namespace giant::data
