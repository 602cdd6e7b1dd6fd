// The C interface of libgiant_sentencepiece.so, the one place libsentencepiece
// is linked. Debian's libsentencepiece carries its own protobuf-lite 3.14 and
// exports its symbols; in a process that also loads libprotobuf 3.21 (every
// libtorch process) the two interpose each other and libprotobuf's start-up
// crashes. So the module is loaded only when a SentencePiece tokenizer is
// made, with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): its protobuf stays its own.
// Errors come back as text in the caller's buffer; memory the module
// allocates goes back through giant_spm_release.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct GiantSpm;

// Null on failure, with the reason in error.
GiantSpm* giant_spm_load(const char* path, char* error, size_t error_size);
void giant_spm_free(GiantSpm* model);
int giant_spm_piece_size(const GiantSpm* model);
int giant_spm_eos_id(const GiantSpm* model);
// 0 on success: *ids (count of them) to be released; else the reason in error.
int giant_spm_encode(const GiantSpm* model, const char* text, size_t size, int32_t** ids, size_t* count,
                     char* error, size_t error_size);
// 0 on success: *text (size bytes) to be released; else the reason in error.
int giant_spm_decode(const GiantSpm* model, const int32_t* ids, size_t count, char** text, size_t* size,
                     char* error, size_t error_size);
void giant_spm_release(void* memory);

}  // extern "C"
