#include "giant/launch/rank_output.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>

namespace giant::launch {

LinePrefixer::LinePrefixer(std::string prefix, Sink sink, size_t max_line_bytes)
    : prefix_(std::move(prefix)), sink_(std::move(sink)), max_line_bytes_(std::max<size_t>(1, max_line_bytes)) {}

void LinePrefixer::feed(const char* data, size_t size) {
  const char* end = data + size;
  while (data < end) {
    if (just_split_ && pending_.empty() && *data == '\n') {
      ++data;  // the end of a line already handed on in pieces
      just_split_ = false;
      continue;
    }
    just_split_ = false;
    // pending_ stays below max_line_bytes_ between calls.
    size_t room = max_line_bytes_ - pending_.size();
    const char* limit = data + std::min<size_t>(room, static_cast<size_t>(end - data));
    const char* newline = std::find(data, limit, '\n');
    if (newline != limit) {
      pending_.append(data, newline + 1);
      data = newline + 1;
      emit();
      continue;
    }
    pending_.append(data, limit);
    data = limit;
    if (pending_.size() == max_line_bytes_) {
      emit();
      just_split_ = true;
    }
  }
}

void LinePrefixer::finish() {
  if (!pending_.empty()) emit();
  just_split_ = false;
}

// Hands on pending_ as one line.
void LinePrefixer::emit() {
  std::string line;
  // Ranks that already prefix their own lines (GIANT_LOG after bootstrap
  // writes "[rank R] ") are not prefixed twice.
  bool already_prefixed = pending_.compare(0, prefix_.size(), prefix_) == 0;
  line.reserve(prefix_.size() + pending_.size() + 1);
  if (!already_prefixed) line += prefix_;
  line += pending_;
  if (line.back() != '\n') line += '\n';
  pending_.clear();
  sink_(line);
}

void write_fully(int fd, const std::string& text) {
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace giant::launch
