#include "giant/train/metrics_log.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

#include "giant/base/error.h"

namespace giant::train {

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

JsonRecord& JsonRecord::add(const std::string& key, double value) {
  if (!std::isfinite(value)) {
    // JSON has no NaN or infinity: a string keeps the line parseable.
    fields_.emplace_back(key, std::isnan(value) ? "\"nan\"" : (value > 0 ? "\"inf\"" : "\"-inf\""));
    return *this;
  }
  char buffer[32];
  auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  fields_.emplace_back(key, std::string(buffer, end));
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, bool value) {
  fields_.emplace_back(key, value ? "true" : "false");
  return *this;
}

JsonRecord& JsonRecord::add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, json_quote(value));
  return *this;
}

std::string JsonRecord::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    out += (i ? ", " : "") + json_quote(fields_[i].first) + ": " + fields_[i].second;
  }
  return out + "}";
}

MetricsLog::MetricsLog(const std::string& path) : path_(path), out_(path, std::ios::trunc) {
  if (!out_) {
    throw Error("cannot write '" + path + "': " + std::strerror(errno));
  }
}

void MetricsLog::write(const JsonRecord& record) {
  out_ << record.str() << '\n';
  out_.flush();
  if (!out_) {
    throw Error("writing '" + path_ + "' failed: " + std::strerror(errno));
  }
}

}  // namespace giant::train
