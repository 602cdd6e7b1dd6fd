// The documents of giant data prepare's input files, streamed a chunk at a
// time (memory does not grow with the file). A file ending .jsonl or .json
// is JSON lines, one document per line, its text under a key; any other file
// is plain text, split into documents at empty lines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace giant::data {

enum class InputFormat { kText, kJsonLines };

// By the file's extension: .jsonl and .json are JSON lines, the rest text.
InputFormat input_format_for(const std::string& path);

// A document as the reader hands it out: for text, the document itself; for
// JSON lines, the raw line, whose text document_text() pulls out (so that
// several threads parse JSON while one reads).
struct Record {
  std::string bytes;
  int64_t line = 0;  // 1-based line of the file where it starts
};

class DocumentReader {
 public:
  // FormatError naming the file with the system's reason when it cannot be opened.
  DocumentReader(std::string path, InputFormat format);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // The next record; false at the end of the file. Text: the lines between
  // empty lines (a line of only "\n" or "\r\n"), each with its newline; the
  // empty lines are dropped. JSON lines: each line without its newline;
  // lines of only whitespace are skipped. FormatError on a read error.
  bool next(Record& record);
  // The bytes of the file consumed so far (for progress).
  uint64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }
  InputFormat format() const { return format_; }

 private:
  bool append_line(std::string& out);  // the next line, with its '\n' if it has one; false at the end
  bool fill();

  std::string path_;
  InputFormat format_;
  int fd_ = -1;
  std::unique_ptr<char[]> buffer_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes of buffer_
  bool at_end_ = false;
  uint64_t bytes_read_ = 0;
  int64_t line_ = 0;  // lines consumed
};

// The document's text: a text record's bytes (moved out, not copied); a
// JSON line's string under `json_key`. FormatError naming the file and line
// when the line is not a JSON object, has no `json_key`, or holds something
// other than a string there. Thread-safe.
std::string document_text(Record&& record, InputFormat format, const std::string& json_key,
                          const std::string& path);

}  // namespace giant::data
