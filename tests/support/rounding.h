// Rounding-error arithmetic for the tests' tolerances: the unit roundoff of
// each format and the two bounds the tests derive theirs from. Every numeric
// tolerance in tests/ that is not bitwise equality comes from these and a
// count of roundings stated where it is used; no torch here (ccl's tests use
// it too).
//
// A format with p significant bits (the implicit one included) rounds to
// nearest with relative error at most u = 2^-p: fp32 2^-24, fp16 2^-11,
// bf16 2^-8.
//
// Worst case (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
// Lemma 3.1 and section 4.2): n roundings in sequence, as in a length-n dot
// product or a sum of n + 1 terms in any order, err by at most gamma_n =
// n u / (1 - n u) relative to the sum of the terms' magnitudes. Two orders of
// one sum differ by at most twice that.
//
// Norm-wise (Higham and Mary, "A new approach to probabilistic rounding error
// analysis", SIAM J. Sci. Comput. 41(5), 2019): where each element of a
// tensor goes through n roundings whose errors are independent and of mean
// zero, the element's error has root mean square at most sqrt(n) u, and a
// norm over many elements concentrates at that root mean square; so the
// relative norm ||a - b|| / ||b|| of two results that differ by n such
// roundings per element stays below sqrt(n) u, without the tail factor a
// single element would need. Independent sources add in quadrature
// (RoundingBudget).
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "giant/base/precision.h"

namespace giant::test {

// u = 2^-p for p significant bits: 2^-24, 2^-8, 2^-11.
constexpr double unit_roundoff(Precision precision) {
  switch (precision) {
    case Precision::fp32: return 0x1p-24;
    case Precision::bf16: return 0x1p-8;
    case Precision::fp16: return 0x1p-11;
  }
  return 1;
}

// double's (p = 53), for the tests that compute in it.
constexpr double kDoubleUnitRoundoff = 0x1p-53;

// gamma_n = n u / (1 - n u): the worst relative error of n roundings in
// sequence (relative to the sum of magnitudes). Throws where n u >= 1,
// where no such bound exists.
inline double gamma(int64_t n, double u) {
  const double nu = static_cast<double>(n) * u;
  if (nu >= 1) throw std::invalid_argument("gamma_n: n u >= 1, no worst-case bound");
  return nu / (1 - nu);
}

// Independent sources of rounding error, each n roundings of unit roundoff
// u per element, added in quadrature: bound() = sqrt(sum of n u^2).
class RoundingBudget {
 public:
  RoundingBudget& add(double n, double u) {
    sum_of_squares_ += n * u * u;
    return *this;
  }
  RoundingBudget& add(double n, Precision precision) { return add(n, unit_roundoff(precision)); }
  // An independent source already bounded (a relative norm).
  RoundingBudget& add_bound(double relative) {
    sum_of_squares_ += relative * relative;
    return *this;
  }
  double bound() const { return std::sqrt(sum_of_squares_); }

 private:
  double sum_of_squares_ = 0;
};

}  // namespace giant::test
