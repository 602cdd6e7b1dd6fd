// A checkpoint's tokenizer travels with it: the files the run's tokenizer
// reads are copied into every checkpoint it saves (and listed, with their
// checksums, in the manifest), and a checkpoint's tokenizer is read from
// those copies, so a checkpoint works from any folder and after the
// original files are moved or deleted. Checkpoints from before carry none:
// their tokenizer is read where data.tokenizer named it, as it always was.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/saver.h"
#include "giant/data/tokenizer.h"

namespace giant::train {

// The files data.tokenizer `spec` reads, with their contents, under the
// names the checkpoint gives them (none for byte). ConfigError naming
// data.tokenizer when one cannot be read.
std::vector<checkpoint::CarriedFile> carried_tokenizer_files(const std::string& spec);

// The spec of the tokenizer of the checkpoint in `checkpoint_dir`: its own
// copies when it carries them, else the manifest's data.tokenizer.
std::string checkpoint_tokenizer_spec(const std::filesystem::path& checkpoint_dir, const checkpoint::Manifest& manifest);

}  // namespace giant::train
