// giant_base: checks and errors, units, the tunables registry, deadlines,
// logging, the nearest-name suggestions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <limits>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "giant/base/edit_distance.h"
#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/logging.h"
#include "giant/base/timer.h"
#include "giant/base/tunables.h"
#include "giant/base/units.h"
#include "support/error_message.h"

namespace giant {
namespace {

TEST(Check, ThrowsWithMessageAndCondition) {
  try {
    int heads = 3;
    GIANT_CHECK(heads % 2 == 0, "heads must be even, got ", heads);
    FAIL() << "no throw";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("heads must be even, got 3"), std::string::npos) << what;
    EXPECT_NE(what.find("heads % 2 == 0"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(GIANT_CHECK(1 + 1 == 2, "arithmetic"));
}

TEST(Errors, Taxonomy) {
  TimeoutError t(3, "late");
  const CommError& c = t;
  EXPECT_EQ(c.peer(), 3);
  ConfigError k("model.heads", "must divide hidden");
  EXPECT_EQ(k.key(), "model.heads");
  EXPECT_NE(std::string(k.what()).find("'model.heads'"), std::string::npos);
}

TEST(Units, Bytes) {
  EXPECT_EQ(parse_bytes("4MiB"), 4 * MiB);
  EXPECT_EQ(parse_bytes("64 MB"), 64000000);
  EXPECT_EQ(parse_bytes("1.5KiB"), 1536);
  EXPECT_EQ(parse_bytes("123"), 123);
  EXPECT_EQ(parse_bytes("2g"), 2 * GiB);
  EXPECT_THROW(parse_bytes("lots"), Error);
  EXPECT_THROW(parse_bytes("3 parsecs"), Error);
  EXPECT_THROW(parse_bytes("-1"), Error);
  EXPECT_EQ(format_bytes(64.0 * MiB), "64 MiB");
  EXPECT_EQ(format_bytes(7), "7 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

TEST(Units, BitRates) {
  EXPECT_DOUBLE_EQ(parse_bit_rate("100mbit"), 100e6);
  EXPECT_DOUBLE_EQ(parse_bit_rate("1Gbit/s"), 1e9);
  EXPECT_DOUBLE_EQ(parse_bit_rate("2.5 Gbps"), 2.5e9);
  EXPECT_DOUBLE_EQ(parse_bit_rate("500kbit"), 500e3);
  EXPECT_DOUBLE_EQ(parse_bit_rate("9600"), 9600);
  EXPECT_THROW(parse_bit_rate("100MB/s"), Error);  // bytes, not bits: refused rather than misread
  EXPECT_THROW(parse_bit_rate("fast"), Error);
  EXPECT_THROW(parse_bit_rate("0mbit"), Error);
  EXPECT_THROW(parse_bit_rate("-5mbit"), Error);
  EXPECT_EQ(format_bit_rate(100e6), "100 Mbit/s");
  EXPECT_EQ(format_bit_rate(2.5e9), "2.5 Gbit/s");
}

TEST(Units, Seconds) {
  EXPECT_DOUBLE_EQ(parse_seconds("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(parse_seconds("2m"), 120);
  EXPECT_DOUBLE_EQ(parse_seconds("30"), 30);
  EXPECT_DOUBLE_EQ(parse_seconds("30us"), 30e-6);
  EXPECT_THROW(parse_seconds("soon"), Error);
  EXPECT_EQ(format_seconds(0.0123), "12.3 ms");
}

TEST(Tunables, LayersByPrecedence) {
  Tunables t;
  t.define_int("ccl.sockets", 2, "sockets per peer");
  t.define_bytes("ccl.chunk", 4 * MiB, "chunk size");
  t.define_seconds("ccl.timeout", 300, "timeout");
  t.define_bool("ccl.fast", false, "go fast");
  t.define_string("ccl.name", "x", "a name");
  EXPECT_EQ(t.get_int("ccl.sockets"), 2);
  EXPECT_EQ(t.source("ccl.sockets"), TunableSource::defaults);

  t.set("ccl.sockets", "4", TunableSource::command_line);
  t.apply_environment({{"GIANT_CCL_SOCKETS", "8"}, {"GIANT_CCL_CHUNK", "1MiB"}, {"GIANT_RANK", "3"}});
  t.set("ccl.chunk", "16MiB", TunableSource::config);  // lower than the environment: ignored
  EXPECT_EQ(t.get_int("ccl.sockets"), 4);              // command line beats environment
  EXPECT_EQ(t.get_int("ccl.chunk"), 1 * MiB);
  EXPECT_EQ(t.source("ccl.chunk"), TunableSource::environment);

  t.set("ccl.timeout", "2s", TunableSource::config);
  t.set("ccl.fast", "true", TunableSource::config);
  EXPECT_DOUBLE_EQ(t.get_real("ccl.timeout"), 2.0);
  EXPECT_TRUE(t.get_bool("ccl.fast"));
  EXPECT_EQ(Tunables::environment_name("ccl.tcp.sockets_per_peer"), "GIANT_CCL_TCP_SOCKETS_PER_PEER");
  std::string text = t.describe();
  EXPECT_NE(text.find("ccl.chunk = 1 MiB (environment)"), std::string::npos) << text;
}

// What giant train's start-up shows: the keys whose value is not the one
// they were defined with, whatever set them.
TEST(Tunables, DescribeChangedListsOnlyKeysNotAtTheirDefault) {
  Tunables t;
  t.define_int("a.count", 2, "a count");
  t.define_real("a.rate", 0.1, "a rate");
  t.define_string("a.name", "x", "a name");
  t.define_list("a.items", {"p"}, "items");
  t.define_bytes("a.size", 4 * MiB, "a size");
  EXPECT_EQ(t.describe_changed(), "");
  t.set("a.count", "2", TunableSource::config);  // set, but to its default
  t.set("a.rate", "0.25", TunableSource::environment);
  t.set_list("a.items", {"p", "q"}, TunableSource::command_line);
  EXPECT_TRUE(t.at_default("a.count"));
  EXPECT_FALSE(t.at_default("a.rate"));
  EXPECT_EQ(t.describe_changed(),
            "a.items = [\"p\", \"q\"] (command line)  # items\n"
            "a.rate = 0.25 (environment)  # a rate\n");
  EXPECT_NE(t.describe().find("a.count = 2 (config)"), std::string::npos);
}

TEST(Tunables, ErrorsNameTheKey) {
  Tunables t;
  t.define_int("ccl.sockets", 2, "sockets per peer");
  try {
    t.set("ccl.sockets", "many", TunableSource::command_line);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "ccl.sockets");
  }
  try {
    t.set("ccl.sokets", "2", TunableSource::command_line);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "ccl.sokets");
  }
  EXPECT_THROW(t.define_int("ccl.sockets", 1, "twice"), Error);
  EXPECT_THROW(t.apply_environment({{"GIANT_CCL_SOCKETS", "x"}}), ConfigError);
}

// The message of the ConfigError f throws ("" if it throws none).
template <class F>
std::string config_error(F&& f) {
  return test::error_message<ConfigError>(f);
}

TEST(Tunables, AnUnknownNameSaysTheNearestKnownOne) {
  Tunables t;
  t.define_int("ccl.sockets", 2, "sockets per peer");
  t.define_seconds("ccl.timeout", 300, "timeout");
  const std::string what = config_error([&] { t.set("ccl.sokets", "2", TunableSource::command_line); });
  EXPECT_NE(what.find("did you mean ccl.sockets?"), std::string::npos) << what;
  const std::string far = config_error([&] { t.set("model.layers", "2", TunableSource::command_line); });
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(Tunables, BadEnvironmentValuesNameTheVariableNotACheck) {
  Tunables t;
  t.define_int("ccl.sockets", 2, "sockets per peer");
  t.define_real("train.lr", 1e-3, "lr");
  t.define_bytes("ccl.chunk", 4 * MiB, "chunk size");
  t.define_seconds("ccl.timeout", 300, "timeout");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"GIANT_CCL_SOCKETS", ""},       {"GIANT_CCL_SOCKETS", "4x"}, {"GIANT_CCL_SOCKETS", "99999999999999999999"},
      {"GIANT_TRAIN_LR", ""},          {"GIANT_TRAIN_LR", "fast"},  {"GIANT_CCL_CHUNK", "lots"},
      {"GIANT_CCL_CHUNK", "3 parsecs"}, {"GIANT_CCL_TIMEOUT", "soon"}};
  for (const auto& [variable, value] : cases) {
    const std::string what = config_error([&] { t.apply_environment({{variable, value}}); });
    EXPECT_NE(what.find("environment variable " + variable), std::string::npos) << what;
    EXPECT_NE(what.find("'" + value + "'"), std::string::npos) << what;
    EXPECT_EQ(what.find(" at giant/"), std::string::npos) << "an internal check's text: " << what;
  }
}

TEST(Tunables, AVariableOneTypoFromATunableIsReported) {
  Tunables t;
  t.define_int("ccl.sockets", 2, "sockets per peer");
  testing::internal::CaptureStderr();
  t.apply_environment({{"GIANT_CCL_SOKETS", "3"}, {"GIANT_RANK", "1"}, {"HOME", "/root"}});
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_NE(logged.find("GIANT_CCL_SOKETS"), std::string::npos) << logged;
  EXPECT_NE(logged.find("did you mean GIANT_CCL_SOCKETS?"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("GIANT_RANK"), std::string::npos) << "not a tunable's misspelling: " << logged;
  EXPECT_EQ(t.get_int("ccl.sockets"), 2);
}

TEST(EditDistance, CountsEditsAndSwaps) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("train.lr", "train.lr"), 0u);
  EXPECT_EQ(edit_distance("train.rl", "train.lr"), 1u);  // a swap is one edit
  EXPECT_EQ(edit_distance("model.layerz", "model.layers"), 1u);
  const std::vector<std::string> keys = {"train.lr", "train.min_lr", "model.layers", "train.steps"};
  EXPECT_EQ(nearest_name("train.lrr", keys), "train.lr");
  EXPECT_EQ(nearest_name("train.step", keys), "train.steps");
  EXPECT_EQ(nearest_name("data.path", keys), "");  // nothing near: no guess
  EXPECT_EQ(did_you_mean("model.layer", keys), " (did you mean model.layers?)");
  EXPECT_EQ(did_you_mean("xyz", keys), "");
}

TEST(Deadline, ExpiresAndNever) {
  Deadline never = Deadline::never();
  EXPECT_FALSE(never.expired());
  EXPECT_EQ(never.remaining_ms(100), 100);
  Deadline soon = Deadline::after(std::chrono::milliseconds(20));
  EXPECT_FALSE(soon.expired());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(soon.expired());
  EXPECT_EQ(soon.remaining_ms(100), 0);
  EXPECT_TRUE(Deadline::after(std::chrono::milliseconds(0)).is_never());
}

// A timeout past what the clock counts (the store takes them from clients)
// is no deadline: found by the store fuzzer as a signed overflow.
TEST(Deadline, DurationsPastTheClockAreNever) {
  EXPECT_TRUE(Deadline::after(std::chrono::milliseconds(std::numeric_limits<int64_t>::max())).is_never());
  EXPECT_TRUE(Deadline::after(std::chrono::milliseconds(216172782449328228)).is_never());
  EXPECT_TRUE(Deadline::after(std::chrono::hours(std::numeric_limits<int64_t>::max() / 2)).is_never());
  EXPECT_TRUE(Deadline::after_seconds(1e300).is_never());
  EXPECT_TRUE(Deadline::after_seconds(std::numeric_limits<double>::quiet_NaN()).is_never());
  EXPECT_FALSE(Deadline::after(std::chrono::hours(24 * 365 * 100)).is_never());
  EXPECT_FALSE(Deadline::after_seconds(0.5).expired());
}

#if defined(__GLIBC__)
TEST(HostMemory, FreedBlocksStayInTheHeap) {
  ASSERT_TRUE(retain_freed_memory(0));  // glibc's defaults: nothing changes
  ASSERT_TRUE(retain_freed_memory(size_t{256} << 20));
  const size_t mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(size_t{16} << 20);  // mapped apart under glibc's defaults
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "a 16 MiB block was mapped apart from the heap";
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, size_t{16} << 20) << "the freed block went back to the kernel";
}
#endif

TEST(Logging, LevelsParse) {
  EXPECT_EQ(parse_log_level("warn"), LogLevel::warn);
  EXPECT_THROW(parse_log_level("loud"), Error);
  configure_logging("[rank 7] ", LogLevel::info);
  EXPECT_TRUE(log_enabled(LogLevel::warn));
  EXPECT_FALSE(log_enabled(LogLevel::debug));
  GIANT_LOG(info) << "a line with a rank prefix";
  configure_logging("", LogLevel::info);
}

TEST(Logging, LevelAndTimestampsFromTheirTunables) {
  Tunables keys;
  define_logging_tunables(keys);
  keys.apply_environment({{"GIANT_LOG_LEVEL", "warn"}, {"GIANT_LOG_TIMESTAMPS", "true"}});
  configure_logging_from(keys);
  testing::internal::CaptureStderr();
  GIANT_LOG(info) << "an info line";
  GIANT_LOG(warn) << "a warning line";
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_EQ(logged.find("an info line"), std::string::npos) << logged;
  EXPECT_TRUE(std::regex_match(logged, std::regex("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z "
                                                  "warning: a warning line\n")))
      << logged;

  Tunables bad;
  define_logging_tunables(bad);
  bad.apply_environment({{"GIANT_LOG_LEVEL", "loud"}});
  const std::string what = config_error([&] { configure_logging_from(bad); });
  EXPECT_NE(what.find("GIANT_LOG_LEVEL"), std::string::npos) << what;
  EXPECT_NE(what.find("unknown log level 'loud'"), std::string::npos) << what;
  set_log_level(LogLevel::info);
  set_log_timestamps(false);
}

}  // namespace
}  // namespace giant
