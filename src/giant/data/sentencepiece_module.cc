// libgiant_sentencepiece.so: libsentencepiece behind a C interface, loaded
// by sentencepiece_tokenizer.cc with dlopen(RTLD_LOCAL | RTLD_DEEPBIND).
//
// Why a module: Debian's libsentencepiece carries its own copy of protobuf
// and exports its symbols. Linked into a program that also has libtorch's
// libprotobuf, the two copies bind to each other's functions and the
// program crashes before main. Loaded locally and deep-bound, this module's
// libsentencepiece uses only its own protobuf, and libprotobuf never sees it.
// Only C types cross the boundary, and no exception: libsentencepiece
// throws from inside some corrupt models (its trie builder refuses an empty
// piece), which each entry turns into its error. What the module allocates,
// it frees.
#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

char* copy_of(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

// Runs `work`; an exception it throws becomes *error and `failed` is returned.
template <class Result, class Work>
Result guarded(char** error, Result failed, Work work) {
  try {
    return work();
  } catch (const std::exception& e) {
    *error = copy_of(std::string("libsentencepiece failed: ") + e.what());
  } catch (...) {
    *error = copy_of("libsentencepiece failed with an unknown exception");
  }
  return failed;
}

}  // namespace

extern "C" {

// A processor for the model at `path`, or null with *error set (free it with giant_spm_free).
void* giant_spm_load(const char* path, char** error) {
  return guarded<void*>(error, nullptr, [&]() -> void* {
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->Load(path);
    if (!status.ok()) {
      *error = copy_of(status.ToString());
      return nullptr;
    }
    return processor.release();
  });
}

void giant_spm_destroy(void* processor) { delete static_cast<sentencepiece::SentencePieceProcessor*>(processor); }

int giant_spm_piece_size(const void* processor) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize();
}

int giant_spm_eos_id(const void* processor) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->eos_id();
}

// The ids of text[0, length) in *ids (count returned), or -1 with *error set.
long giant_spm_encode(const void* processor, const char* text, size_t length, int** ids, char** error) {
  return guarded<long>(error, -1, [&]() -> long {
    std::vector<int> out;
    const auto status = static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->Encode(
        absl::string_view(text, length), &out);
    if (!status.ok()) {
      *error = copy_of(status.ToString());
      return -1;
    }
    *ids = static_cast<int*>(std::malloc(out.size() * sizeof(int) + 1));
    if (!out.empty()) std::memcpy(*ids, out.data(), out.size() * sizeof(int));
    return static_cast<long>(out.size());
  });
}

// The text of ids[0, count) in *text (length returned), or -1 with *error set.
long giant_spm_decode(const void* processor, const int* ids, size_t count, char** text, char** error) {
  return guarded<long>(error, -1, [&]() -> long {
    std::string out;
    const auto status = static_cast<const sentencepiece::SentencePieceProcessor*>(processor)->Decode(
        std::vector<int>(ids, ids + count), &out);
    if (!status.ok()) {
      *error = copy_of(status.ToString());
      return -1;
    }
    *text = copy_of(out);
    return static_cast<long>(out.size());
  });
}

void giant_spm_free(void* memory) { std::free(memory); }

}  // extern "C"
