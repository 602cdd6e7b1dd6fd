// Allreduce by recursive halving (reduce-scatter) and recursive doubling
// (allgather) over the largest power of two p <= n ranks. The first 2(n-p)
// ranks pair up first: odd ones hand their data to their even partner and get
// the result back at the end. 2 log2(p) steps instead of the ring's 2(n-1).
#include <cstring>

#include "giant/ccl/algorithms.h"
#include "giant/ccl/reduce_kernels.h"

namespace giant::ccl::detail {

void allreduce_halving_doubling(OpContext& ctx, const char* in, char* out, size_t count, DType dtype,
                                ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t elem = dtype_size(dtype), nbytes = count * elem;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  int levels = 0;
  while ((1 << levels) < p) ++levels;
  const uint64_t fold_step = 0, unfold_step = 2 * levels + 1;

  move_bytes(out, in, nbytes);
  char* temp = ctx.scratch(0, nbytes);

  int vrank;
  if (r < 2 * extra) {
    if (r % 2 == 1) {  // folded away: contribute, then receive the result
      ctx.send(r - 1, fold_step, out, nbytes);
      ctx.wait(ctx.recv(r - 1, unfold_step, out, nbytes));
      return;
    }
    ctx.wait(ctx.recv(r + 1, fold_step, temp, nbytes));
    reduce_into(out, out, temp, count, dtype, op);
    vrank = r / 2;
  } else {
    vrank = r - extra;
  }
  auto real_rank = [&](int v) { return v < extra ? 2 * v : v + extra; };
  BlockLayout layout = BlockLayout::balanced(count, p);
  auto span_bytes = [&](int lo, int hi) {
    return hi > lo ? (layout.offset[hi - 1] + layout.count[hi - 1] - layout.offset[lo]) * elem : 0;
  };

  // Halving: keep the half of the blocks that holds our bit, send the other.
  int lo = 0, hi = p, level = 0;
  for (int d = p / 2; d >= 1; d /= 2, ++level) {
    int partner = real_rank(vrank ^ d);
    int mid = (lo + hi) / 2;
    bool upper = (vrank & d) != 0;
    int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
    int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
    char* keep = out + layout.offset[keep_lo] * elem;
    size_t keep_bytes = span_bytes(keep_lo, keep_hi);
    ctx.send(partner, 1 + level, out + layout.offset[give_lo] * elem, span_bytes(give_lo, give_hi));
    ctx.wait(ctx.recv(partner, 1 + level, temp, keep_bytes));
    reduce_into(keep, keep, temp, keep_bytes / elem, dtype, op);
    ctx.wait_all();  // the half we gave away is overwritten in the doubling phase
    lo = keep_lo;
    hi = keep_hi;
  }
  // Now block vrank is complete here and nowhere else.
  if (op == ReduceOp::avg) finish_average(out + layout.offset[lo] * elem, layout.count[lo], dtype, n);

  // Doubling: swap what we have with the partner, doubling the span.
  for (int d = 1; d < p; d *= 2, ++level) {
    int partner = real_rank(vrank ^ d);
    int width = hi - lo;
    bool upper = (vrank & d) != 0;
    int other_lo = upper ? lo - width : hi, other_hi = upper ? lo : hi + width;
    ctx.send(partner, 1 + level, out + layout.offset[lo] * elem, span_bytes(lo, hi));
    ctx.wait(ctx.recv(partner, 1 + level, out + layout.offset[other_lo] * elem, span_bytes(other_lo, other_hi)));
    ctx.wait_all();
    lo = std::min(lo, other_lo);
    hi = std::max(hi, other_hi);
  }
  if (r < 2 * extra) ctx.send(r + 1, unfold_step, out, nbytes);
}

}  // namespace giant::ccl::detail
