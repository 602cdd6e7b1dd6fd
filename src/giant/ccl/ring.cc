// Ring and chain algorithms, pipelined in segments (OpContext::segment_bytes)
// so that a segment is reduced while the next ones are on the wire.
#include <algorithm>
#include <cstring>
#include <functional>

#include "giant/base/error.h"
#include "giant/ccl/algorithms.h"
#include "giant/ccl/reduce_kernels.h"
#include "giant/ccl/wire_compression.h"

namespace giant::ccl::detail {

BlockLayout BlockLayout::balanced(size_t total, int blocks) {
  BlockLayout l;
  size_t offset = 0;
  for (int b = 0; b < blocks; ++b) {
    size_t c = total / blocks + (static_cast<size_t>(b) < total % blocks ? 1 : 0);
    l.offset.push_back(offset);
    l.count.push_back(c);
    offset += c;
  }
  return l;
}

BlockLayout BlockLayout::from_counts(const std::vector<size_t>& counts) {
  BlockLayout l;
  size_t offset = 0;
  for (size_t c : counts) {
    l.offset.push_back(offset);
    l.count.push_back(c);
    offset += c;
  }
  return l;
}

size_t BlockLayout::max_count() const { return count.empty() ? 0 : *std::max_element(count.begin(), count.end()); }

namespace {

// Cuts every block into the same number of segments.
struct Segments {
  int per_block = 1;
  Segments(size_t max_block_bytes, size_t segment_bytes)
      : per_block(static_cast<int>(std::max<size_t>(1, (max_block_bytes + segment_bytes - 1) / segment_bytes))) {}
  size_t offset(size_t block_count, int k) const {
    size_t s = static_cast<size_t>(per_block);
    return block_count / s * k + std::min<size_t>(k, block_count % s);
  }
  size_t count(size_t block_count, int k) const {
    size_t s = static_cast<size_t>(per_block);
    return block_count / s + (static_cast<size_t>(k) < block_count % s ? 1 : 0);
  }
};

int mod(int a, int n) { return ((a % n) + n) % n; }

// Allgather around the ring: at step t this rank forwards block r-t and
// receives block r-t-1 from its left, straight into place. on_received(b, k),
// if given, sees each received segment once it has been forwarded.
class RingAllgather {
 public:
  RingAllgather(OpContext& ctx, char* out, const BlockLayout& layout, size_t elem, const Segments& seg,
                uint64_t step_base, std::function<void(int b, int k)> on_received = {})
      : ctx_(ctx), out_(out), layout_(layout), elem_(elem), seg_(seg), step_base_(step_base),
        n_(ctx.size()), r_(ctx.rank()), on_received_(std::move(on_received)) {}

  void post_receives() {
    int S = seg_.per_block;
    recvs_.resize(static_cast<size_t>(n_ - 1) * S);
    for (int t = 0; t < n_ - 1; ++t) {
      int b = mod(r_ - t - 1, n_);
      for (int k = 0; k < S; ++k) recvs_[t * S + k] = ctx_.recv(left(), key(t, k), at(b, k), bytes(b, k));
    }
  }
  // Starts step 0 for one segment of this rank's own block.
  void send_own_segment(int k) { ctx_.send(right(), key(0, k), at(r_, k), bytes(r_, k)); }

  void run() {
    int S = seg_.per_block;
    for (int t = 0; t < n_ - 1; ++t) {
      int b = mod(r_ - t - 1, n_);
      for (int k = 0; k < S; ++k) {
        ctx_.wait(recvs_[t * S + k]);
        if (t + 1 < n_ - 1) ctx_.send(right(), key(t + 1, k), at(b, k), bytes(b, k));
        if (on_received_) on_received_(b, k);
      }
    }
  }

 private:
  int left() const { return mod(r_ - 1, n_); }
  int right() const { return mod(r_ + 1, n_); }
  uint64_t key(int t, int k) const { return step_base_ + static_cast<uint64_t>(t) * seg_.per_block + k; }
  char* at(int b, int k) const { return out_ + (layout_.offset[b] + seg_.offset(layout_.count[b], k)) * elem_; }
  size_t bytes(int b, int k) const { return seg_.count(layout_.count[b], k) * elem_; }

  OpContext& ctx_;
  char* out_;
  const BlockLayout& layout_;
  size_t elem_;
  const Segments& seg_;
  uint64_t step_base_;
  int n_, r_;
  std::function<void(int, int)> on_received_;
  std::vector<Request*> recvs_;
};

// Reduce-scatter around the ring. At step s this rank sends block r-s-1 and
// receives block r-s-2, which it reduces with its own input; after n-1 steps
// block r is complete here. accumulate(b) is where block b is reduced into.
// on_owned(k, data, count) sees each finished segment of block r.
// With a wire type (f32 data only) every partial result travels encoded, from
// `encoded` (wire elements laid out like the data), and the receiver reduces
// straight from the encoded segment.
template <class Accumulate, class OnOwned>
void ring_reduce_scatter(OpContext& ctx, const char* in, Accumulate accumulate, const BlockLayout& layout,
                         DType dtype, ReduceOp op, const Segments& seg, OnOwned on_owned,
                         WireDType wire = WireDType::none, char* encoded = nullptr) {
  const int n = ctx.size(), r = ctx.rank(), S = seg.per_block;
  const int left = mod(r - 1, n), right = mod(r + 1, n);
  const size_t elem = wire == WireDType::none ? dtype_size(dtype) : wire_size(wire);  // on the wire
  const size_t data_elem = dtype_size(dtype);
  // Encodes `cnt` elements at element `off` of the data and sends them.
  auto send_encoded = [&](uint64_t step, const char* data, size_t off, size_t cnt) {
    auto* e = reinterpret_cast<uint16_t*>(encoded + off * elem);
    detail::encode(wire, reinterpret_cast<const float*>(data), e, cnt);
    ctx.send(right, step, e, cnt * elem);
  };
  // Two slots of temporary space, alternating by step. Segment k always lands
  // at the same place in a slot, whatever the size of its block, so posting
  // step s+2's segment k never overlaps step s's segments still unread.
  const size_t stride = seg.count(layout.max_count(), 0) * elem;
  const size_t slot_bytes = std::max<size_t>(stride * S, 1);
  char* temp[2] = {ctx.scratch(0, 2 * slot_bytes), nullptr};
  temp[1] = temp[0] + slot_bytes;
  auto recv_block = [&](int s) { return mod(r - s - 2, n); };
  auto key = [&](int s, int k) { return static_cast<uint64_t>(s) * S + k; };
  std::vector<Request*> recvs(static_cast<size_t>(n - 1) * S);
  auto post_recv = [&](int s, int k) {
    int b = recv_block(s);
    recvs[s * S + k] = ctx.recv(left, key(s, k), temp[s % 2] + k * stride, seg.count(layout.count[b], k) * elem);
  };
  for (int s = 0; s < std::min(2, n - 1); ++s) {
    for (int k = 0; k < S; ++k) post_recv(s, k);
  }
  int first = mod(r - 1, n);
  for (int k = 0; k < S; ++k) {
    size_t off = layout.offset[first] + seg.offset(layout.count[first], k);
    size_t cnt = seg.count(layout.count[first], k);
    if (wire != WireDType::none) send_encoded(key(0, k), in + off * data_elem, off, cnt);
    else ctx.send(right, key(0, k), in + off * elem, cnt * elem);
  }
  for (int s = 0; s < n - 1; ++s) {
    int b = recv_block(s);
    for (int k = 0; k < S; ++k) {
      ctx.wait(recvs[s * S + k]);
      size_t within = seg.offset(layout.count[b], k);
      size_t cnt = seg.count(layout.count[b], k);
      char* dst = accumulate(b) + within * data_elem;
      const char* mine = in + (layout.offset[b] + within) * data_elem;
      const char* got = temp[s % 2] + k * stride;
      if (wire != WireDType::none) {
        decode_reduce(wire, reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(mine),
                      reinterpret_cast<const uint16_t*>(got), cnt, op);
      } else {
        reduce_into(dst, mine, got, cnt, dtype, op);
      }
      if (s + 1 < n - 1) {
        if (wire != WireDType::none) send_encoded(key(s + 1, k), dst, layout.offset[b] + within, cnt);
        else ctx.send(right, key(s + 1, k), dst, cnt * elem);
      } else {
        on_owned(k, dst, cnt);
      }
      if (s + 2 < n - 1) post_recv(s + 2, k);
    }
  }
}

bool overlaps(const char* a, size_t a_bytes, const char* b, size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

void allreduce_ring(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op,
                    WireDType wire) {
  GIANT_CHECK(wire == WireDType::none || dtype == DType::f32, "allreduce: wire compression (",
              wire_dtype_name(wire), ") needs f32 data, got ", dtype_name(dtype));
  const int n = ctx.size(), r = ctx.rank();
  const size_t elem = dtype_size(dtype);
  const size_t wire_elem = wire == WireDType::none ? elem : wire_size(wire);
  BlockLayout layout = BlockLayout::balanced(count, n);
  Segments seg(layout.max_count() * wire_elem, ctx.segment_bytes(layout.max_count() * wire_elem, 2 * (n - 1)));
  // Compressed: the reduce-scatter sends from the first half of this buffer,
  // the allgather receives into and forwards from the second, and each
  // received segment is decoded into the output.
  char* rs_encoded = nullptr;
  char* ag_encoded = nullptr;
  std::function<void(int, int)> decode_segment;
  if (wire != WireDType::none) {
    rs_encoded = ctx.scratch(2, std::max<size_t>(2 * count * wire_elem, 1));
    ag_encoded = rs_encoded + count * wire_elem;
    decode_segment = [&](int b, int k) {
      size_t off = layout.offset[b] + seg.offset(layout.count[b], k);
      decode(wire, reinterpret_cast<const uint16_t*>(ag_encoded + off * wire_elem),
             reinterpret_cast<float*>(out + off * elem), seg.count(layout.count[b], k));
    };
  }
  // Both phases are pipelined together: a segment of the owned block starts
  // around the ring as soon as it is reduced.
  RingAllgather gather(ctx, wire != WireDType::none ? ag_encoded : out, layout, wire_elem, seg,
                       static_cast<uint64_t>(n - 1) * seg.per_block, decode_segment);
  gather.post_receives();
  ring_reduce_scatter(
      ctx, in, [&](int b) { return out + layout.offset[b] * elem; }, layout, dtype, op, seg,
      [&](int k, char* data, size_t cnt) {
        if (op == ReduceOp::avg) finish_average(data, cnt, dtype, n);
        if (wire != WireDType::none) {
          // The owner rounds its own copy too, so that every rank ends bitwise equal.
          size_t off = layout.offset[r] + seg.offset(layout.count[r], k);
          round_through(wire, reinterpret_cast<float*>(data), reinterpret_cast<uint16_t*>(ag_encoded + off * wire_elem),
                        cnt);
        }
        gather.send_own_segment(k);
      },
      wire, rs_encoded);
  gather.run();
}

void reduce_scatter_ring(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t elem = dtype_size(dtype);
  BlockLayout layout = BlockLayout::balanced(count * n, n);
  Segments seg(count * elem, ctx.segment_bytes(count * elem, n - 1));
  // Blocks other than ours pass through scratch; ours goes to the output
  // unless the output overlaps the input still being read.
  char* partials = ctx.scratch(1, count * elem * n);
  bool direct = !overlaps(out, count * elem, in, count * elem * n);
  char* own = direct ? out : partials + layout.offset[r] * elem;
  ring_reduce_scatter(
      ctx, in, [&](int b) { return b == r ? own : partials + layout.offset[b] * elem; }, layout, dtype, op, seg,
      [&](int, char* data, size_t cnt) {
        if (op == ReduceOp::avg) finish_average(data, cnt, dtype, n);
      });
  ctx.wait_all();
  if (!direct) move_bytes(out, own, count * elem);
}

void allgather_ring(OpContext& ctx, const char* in, char* out, const BlockLayout& layout, size_t elem) {
  const int r = ctx.rank();
  char* mine = out + layout.offset[r] * elem;
  move_bytes(mine, in, layout.count[r] * elem);
  Segments seg(layout.max_count() * elem, ctx.segment_bytes(layout.max_count() * elem, ctx.size() - 1));
  RingAllgather gather(ctx, out, layout, elem, seg, 0);
  gather.post_receives();
  for (int k = 0; k < seg.per_block; ++k) gather.send_own_segment(k);
  gather.run();
}

void broadcast_chain(OpContext& ctx, const char* in, char* out, size_t nbytes, int root) {
  const int n = ctx.size(), r = ctx.rank();
  const int pos = mod(r - root, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  Segments seg(nbytes, ctx.segment_bytes(nbytes, n - 1));
  if (pos == 0) {
    for (int k = 0; k < seg.per_block; ++k) ctx.send(next, k, in + seg.offset(nbytes, k), seg.count(nbytes, k));
    move_bytes(out, in, nbytes);
    return;
  }
  std::vector<Request*> recvs;
  for (int k = 0; k < seg.per_block; ++k) {
    recvs.push_back(ctx.recv(prev, k, out + seg.offset(nbytes, k), seg.count(nbytes, k)));
  }
  for (int k = 0; k < seg.per_block; ++k) {
    ctx.wait(recvs[k]);
    if (pos < n - 1) ctx.send(next, k, out + seg.offset(nbytes, k), seg.count(nbytes, k));
  }
}

void reduce_chain(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op, int root) {
  const int n = ctx.size(), r = ctx.rank();
  const size_t elem = dtype_size(dtype), nbytes = count * elem;
  // The chain starts right after the root and ends at it.
  const int pos = mod(r - root - 1, n), next = mod(r + 1, n), prev = mod(r - 1, n);
  Segments seg(nbytes, ctx.segment_bytes(nbytes, n - 1));
  if (pos == 0) {
    for (int k = 0; k < seg.per_block; ++k) {
      ctx.send(next, k, in + seg.offset(count, k) * elem, seg.count(count, k) * elem);
    }
    return;
  }
  const bool is_root = pos == n - 1;
  char* temp = ctx.scratch(0, nbytes);
  char* acc = is_root ? out : ctx.scratch(1, nbytes);
  std::vector<Request*> recvs;
  for (int k = 0; k < seg.per_block; ++k) {
    recvs.push_back(ctx.recv(prev, k, temp + seg.offset(count, k) * elem, seg.count(count, k) * elem));
  }
  for (int k = 0; k < seg.per_block; ++k) {
    ctx.wait(recvs[k]);
    size_t off = seg.offset(count, k) * elem, cnt = seg.count(count, k);
    reduce_into(acc + off, in + off, temp + off, cnt, dtype, op);
    if (!is_root) ctx.send(next, k, acc + off, cnt * elem);
    else if (op == ReduceOp::avg) finish_average(acc + off, cnt, dtype, n);
  }
}

}  // namespace giant::ccl::detail
