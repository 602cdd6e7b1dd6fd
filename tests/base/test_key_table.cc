// A key table (base/key_table.h) on a small config of its own: defaults
// from the struct, each kind read back, every refusal naming the key.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/key_table.h"
#include "giant/base/tunables.h"

namespace giant::keys {
namespace {

enum class Mode { fast, safe };

struct Inner {
  double rate = 1.5;
};

struct Sample {
  int32_t count = 3;
  size_t chunk = 4096;
  std::chrono::milliseconds wait{2000};
  bool enabled = true;
  std::string label = "x";
  std::vector<std::string> items{"a"};
  Mode mode = Mode::safe;
  Inner inner;
};

std::vector<KeyRow<Sample>> sample_keys() {
  std::vector<KeyRow<Sample>> rows;
  rows.push_back(integer("s.count", member(&Sample::count), between(1, 10), "a count"));
  rows.push_back(bytes("s.chunk", member(&Sample::chunk), at_least(1024), "a size"));
  rows.push_back(duration("s.wait", member(&Sample::wait), positive(), "a wait"));
  rows.push_back(boolean("s.enabled", member(&Sample::enabled), "a switch"));
  rows.push_back(text("s.label", member(&Sample::label), Empty::refused, "a name"));
  rows.push_back(texts("s.items", member(&Sample::items), "a list"));
  rows.push_back(choice("s.mode", member(&Sample::mode), Names<Mode>{{"fast", Mode::fast}, {"safe", Mode::safe}},
                        "a mode"));
  rows.push_back(followed_by(real("s.rate", member(&Sample::inner, &Inner::rate), positive(), "a rate"),
                             [](Sample& s) {
                               if (s.mode == Mode::fast && s.inner.rate > 2) {
                                 throw ConfigError("s.rate", "must be at most 2 with s.mode = fast");
                               }
                             }));
  return rows;
}

Sample read_with(const std::vector<std::pair<std::string, std::string>>& settings) {
  Tunables registry;
  define_keys(sample_keys(), registry);
  for (const auto& [name, value] : settings) registry.set(name, value, TunableSource::command_line);
  return read_keys(sample_keys(), registry);
}

// The message of the ConfigError reading `settings` throws, naming `key`.
std::string refusal(const std::vector<std::pair<std::string, std::string>>& settings, const std::string& key) {
  try {
    read_with(settings);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(KeyTable, DefaultsAreTheStructsInitialValues) {
  Tunables registry;
  define_keys(sample_keys(), registry);
  EXPECT_EQ(registry.get_int("s.count"), 3);
  EXPECT_EQ(registry.get_int("s.chunk"), 4096);
  EXPECT_DOUBLE_EQ(registry.get_real("s.wait"), 2.0);
  EXPECT_EQ(registry.get_string("s.mode"), "safe");
  const Sample s = read_keys(sample_keys(), registry);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.wait, std::chrono::milliseconds(2000));
  EXPECT_EQ(s.items, std::vector<std::string>{"a"});
}

TEST(KeyTable, EachKindIsReadIntoItsField) {
  const Sample s = read_with({{"s.count", "7"}, {"s.chunk", "2KiB"}, {"s.wait", "1.5"}, {"s.enabled", "false"},
                              {"s.label", "y"}, {"s.mode", "fast"}, {"s.rate", "0.25"}});
  EXPECT_EQ(s.count, 7);
  EXPECT_EQ(s.chunk, 2048u);
  EXPECT_EQ(s.wait, std::chrono::milliseconds(1500));
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.label, "y");
  EXPECT_EQ(s.mode, Mode::fast);
  EXPECT_DOUBLE_EQ(s.inner.rate, 0.25);
}

TEST(KeyTable, EveryRefusalNamesTheKeyAndTheRule) {
  EXPECT_NE(refusal({{"s.count", "0"}}, "s.count").find("must be at least 1, got 0"), std::string::npos);
  EXPECT_NE(refusal({{"s.count", "11"}}, "s.count").find("must be at most 10"), std::string::npos);
  EXPECT_NE(refusal({{"s.chunk", "100"}}, "s.chunk").find("at least 1024"), std::string::npos);
  EXPECT_NE(refusal({{"s.wait", "0"}}, "s.wait").find("must be positive"), std::string::npos);
  EXPECT_NE(refusal({{"s.label", ""}}, "s.label").find("must not be empty"), std::string::npos);
  EXPECT_NE(refusal({{"s.mode", "slow"}}, "s.mode").find("must be fast or safe, got 'slow'"), std::string::npos);
  EXPECT_NE(refusal({{"s.mode", "fast"}, {"s.rate", "3"}}, "s.rate").find("with s.mode = fast"), std::string::npos);
}

TEST(KeyTable, AnIntegerItsFieldCannotHoldIsRefused) {
  std::vector<KeyRow<Sample>> rows{integer("s.count", member(&Sample::count), any_int(), "a count")};
  Tunables registry;
  define_keys(rows, registry);
  registry.set("s.count", "4294967297", TunableSource::command_line);  // 2^32 + 1: would wrap to 1
  EXPECT_THROW(read_keys(rows, registry), ConfigError);
}

TEST(KeyTable, TheReferenceSaysWhatEachKeyAccepts) {
  const auto rows = sample_keys();
  EXPECT_EQ(rows[0].allowed, "1 to 10");
  EXPECT_EQ(rows[1].allowed, ">= 1024");
  EXPECT_EQ(rows[2].allowed, "> 0");
  EXPECT_EQ(rows[4].allowed, "not empty");
  EXPECT_EQ(rows[6].allowed, "fast or safe");
  EXPECT_EQ(allowed_text(one_of_range(0, 3)), "0, 1, 2 or 3");
  EXPECT_EQ(join_or({"a", "b", "c"}), "a, b or c");
}

}  // namespace
}  // namespace giant::keys
