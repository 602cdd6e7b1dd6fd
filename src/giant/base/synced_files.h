// Durable writes (checkpoints, datasets): a file's or folder's contents forced to
// disk, and a small file written and forced there. giant::Error naming the
// path and the system's reason (disk full, ...). No libtorch.
#pragma once

#include <filesystem>
#include <string>

namespace giant {

// fsync of a file or a folder (a folder's entries: a rename in it).
void sync_path(const std::filesystem::path& path);
// Creates or replaces `path` with `text`, then fsyncs it.
void write_synced(const std::filesystem::path& path, const std::string& text);

}  // namespace giant
