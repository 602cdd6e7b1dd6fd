// Gradient wire formats (grad_wire.h) and the host-compressed allreduce that
// uses them (host_compressed_allreduce.h), ranks as threads with host ids
// set by hand, on exact inputs over world sizes 1 to 5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/ccl/grad_wire.h"
#include "giant/ccl/host_compressed_allreduce.h"

namespace giant::ccl::test {
namespace {

constexpr GradWire kWires[] = {GradWire::bf16, GradWire::int8, GradWire::int4};

// Largest error of one encoding relative to the largest magnitude of its
// group (bf16: relative to the element itself, which is smaller).
double unit_error(GradWire wire) {
  switch (wire) {
    case GradWire::bf16:
      return 0x1p-8;
    case GradWire::int8:
      return 0.5 / 127;
    case GradWire::int4:
      return 0.5 / 7;
    default:
      return 0;
  }
}

std::vector<float> random_values(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& x : v) x = scale * unit(rng);
  return v;
}

TEST(GradWire, NamesAndSizes) {
  for (const auto& name : grad_wire_names()) EXPECT_EQ(grad_wire_name(parse_grad_wire(name)), name);
  try {
    parse_grad_wire("int2");
    FAIL() << "int2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none, bf16, int8, int4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(grad_wire_bytes(GradWire::bf16, 10), 20u);
  EXPECT_EQ(grad_wire_bytes(GradWire::int8, 256), 260u);
  EXPECT_EQ(grad_wire_bytes(GradWire::int8, 257), 265u);
  EXPECT_EQ(grad_wire_bytes(GradWire::int4, 3), 6u);
  EXPECT_NEAR(grad_wire_ratio(GradWire::int8), 3.94, 0.01);
  EXPECT_NEAR(grad_wire_ratio(GradWire::int4), 7.76, 0.01);
}

// Each encoding is off by at most its unit error and keeps exactly what it
// dropped: decode + new residual == input + old residual.
TEST(GradWire, EncodingKeepsWhatItDrops) {
  for (GradWire wire : kWires) {
    for (size_t count : {1u, 255u, 256u, 1000u}) {
      const auto in = random_values(count, 7, 3.0f);
      auto residual = random_values(count, 8, 0.01f);
      const auto before = residual;
      std::vector<uint8_t> encoded(grad_wire_bytes(wire, count));
      encode_with_feedback(wire, in.data(), residual.data(), count, encoded.data());
      std::vector<float> decoded(count);
      decode_grad_wire(wire, encoded.data(), count, decoded.data(), false);
      float group_max = 0;
      for (size_t i = 0; i < count; ++i) group_max = std::max(group_max, std::fabs(in[i] + before[i]));
      for (size_t i = 0; i < count; ++i) {
        const float acc = in[i] + before[i];
        EXPECT_EQ(decoded[i] + residual[i], acc) << grad_wire_name(wire) << " element " << i;
        EXPECT_LE(std::fabs(decoded[i] - acc), unit_error(wire) * group_max * 1.0001) << grad_wire_name(wire);
      }
    }
  }
}

TEST(GradWire, NonFiniteGroupsDecodeToNanAndLeaveNoResidual) {
  for (GradWire wire : kWires) {
    std::vector<float> in(300, 1.0f), residual(300, 0.5f);
    in[3] = std::numeric_limits<float>::infinity();
    std::vector<uint8_t> encoded(grad_wire_bytes(wire, in.size()));
    encode_with_feedback(wire, in.data(), residual.data(), in.size(), encoded.data());
    std::vector<float> decoded(in.size());
    decode_grad_wire(wire, encoded.data(), in.size(), decoded.data(), false);
    EXPECT_FALSE(std::isfinite(decoded[3])) << grad_wire_name(wire);
    EXPECT_EQ(residual[3], 0.0f) << grad_wire_name(wire);
    EXPECT_TRUE(std::isfinite(decoded[299])) << grad_wire_name(wire);  // another group (or element) is untouched
  }
}

// n ranks, `per_host` to a host (host ids h0, h1, ...).
std::function<CommConfig(int)> hosts_of(int per_host) {
  return [per_host](int rank) {
    CommConfig config = test_config();
    config.host_id = "h" + std::to_string(rank / per_host);
    return config;
  };
}

// A bound on one call's error, relative to S = the largest sum over ranks
// of |x|: every host's chunk-owner encodes a host sum (at most S) with
// error e S, and the server encodes the sum of H of those (at most
// S (1 + H e)) with error e of that.
double one_call_bound(GradWire wire, int hosts, double S) {
  const double e = unit_error(wire);
  return (hosts * e + e * (1 + hosts * e)) * S + 1e-6 * S;
}

struct Layout {
  int ranks, per_host;
};
constexpr Layout kLayouts[] = {{1, 1}, {2, 1}, {2, 2}, {3, 1}, {4, 2}, {4, 1}, {5, 1}, {5, 5}};

// Every world size 1 to 5, hosts of one or several ranks, every wire: the
// result is bitwise identical on every rank and within one call's bound of
// the exact sum (or average).
TEST(HostCompressedAllreduce, ExactInputsWithinBoundOnEveryLayout) {
  const size_t count = 1037;  // not a multiple of anything
  for (const Layout& layout : kLayouts) {
    for (GradWire wire : kWires) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        std::vector<std::vector<float>> in(layout.ranks), out(layout.ranks);
        std::vector<double> exact(count, 0.0), S(count, 0.0);
        for (int r = 0; r < layout.ranks; ++r) {
          in[r] = random_values(count, 100 + r, static_cast<float>(1 << r));
          for (size_t i = 0; i < count; ++i) exact[i] += in[r][i], S[i] += std::fabs(in[r][i]);
        }
        run_comm_threads(
            layout.ranks,
            [&](Communicator& comm) {
              HostCompressedAllreduce reducer(comm, wire);
              EXPECT_EQ(reducer.hosts(), layout.ranks / layout.per_host);
              out[comm.rank()] = in[comm.rank()];
              reducer.allreduce(out[comm.rank()].data(), count, 0, op).wait();
            },
            hosts_of(layout.per_host));
        const std::string what = std::to_string(layout.ranks) + " ranks, " + std::to_string(layout.per_host) +
                                 " a host, " + grad_wire_name(wire) + (op == ReduceOp::avg ? " avg" : " sum");
        for (int r = 1; r < layout.ranks; ++r) {
          EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), count * 4), 0) << what << ": rank " << r << " differs";
        }
        const double S_max = *std::max_element(S.begin(), S.end());
        const double divide = op == ReduceOp::avg ? layout.ranks : 1;
        double worst = 0;
        for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(out[0][i] - exact[i] / divide));
        EXPECT_LE(worst, one_call_bound(wire, layout.ranks / layout.per_host, S_max) / divide) << what;
      }
    }
  }
}

// The same input reduced again and again: with error feedback the running
// sum of the results stays within one call's bound of the exact running
// sum, instead of drifting by up to that bound every call.
TEST(HostCompressedAllreduce, ErrorFeedbackMakesRunningSumsConverge) {
  const size_t count = 600;
  const int calls = 60;
  for (GradWire wire : {GradWire::int8, GradWire::int4}) {
    std::vector<std::vector<float>> in(4);
    std::vector<double> exact(count, 0.0), S(count, 0.0);
    for (int r = 0; r < 4; ++r) {
      in[r] = random_values(count, 300 + r);
      for (size_t i = 0; i < count; ++i) exact[i] += in[r][i], S[i] += std::fabs(in[r][i]);
    }
    std::vector<double> running(count, 0.0);
    double first_error = 0;
    run_comm_threads(
        4,
        [&](Communicator& comm) {
          HostCompressedAllreduce reducer(comm, wire);
          std::vector<float> data;
          for (int k = 0; k < calls; ++k) {
            data = in[comm.rank()];
            reducer.allreduce(data.data(), count, 3, ReduceOp::sum).wait();
            if (comm.rank() != 0) continue;
            for (size_t i = 0; i < count; ++i) {
              running[i] += data[i];
              if (k == 0) first_error = std::max(first_error, std::fabs(data[i] - exact[i]));
            }
          }
        },
        hosts_of(2));
    const double S_max = *std::max_element(S.begin(), S.end());
    double drift = 0;
    for (size_t i = 0; i < count; ++i) drift = std::max(drift, std::fabs(running[i] - calls * exact[i]));
    EXPECT_GT(first_error, 0) << grad_wire_name(wire) << ": nothing was lost to compress";
    EXPECT_LE(drift, one_call_bound(wire, 2, S_max)) << grad_wire_name(wire) << " after " << calls << " calls";
    EXPECT_LT(drift, 0.2 * calls * first_error) << grad_wire_name(wire);
  }
}

// Saving the residuals after some calls and restoring them into a fresh
// reducer continues bitwise as the reducer that went on.
TEST(HostCompressedAllreduce, RestoredFeedbackContinuesBitwise) {
  const size_t count = 513;
  std::vector<std::vector<float>> straight(4), resumed(4);
  run_comm_threads(
      4,
      [&](Communicator& comm) {
        const auto input = [&](int k) { return random_values(count, 1000 * k + comm.rank()); };
        std::vector<uint8_t> saved;
        {
          HostCompressedAllreduce reducer(comm, GradWire::int8);
          for (int k = 0; k < 5; ++k) {
            auto data = input(k);
            reducer.allreduce(data.data(), count, 1, ReduceOp::avg).wait();
            if (k == 2) saved = reducer.save_feedback();
            if (k == 4) straight[comm.rank()] = data;
          }
        }
        HostCompressedAllreduce fresh(comm, GradWire::int8);
        fresh.restore_feedback(saved, {{1, count}});
        for (int k = 3; k < 5; ++k) {
          auto data = input(k);
          fresh.allreduce(data.data(), count, 1, ReduceOp::avg).wait();
          if (k == 4) resumed[comm.rank()] = data;
        }
        EXPECT_THROW(HostCompressedAllreduce(comm, GradWire::int4).restore_feedback(saved, {{1, count}}), Error);
        EXPECT_THROW(fresh.restore_feedback(saved, {{1, count + 40}}), Error);
        EXPECT_THROW(fresh.restore_feedback(saved, {{2, count}}), Error);
        auto cut = saved;
        cut.resize(cut.size() - 3);
        EXPECT_THROW(fresh.restore_feedback(cut, {{1, count}}), Error);
      },
      hosts_of(2));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(std::memcmp(straight[r].data(), resumed[r].data(), count * 4), 0) << "rank " << r;
  }
}

TEST(HostCompressedAllreduce, RefusesHostsOfDifferentSizes) {
  run_comm_threads(
      3,
      [&](Communicator& comm) {
        try {
          HostCompressedAllreduce reducer(comm, GradWire::int8);
          ADD_FAILURE() << "hosts of 2 and 1 ranks accepted";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("every host must hold as many"), std::string::npos) << e.what();
        }
      },
      [](int rank) {
        CommConfig config = test_config();
        config.host_id = rank < 2 ? "a" : "b";
        return config;
      });
}

}  // namespace
}  // namespace giant::ccl::test
