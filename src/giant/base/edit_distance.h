// How far apart two names are, and which known name a mistyped one meant:
// the "did you mean train.lr?" of unknown keys, flags and variables.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace giant {

// Edits (insert, delete, substitute a character, or swap two adjacent ones)
// that turn a into b: "train.rl" is 1 from "train.lr".
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to name, or "" when none is near enough to be what
// was meant (at most a third of name's length away, and at least 1 edit
// allowed). Ties go to the first candidate.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

// " (did you mean NEAREST?)", or "" when nothing is near.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace giant
