#include "giant/data/document_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "giant/base/error.h"

namespace giant::data {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

// "an array", "a string", "null": a JSON value's type for a message.
std::string type_with_article(const nlohmann::json& value) {
  const std::string type = value.type_name();
  if (type == "null") return type;
  return (type == "array" || type == "object" ? "an " : "a ") + type;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

InputFormat input_format_for(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  return extension == ".jsonl" || extension == ".json" ? InputFormat::kJsonLines : InputFormat::kText;
}

DocumentReader::DocumentReader(std::string path, InputFormat format)
    : path_(std::move(path)), format_(format), buffer_(new char[kChunkBytes]) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw FormatError(path_ + ": cannot open: " + std::strerror(errno));
  if (std::filesystem::is_directory(path_)) {
    ::close(fd_);
    fd_ = -1;
    throw FormatError(path_ + ": is a folder, not a file");
  }
}

DocumentReader::~DocumentReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool DocumentReader::fill() {
  if (at_end_) return false;
  for (;;) {
    const ssize_t n = ::read(fd_, buffer_.get(), kChunkBytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FormatError(path_ + ": cannot read: " + std::strerror(errno));
    begin_ = 0;
    end_ = static_cast<size_t>(n);
    at_end_ = n == 0;
    return n > 0;
  }
}

bool DocumentReader::append_line(std::string& out) {
  bool appended = false;
  for (;;) {
    if (begin_ == end_ && !fill()) {
      if (appended) ++line_;
      return appended;  // a last line without its newline
    }
    const char* start = buffer_.get() + begin_;
    const void* newline = std::memchr(start, '\n', end_ - begin_);
    const size_t take = newline != nullptr ? static_cast<const char*>(newline) - start + 1 : end_ - begin_;
    out.append(start, take);
    appended = true;
    begin_ += take;
    bytes_read_ += take;
    if (newline != nullptr) {
      ++line_;
      return true;
    }
  }
}

bool DocumentReader::next(Record& record) {
  record.bytes.clear();
  if (format_ == InputFormat::kJsonLines) {
    while (append_line(record.bytes)) {
      if (is_blank(record.bytes)) {
        record.bytes.clear();
        continue;
      }
      while (!record.bytes.empty() && (record.bytes.back() == '\n' || record.bytes.back() == '\r')) {
        record.bytes.pop_back();
      }
      record.line = line_;
      return true;
    }
    return false;
  }
  // Lines go straight into the record; an empty one is taken back off.
  for (size_t start = 0; append_line(record.bytes); start = record.bytes.size()) {
    const std::string_view line = std::string_view(record.bytes).substr(start);
    if (line == "\n" || line == "\r\n") {
      record.bytes.resize(start);
      if (!record.bytes.empty()) return true;
      continue;
    }
    if (start == 0) record.line = line_;
  }
  return !record.bytes.empty();
}

std::string document_text(Record&& record, InputFormat format, const std::string& json_key,
                          const std::string& path) {
  if (format == InputFormat::kText) return std::move(record.bytes);
  const std::string where = path + ":" + std::to_string(record.line) + ": ";
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(record.bytes);
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(where + "not valid JSON (at byte " + std::to_string(e.byte) + " of the line)");
  } catch (const nlohmann::json::exception& e) {  // a number past any type's range (1e999)
    throw FormatError(where + "not valid JSON (" + e.what() + ")");
  }
  if (!value.is_object()) {
    throw FormatError(where + type_with_article(value) + ", not an object with a '" + json_key + "' string");
  }
  const auto text = value.find(json_key);
  if (text == value.end()) {
    std::string keys;
    for (const auto& item : value.items()) keys += (keys.empty() ? "" : ", ") + item.key();
    throw FormatError(where + "no '" + json_key + "' key (the line has: " + (keys.empty() ? "no keys" : keys) +
                      "; --json-key names another)");
  }
  if (!text->is_string()) {
    throw FormatError(where + "'" + json_key + "' is " + type_with_article(*text) + ", not a string");
  }
  return text->get<std::string>();
}

}  // namespace giant::data
