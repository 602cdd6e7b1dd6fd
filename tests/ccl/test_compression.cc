// Wire compression in use: ring allreduce with a compressed wire (ranks as
// threads), and top-k compression with error feedback (the conversion
// kernels' own tests are test_wire_conversion.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/error_feedback.h"
#include "giant/ccl/reduce_kernels.h"
#include "giant/ccl/wire_compression.h"
#include "support/rounding.h"

namespace giant::ccl::test {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// ------------------------------------------------------- compressed allreduce

// Error bound. Block b's reduction runs along a chain of the n ranks: the
// first sends its input rounded to the wire type, each of the next n-2 adds
// its own input in f32 and rounds the partial sum to the wire again, and the
// owner adds its input (avg: divides by n) and rounds once more for the
// allgather; receivers decode exactly. That is n = (n-1 hops + 1) roundings
// to the wire type, each off by at most u (bf16: 8 significant bits, u =
// 2^-8; fp16: 11, u = 2^-11) of the value rounded, plus at most eta in the
// subnormal range (half the smallest subnormal), and at most n+1 f32
// roundings (2^-24 each). Every partial value is at most S = sum over ranks
// of |x_r| (times the growth of the earlier roundings), so
//   |result - exact| <= ((1+u)^n (1+2^-24)^(n+1) - 1) * S + n * eta,
// which is n * u * S to first order (relative to S, not to the result: a sum
// that cancels can lose all its digits).
double wire_unit_roundoff(WireDType wire) {
  return giant::test::unit_roundoff(wire == WireDType::bf16 ? Precision::bf16 : Precision::fp16);
}

double bound(int n, WireDType wire, double S) {
  const double u = wire_unit_roundoff(wire), f32 = giant::test::unit_roundoff(Precision::fp32);
  double eta = wire == WireDType::bf16 ? 0x1p-134 : 0x1p-25;
  return (std::pow(1 + u, n) * std::pow(1 + f32, n + 1) - 1) * S + n * eta;
}

// Inputs of mixed magnitudes (2^-8 to 2^8; fp16 subnormals at the low end,
// sums far from fp16 overflow).
std::vector<std::vector<float>> make_inputs(int n, size_t count, uint32_t seed, bool positive = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(positive ? 0.5f : -1.0f, positive ? 2.0f : 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (auto& v : in) {
    for (auto& x : v) x = positive ? unit(rng) : std::ldexp(unit(rng), exponent(rng));
  }
  return in;
}

struct Case {
  size_t count;
  ReduceOp op;
};

// Runs the cases in turn on one set of n thread ranks; returns outputs[case][rank].
std::vector<std::vector<std::vector<float>>> run_allreduces(int n, const std::vector<Case>& cases,
                                                            const std::vector<std::vector<std::vector<float>>>& inputs,
                                                            WireDType wire, bool in_place,
                                                            const CommConfig& config = test_config()) {
  std::vector<std::vector<std::vector<float>>> outputs(cases.size(), std::vector<std::vector<float>>(n));
  run_comm_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (size_t c = 0; c < cases.size(); ++c) {
      std::vector<float> buffer = inputs[c][r];
      std::vector<float> out(cases[c].count, std::numeric_limits<float>::quiet_NaN());
      AllreduceOptions o;
      o.input = buffer.data();
      o.output = in_place ? buffer.data() : out.data();
      o.count = cases[c].count;
      o.op = cases[c].op;
      o.algorithm = c % 2 ? Algorithm::ring : Algorithm::automatic;  // automatic with a wire: the ring
      o.wire = wire;
      allreduce(comm, o).wait();
      if (!in_place) {
        EXPECT_TRUE(same_bits(buffer, inputs[c][r])) << "the input changed, rank " << r;
      }
      outputs[c][r] = in_place ? buffer : out;
    }
  }, config);
  return outputs;
}

// Every rank bitwise equal, every value on the wire grid (the owner rounded
// it), and within the bound of the exact result. Returns the largest error
// seen in units of the first-order bound n * u * S.
double check_results(int n, WireDType wire, const Case& c, const std::vector<std::vector<float>>& inputs,
                   const std::vector<std::vector<float>>& outputs, const std::string& what) {
  SCOPED_TRACE(what);
  for (int r = 1; r < n; ++r) {
    EXPECT_TRUE(same_bits(outputs[r], outputs[0])) << "rank " << r << " differs from rank 0";
  }
  const auto& out = outputs[0];
  EXPECT_EQ(out.size(), c.count);
  if (out.size() != c.count) return 0;
  if (n == 1) {  // a single rank passes through
    EXPECT_TRUE(same_bits(out, inputs[0]));
    return 0;
  }
  std::vector<float> rounded(out);
  std::vector<uint16_t> encoded(out.size());
  detail::round_through(wire, rounded.data(), encoded.data(), rounded.size());
  EXPECT_TRUE(same_bits(rounded, out)) << "results are not on the " << wire_dtype_name(wire) << " grid";
  const double u = wire_unit_roundoff(wire);
  double worst = 0;
  for (size_t i = 0; i < c.count; ++i) {
    double exact = 0, S = 0, largest = 0;
    for (int r = 0; r < n; ++r) {
      double x = inputs[r][i];
      S += std::fabs(x);
      largest = std::max(largest, std::fabs(x));
    }
    switch (c.op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        for (int r = 0; r < n; ++r) exact += inputs[r][i];
        if (c.op == ReduceOp::avg) {
          exact /= n;
          S /= n;
        }
        break;
      case ReduceOp::prod:
        exact = 1;
        for (int r = 0; r < n; ++r) exact *= inputs[r][i];
        S = std::fabs(exact);  // every rounding is relative to a partial product
        break;
      case ReduceOp::min:
      case ReduceOp::max:
        exact = inputs[0][i];
        for (int r = 1; r < n; ++r) {
          double x = inputs[r][i];
          exact = c.op == ReduceOp::min ? std::min(exact, x) : std::max(exact, x);
        }
        S = largest;
        break;
    }
    double err = std::fabs(out[i] - exact), limit = bound(n, wire, S);
    if (err > limit) {
      ADD_FAILURE() << "element " << i << ": got " << out[i] << ", exact " << exact << ", error " << err
                    << " > bound " << limit;
      return worst;
    }
    if (S > 0) worst = std::max(worst, err / (n * u * S));
  }
  return worst;
}

TEST(CompressedAllreduce, SumsOverWorldSizesCountsAndBothWires) {
  const std::vector<size_t> counts = {0, 1, 7, 1000, (size_t{1} << 20) + 3};
  for (int n = 1; n <= 4; ++n) {
    std::vector<Case> cases;
    std::vector<std::vector<std::vector<float>>> inputs;
    for (size_t count : counts) {
      cases.push_back({count, ReduceOp::sum});
      inputs.push_back(make_inputs(n, count, static_cast<uint32_t>(n * 1000 + count)));
    }
    for (WireDType wire : {WireDType::bf16, WireDType::fp16}) {
      double worst = 0;
      for (bool in_place : {false, true}) {
        auto outputs = run_allreduces(n, cases, inputs, wire, in_place);
        for (size_t c = 0; c < cases.size(); ++c) {
          worst = std::max(worst, check_results(n, wire, cases[c], inputs[c], outputs[c],
                                                "n=" + std::to_string(n) + " count=" + std::to_string(cases[c].count) +
                                                    " wire=" + wire_dtype_name(wire) +
                                                    (in_place ? " in place" : " out of place")));
        }
      }
      std::printf("n=%d wire=%s: largest error %.3f of n*u*S\n", n, wire_dtype_name(wire), worst);
    }
  }
}

TEST(CompressedAllreduce, EveryOpAndSmallSegments) {
  CommConfig small = test_config();
  small.segment_bytes = 256;  // several segments per block, blocks of unequal size
  for (int n : {2, 3}) {
    std::vector<Case> cases;
    std::vector<std::vector<std::vector<float>>> inputs;
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : {size_t{7}, size_t{1000}, size_t{4099}}) {
        cases.push_back({count, op});
        inputs.push_back(make_inputs(n, count, static_cast<uint32_t>(count * 7 + static_cast<int>(op)),
                                     op == ReduceOp::prod));
      }
    }
    for (WireDType wire : {WireDType::bf16, WireDType::fp16}) {
      for (bool in_place : {false, true}) {
        auto outputs = run_allreduces(n, cases, inputs, wire, in_place, small);
        for (size_t c = 0; c < cases.size(); ++c) {
          check_results(n, wire, cases[c], inputs[c], outputs[c],
                        "n=" + std::to_string(n) + " " + reduce_op_name(cases[c].op) + " count=" +
                            std::to_string(cases[c].count) + " wire=" + wire_dtype_name(wire) +
                            (in_place ? " in place" : ""));
        }
      }
    }
  }
}

// The ranks disagree on the wire: every rank fails, naming the mismatch.
TEST(CompressedAllreduce, MismatchedWireIsAnErrorOnEveryRank) {
  const int n = 3;
  std::vector<std::string> errors(n);
  run_comm_threads(n, [&](Communicator& comm) {
    std::vector<float> in(1000, 1.0f), out(1000);
    AllreduceOptions o;
    o.input = in.data();
    o.output = out.data();
    o.count = in.size();
    o.algorithm = Algorithm::ring;
    o.wire = comm.rank() == 1 ? WireDType::bf16 : WireDType::none;
    try {
      allreduce(comm, o).wait();
      errors[comm.rank()] = "(no error)";
    } catch (const std::exception& e) {
      errors[comm.rank()] = e.what();
    }
  }, test_config(std::chrono::seconds(20)));
  bool named = false;
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(errors[r].find("mismatch"), std::string::npos) << "rank " << r << ": " << errors[r];
    named = named || (errors[r].find("wire=bf16") != std::string::npos &&
                      errors[r].find("wire=none") != std::string::npos);
  }
  EXPECT_TRUE(named) << "no error names both wires: " << errors[0];
  std::printf("rank 0: %s\n", errors[0].c_str());
}

// With a wire, automatic means the ring (halving-doubling would be chosen
// for this size otherwise): ranks that say automatic and ranks that say ring
// issued the same operation.
TEST(CompressedAllreduce, AutomaticMeansTheRing) {
  const int n = 3;
  auto inputs = make_inputs(n, 1000, 5);
  std::vector<std::vector<float>> outputs(n);
  run_comm_threads(n, [&](Communicator& comm) {
    std::vector<float> out(1000);
    AllreduceOptions o;
    o.input = inputs[comm.rank()].data();
    o.output = out.data();
    o.count = out.size();
    o.algorithm = comm.rank() == 0 ? Algorithm::automatic : Algorithm::ring;
    o.wire = WireDType::fp16;
    allreduce(comm, o).wait();
    outputs[comm.rank()] = out;
  });
  check_results(n, WireDType::fp16, {1000, ReduceOp::sum}, inputs, outputs, "automatic and ring");
}

TEST(CompressedAllreduce, UnsupportedDTypeOrAlgorithmIsAnErrorAtIssue) {
  for (int n : {1, 2}) {
    run_comm_threads(n, [&](Communicator& comm) {
      std::vector<double> in(64, 1.0), out(64);
      auto expect_issue_error = [&](AllreduceOptions o, const std::string& words) {
        try {
          Work work = allreduce(comm, o);
          ADD_FAILURE() << "n=" << n << ": issued without error (expected '" << words << "')";
          work.wait();
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
      };
      for (WireDType wire : {WireDType::bf16, WireDType::fp16}) {
        AllreduceOptions o;
        o.input = in.data();
        o.output = out.data();
        o.count = 16;
        o.wire = wire;
        for (DType dtype : {DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
          o.dtype = dtype;
          o.op = ReduceOp::sum;
          expect_issue_error(o, std::string("got ") + dtype_name(dtype));
        }
        o.dtype = DType::f32;
        for (Algorithm algorithm : {Algorithm::halving_doubling, Algorithm::shm}) {
          o.algorithm = algorithm;
          expect_issue_error(o, "wire compression needs ring or hierarchical");
        }
        o.algorithm = Algorithm::ring;
        o.wire = static_cast<WireDType>(9);
        expect_issue_error(o, "wire dtype");
      }
      // Nothing was issued: the communicator still works, with a wire too.
      std::vector<float> x(100, 1.5f), y(100);
      AllreduceOptions o;
      o.input = x.data();
      o.output = y.data();
      o.count = x.size();
      o.wire = WireDType::bf16;
      allreduce(comm, o).wait();
      EXPECT_EQ(y[0], 1.5f * n);
    });
  }
}

// ------------------------------------------------------------ error feedback

TEST(TopKCompressor, ChoosesKAndBreaksTiesByIndex) {
  EXPECT_THROW(TopKCompressor(0.0), Error);
  EXPECT_THROW(TopKCompressor(1.5), Error);
  TopKCompressor c(0.1);
  EXPECT_EQ(c.k_for(1000), 100u);
  EXPECT_EQ(c.k_for(5), 1u);
  EXPECT_EQ(c.k_for(0), 0u);
  EXPECT_EQ(TopKCompressor(1.0).k_for(7), 7u);
  TopKCompressor t(0.3);
  std::vector<float> ones(10, 1.0f);
  ones[7] = -2.0f;
  const SparseGradient& s = t.compress(ones.data(), ones.size());
  EXPECT_EQ(s.indices, (std::vector<uint32_t>{0, 1, 7}));
  EXPECT_EQ(s.values, (std::vector<float>{1.0f, 1.0f, -2.0f}));
  std::vector<float> other(11, 0.0f);
  EXPECT_THROW(t.compress(other.data(), other.size()), Error);  // another size without reset()
  t.reset();
  EXPECT_EQ(t.compress(other.data(), other.size()).indices.size(), 3u);
}

// What is sent plus what stays equals what came in: exactly, at every step
// (in f32) and over all steps (integer gradients keep the sums exact).
TEST(TopKCompressor, ResidualAccountsForEverythingNotSent) {
  const size_t count = 1000;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> integer(-16, 16);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (bool integers : {true, false}) {
    TopKCompressor c(0.05);
    std::vector<double> input_total(count, 0.0), sent_total(count, 0.0);
    for (int step = 0; step < 60; ++step) {
      std::vector<float> grad(count);
      for (auto& g : grad) g = integers ? static_cast<float>(integer(rng)) : real(rng);
      std::vector<float> before = c.residual();
      before.resize(count, 0.0f);
      const SparseGradient& s = c.compress(grad.data(), grad.size());
      ASSERT_EQ(s.indices.size(), 50u);
      ASSERT_TRUE(std::is_sorted(s.indices.begin(), s.indices.end()));
      ASSERT_TRUE(std::adjacent_find(s.indices.begin(), s.indices.end()) == s.indices.end());
      std::vector<float> sent(count, 0.0f);
      float smallest_sent = INFINITY;
      for (size_t j = 0; j < s.indices.size(); ++j) {
        sent[s.indices[j]] = s.values[j];
        smallest_sent = std::min(smallest_sent, std::fabs(s.values[j]));
      }
      const auto& after = c.residual();
      for (size_t i = 0; i < count; ++i) {
        float acc = grad[i] + before[i];
        ASSERT_EQ(bits_of(sent[i] + after[i]), bits_of(acc + 0.0f)) << "step " << step << " i " << i;
        ASSERT_LE(std::fabs(after[i]), smallest_sent) << "a larger entry stayed behind";
        input_total[i] += grad[i];
        sent_total[i] += sent[i];
      }
    }
    if (integers) {
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(sent_total[i] + c.residual()[i], input_total[i]) << i;
    }
  }
}

// Over many steps the running sum of compressed allreduces follows the dense
// one: they differ by exactly the ranks' residuals (dyadic gradients keep all
// sums exact), which stay bounded while the sums grow.
TEST(TopKCompressor, CompressedAllreduceConvergesToTheDenseRunningSum) {
  const int n = 3, steps = 300;
  const size_t count = 2000;
  std::vector<std::vector<std::vector<float>>> grads(n, std::vector<std::vector<float>>(steps));
  std::vector<double> dense(count, 0.0);
  std::vector<std::vector<double>> dense_at(steps + 1);
  for (int r = 0; r < n; ++r) {
    std::mt19937 rng(100 + r);
    std::uniform_int_distribution<int> q(-256, 256);
    std::vector<float> mean(count);
    for (auto& m : mean) m = q(rng) / 256.0f;
    for (int t = 0; t < steps; ++t) {
      grads[r][t].resize(count);
      for (size_t i = 0; i < count; ++i) grads[r][t][i] = mean[i] + q(rng) / 256.0f;
    }
  }
  std::vector<double> running(count, 0.0);
  for (int t = 0; t < steps; ++t) {
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) running[i] += grads[r][t][i];
    }
    dense_at[t + 1] = running;
  }
  std::vector<std::vector<float>> compressed(n), residuals(n);
  std::vector<double> error_at_30(n), error_at_end(n);
  run_comm_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    TopKCompressor c(0.1);
    std::vector<float> sum(count, 0.0f), out(count);
    auto relative_error = [&](int t) {
      double diff = 0, scale = 0;
      for (size_t i = 0; i < count; ++i) {
        diff = std::max(diff, std::fabs(sum[i] - dense_at[t][i]));
        scale = std::max(scale, std::fabs(dense_at[t][i]));
      }
      return diff / scale;
    };
    for (int t = 0; t < steps; ++t) {
      topk_allreduce(comm, c, grads[r][t].data(), out.data(), count);
      for (size_t i = 0; i < count; ++i) sum[i] += out[i];
      if (t + 1 == 30) error_at_30[r] = relative_error(30);
    }
    error_at_end[r] = relative_error(steps);
    compressed[r] = sum;
    residuals[r] = c.residual();
  });
  for (int r = 1; r < n; ++r) EXPECT_TRUE(same_bits(compressed[r], compressed[0])) << "rank " << r;
  for (size_t i = 0; i < count; ++i) {
    double with_residuals = compressed[0][i];
    for (int r = 0; r < n; ++r) with_residuals += residuals[r][i];
    ASSERT_EQ(with_residuals, dense_at[steps][i]) << "element " << i;
  }
  RecordProperty("relative_error_at_30", std::to_string(error_at_30[0]));
  RecordProperty("relative_error_at_300", std::to_string(error_at_end[0]));
  EXPECT_LT(error_at_end[0], 0.1);
  EXPECT_LT(error_at_end[0], error_at_30[0] / 3) << "at 30 steps " << error_at_30[0];
}

}  // namespace
}  // namespace giant::ccl::test
