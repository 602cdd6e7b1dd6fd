#include "giant/base/key_table.h"

namespace giant::keys {

std::string join_or(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

IntRule any_int() { return {}; }
IntRule at_least(int64_t min) { return {min, std::numeric_limits<int64_t>::max(), "", false}; }
IntRule not_negative(std::string note) { return {0, std::numeric_limits<int64_t>::max(), std::move(note), false}; }
IntRule between(int64_t min, int64_t max) { return {min, max, "", false}; }
IntRule one_of_range(int64_t min, int64_t max) { return {min, max, "", true}; }

std::string allowed_text(const IntRule& r) {
  const bool has_min = r.min != std::numeric_limits<int64_t>::min();
  const bool has_max = r.max != std::numeric_limits<int64_t>::max();
  if (r.listed) {
    std::vector<std::string> values;
    for (int64_t v = r.min; v <= r.max; ++v) values.push_back(std::to_string(v));
    return join_or(values);
  }
  if (has_min && has_max) return std::to_string(r.min) + " to " + std::to_string(r.max);
  if (has_min) return ">= " + std::to_string(r.min);
  if (has_max) return "<= " + std::to_string(r.max);
  return "";
}

void check_int(const std::string& key, int64_t v, const IntRule& r) {
  const std::string got = ", got " + std::to_string(v);
  if (r.listed && (v < r.min || v > r.max)) throw ConfigError(key, "must be " + allowed_text(r) + got);
  if (v < r.min && r.min == 0) {
    throw ConfigError(key, "must not be negative" + (r.note.empty() ? std::string() : " (" + r.note + ")") + got);
  }
  if (v < r.min) throw ConfigError(key, "must be at least " + std::to_string(r.min) + got);
  if (v > r.max) throw ConfigError(key, "must be at most " + std::to_string(r.max) + got);
}

RealRule any_real() { return {}; }
RealRule positive() { return {[](double v) { return v > 0; }, "must be positive", false, "> 0"}; }
RealRule not_negative_real(const std::string& note, bool says_value) {
  return {[](double v) { return v >= 0; }, "must not be negative" + (note.empty() ? "" : " (" + note + ")"),
          says_value, ">= 0"};
}
RealRule below_one() { return {[](double v) { return v >= 0 && v < 1; }, "must be in [0, 1)", false, "[0, 1)"}; }
RealRule finite_at_least_one() {
  return {[](double v) { return v >= 1 && std::isfinite(v); }, "must be a finite number of at least 1", false,
          ">= 1, finite"};
}
RealRule checked_together(std::string allowed) { return {[](double) { return true; }, "", false, std::move(allowed)}; }

void check_real(const std::string& key, double v, const RealRule& rule) {
  if (!rule.ok(v)) throw ConfigError(key, rule.must + (rule.says_value ? ", got " + std::to_string(v) : ""));
}

}  // namespace giant::keys
