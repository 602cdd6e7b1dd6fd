// ccl's keys (ccl_keys()): the defaults are CommConfig's, a value read is
// the one set, and a value out of range is refused naming the key.
#include <gtest/gtest.h>

#include <string>

#include "giant/base/error.h"
#include "giant/base/tunables.h"
#include "giant/ccl/config.h"
#include "giant/ccl/cost_model.h"

namespace giant::ccl {
namespace {

Tunables defined() {
  Tunables registry;
  CommConfig::define_tunables(registry);
  return registry;
}

TEST(CommConfigKeys, DefaultsRoundTrip) {
  const CommConfig defaults;
  const CommConfig read = CommConfig::from_tunables(defined());
  EXPECT_EQ(read.timeout, defaults.timeout);
  EXPECT_EQ(read.connect_timeout, defaults.connect_timeout);
  EXPECT_EQ(read.sockets_per_peer, defaults.sockets_per_peer);
  EXPECT_EQ(read.segment_bytes, defaults.segment_bytes);
  EXPECT_EQ(read.engine_chunk_bytes, defaults.engine_chunk_bytes);
  EXPECT_EQ(read.transport, defaults.transport);
  EXPECT_EQ(read.shm_chunk_bytes, defaults.shm_chunk_bytes);
  EXPECT_DOUBLE_EQ(read.tcp_gbps, defaults.tcp_gbps);
  EXPECT_EQ(read.host_id, defaults.host_id);
  for (const auto& row : ccl_keys()) EXPECT_FALSE(row.help.empty()) << row.name;
}

TEST(CommConfigKeys, ValuesSetAreRead) {
  Tunables registry = defined();
  registry.set("ccl.timeout", "90s", TunableSource::command_line);
  registry.set("ccl.tcp.sockets_per_peer", "4", TunableSource::command_line);
  registry.set("ccl.segment_bytes", "0", TunableSource::command_line);
  registry.set("ccl.transport", "tcp", TunableSource::command_line);
  registry.set("ccl.shm.chunk_bytes", "1MiB", TunableSource::command_line);
  const CommConfig c = CommConfig::from_tunables(registry);
  EXPECT_EQ(c.timeout, std::chrono::seconds(90));
  EXPECT_EQ(c.sockets_per_peer, 4);
  EXPECT_EQ(c.segment_bytes, 0u);
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_EQ(c.shm_chunk_bytes, size_t{1} << 20);
}

TEST(CommConfigKeys, OutOfRangeValuesAreRefusedNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"ccl.timeout", "0"},           {"ccl.tcp.sockets_per_peer", "65"}, {"ccl.tcp.sockets_per_peer", "-1"},
      {"ccl.segment_bytes", "100"},   {"ccl.engine.chunk_bytes", "1KiB"}, {"ccl.transport", "rdma"},
      {"ccl.shm.chunk_bytes", "1KiB"}, {"ccl.model.tcp_gbps", "0"},        {"ccl.model.shm_alpha_us", "-1"}};
  for (const auto& [key, value] : bad) {
    Tunables registry = defined();
    registry.set(key, value, TunableSource::command_line);
    try {
      CommConfig::from_tunables(registry);
      ADD_FAILURE() << key << " = " << value << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
  }
}

// A ring's segment: the call's own wins; otherwise ccl.segment_bytes (or the
// model's when 0), shortened on a slow link to what it carries in 10 ms.
TEST(RingSegment, ShortOnASlowLinkAndTheCallsOwnWins) {
  CommConfig config;  // 1 MiB segments, a 1.2 GB/s link
  EXPECT_EQ(detail::ring_segment_bytes(config, 0, 16 << 20, 3), size_t{1} << 20);
  EXPECT_EQ(detail::ring_segment_bytes(config, 4096, 16 << 20, 3), size_t{4096});
  config.tcp_gbps = 36e6 / 8 / 1e9;  // 36 Mbit/s: 45 KB in 10 ms, under the floor
  EXPECT_EQ(detail::link_segment_bytes(config), size_t{64} << 10);
  EXPECT_EQ(detail::ring_segment_bytes(config, 0, 16 << 20, 3), size_t{64} << 10);
  EXPECT_EQ(detail::ring_segment_bytes(config, 4096, 16 << 20, 3), size_t{4096});
  config.tcp_gbps = 300e6 / 8 / 1e9;  // 300 Mbit/s: 375 KB
  EXPECT_NEAR(static_cast<double>(detail::ring_segment_bytes(config, 0, 16 << 20, 3)), 375000, 1);
  config.segment_bytes = 16 << 10;  // a shorter one set by hand stays
  EXPECT_EQ(detail::ring_segment_bytes(config, 0, 16 << 20, 3), size_t{16} << 10);
  config.segment_bytes = 0;  // the model's choice, within the link's
  config.tcp_gbps = 1.2;
  EXPECT_EQ(detail::ring_segment_bytes(config, 0, 16 << 20, 3), detail::pipeline_segment_bytes(config, 16 << 20, 3));
  config.tcp_gbps = 36e6 / 8 / 1e9;
  EXPECT_EQ(detail::ring_segment_bytes(config, 0, 16 << 20, 3), size_t{64} << 10);
}

// Data sockets per peer: the key's count, or when 0, two but one on a TCP
// link of the model under 1 Gbit/s.
TEST(DataSockets, OneOnASlowLinkUnlessSetByHand) {
  CommConfig config;  // 0, a 1.2 GB/s link
  EXPECT_EQ(config.sockets_per_peer, 0);
  EXPECT_EQ(detail::data_sockets_per_peer(config), 2);
  config.tcp_gbps = 36e6 / 8 / 1e9;
  EXPECT_EQ(detail::data_sockets_per_peer(config), 1);
  config.tcp_gbps = 1e9 / 8 / 1e9;  // 1 Gbit/s itself: two
  EXPECT_EQ(detail::data_sockets_per_peer(config), 2);
  config.tcp_gbps = 36e6 / 8 / 1e9;
  config.sockets_per_peer = 3;
  EXPECT_EQ(detail::data_sockets_per_peer(config), 3);
}

}  // namespace
}  // namespace giant::ccl
