#include "giant/ccl/store.h"

#include <charconv>

#include "giant/base/error.h"
#include "giant/ccl/store_detail.h"

namespace giant::ccl {

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix)) {
  GIANT_CHECK(base_ != nullptr, "PrefixStore needs a base store");
  GIANT_CHECK(!prefix_.empty(), "PrefixStore needs a non-empty prefix");
}

void PrefixStore::set(const std::string& key, const Bytes& value) { base_->set(this->key(key), value); }

Bytes PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return base_->get(this->key(key), timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) { return base_->add(this->key(key), delta); }

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& k : keys) prefixed.push_back(key(k));
  base_->wait(prefixed, timeout);
}

}  // namespace giant::ccl

namespace giant::ccl::detail {

int64_t add_to_decimal(const std::string& key, const Bytes* old_value, int64_t delta) {
  int64_t current = 0;
  if (old_value != nullptr) {
    std::string text = to_string(*old_value);
    const char* end = text.data() + text.size();
    auto [parsed_to, err] = std::from_chars(text.data(), end, current);
    if (text.empty() || err != std::errc() || parsed_to != end) {
      throw Error("store key '" + key + "' holds '" + text.substr(0, 64) +
                  "', which is not an integer, so add() cannot update it");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    throw Error("store add() on key '" + key + "' overflows int64 (" + std::to_string(current) + " + " +
                std::to_string(delta) + ")");
  }
  return sum;
}

Bytes decimal_bytes(int64_t value) { return to_bytes(std::to_string(value)); }

std::string describe_keys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 5;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += "'" + keys[i] + "'";
  }
  if (keys.size() > kShown) out += " and " + std::to_string(keys.size() - kShown) + " more";
  return out;
}

}  // namespace giant::ccl::detail
