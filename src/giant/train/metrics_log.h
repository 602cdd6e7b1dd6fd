// metrics.jsonl: one JSON object per line (one per step, one per evaluation).
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace giant::train {

// One record under construction; fields keep their order.
class JsonRecord {
 public:
  JsonRecord& add(const std::string& key, double value);
  JsonRecord& add(const std::string& key, int64_t value);
  JsonRecord& add(const std::string& key, bool value);
  JsonRecord& add(const std::string& key, const std::string& value);
  std::string str() const;  // {"key": value, ...}

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, JSON text
};

std::string json_quote(const std::string& text);

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // truncates; Error naming the file
  void write(const JsonRecord& record);           // one line, flushed

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace giant::train
