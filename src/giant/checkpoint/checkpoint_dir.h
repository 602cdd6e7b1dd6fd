// A checkpoint.dir (or checkpoint.local_dir, the same layout): committed checkpoints in folders step_XXXXXXXX (eight
// digits, more when the step needs them), each with its manifest.json; a
// text file `latest` holding the newest one's folder name and a newline;
// temporary folders ".tmp.step_XXXXXXXX" of saves in progress or aborted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace giant::checkpoint {

// "step_00001000" for 1000.
std::string step_folder_name(int64_t step);
// The step a folder name stands for (nullopt: not a step_ folder).
std::optional<int64_t> step_of_folder(const std::string& name);

// The folder `latest` names in root (nullopt when there is none, or it
// names no folder).
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& root);
// Every committed checkpoint folder in root (a step_ folder holding
// manifest.json), newest (highest step) first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& root);
// What a command given DIR means: DIR itself when it holds manifest.json,
// else the checkpoint DIR/latest names (FormatError naming DIR when neither).
std::filesystem::path resolve_checkpoint(const std::filesystem::path& dir);

// The local tier's folder when none is named: in /dev/shm (memory) where the
// system has it, else the temporary directory, named after the absolute
// checkpoint.dir `root`, so that two runs' copies never meet.
std::filesystem::path default_local_root(const std::filesystem::path& root);
// Removes what savers wrote in root (checkpoint folders, temporary ones,
// `latest`) and root itself once that leaves it empty; anything else stays.
void remove_checkpoints(const std::filesystem::path& root);

}  // namespace giant::checkpoint
