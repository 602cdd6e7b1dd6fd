// Prefixes every line a rank writes with "[rank R] " and hands on whole
// lines only, so that the lines of different ranks never mix mid-line.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace giant::launch {

class LinePrefixer {
 public:
  // Receives one prefixed line at a time, ending in '\n'.
  using Sink = std::function<void(const std::string& line)>;

  // A line longer than max_line_bytes is handed on in pieces of that size,
  // each prefixed, so a rank that never writes '\n' cannot grow the buffer
  // without bound.
  LinePrefixer(std::string prefix, Sink sink, size_t max_line_bytes = 64 * 1024);

  void feed(const char* data, size_t size);
  // Hands on a partial last line, with '\n' added. Call at end of stream.
  void finish();

  static std::string rank_prefix(int rank) { return "[rank " + std::to_string(rank) + "] "; }

 private:
  void emit();

  std::string prefix_;
  Sink sink_;
  size_t max_line_bytes_;
  std::string pending_;      // the start of a line not yet ended
  bool just_split_ = false;  // the last line was handed on in pieces
};

// Writes all of text to fd, retrying partial writes and EINTR. A closed
// reader (EPIPE) or other error drops the text: the launcher keeps managing
// its ranks even when nobody reads their output.
void write_fully(int fd, const std::string& text);

}  // namespace giant::launch
