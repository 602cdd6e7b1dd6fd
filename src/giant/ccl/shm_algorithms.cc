// Collectives in shared memory between the ranks of one host, chunked
// through the two slots of each rank's segment (see shm_group.h), and the
// hierarchical allreduce built on them.
//
// Per step s (one chunk): a rank waits until every peer has finished with
// step s-2 (which used the same slot), fills its slot, publishes posted=s,
// reads the peers' slots in place, and publishes consumed=s. Every reduced
// block is computed by exactly one rank and copied by the others, so results
// are bitwise identical on every rank.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "giant/base/error.h"
#include "giant/ccl/algorithms.h"
#include "giant/ccl/reduce_kernels.h"
#include "giant/ccl/shm_group.h"

namespace giant::ccl::detail {
namespace {

// Below this an allreduce is done in one step, every rank reducing the whole
// buffer itself: one synchronisation instead of three.
constexpr size_t kOneStepMaxBytes = 32 << 10;
// Reductions of several sources go piece by piece, so the destination stays
// in L1 while each source is folded in.
constexpr size_t kFoldPieceBytes = 16 << 10;

class ShmSteps {
 public:
  explicit ShmSteps(OpContext& ctx)
      : g(*ctx.shm()), me(g.local_rank()), n(g.local_size()), ctx_(ctx),
        fingerprint_(ShmGroup::fingerprint(ctx.sequence(), ctx.desc())),
        idle_([&ctx](int local) { ctx.shm_idle(local); }) {}

  uint32_t take(size_t steps) { return g.take_steps(static_cast<uint32_t>(steps)); }
  // Before filling this rank's slot for step s: step s-2 used it, and every
  // peer must be done reading it. Once per step (post claims too).
  void claim(uint32_t s) {
    if (claimed_ == s) return;
    g.wait_all(ShmGroup::consumed, s - 2, idle_);
    claimed_ = s;
  }
  // The label of step s takes the place of step s-2's, which a peer may
  // still be checking (one that posts nothing, e.g. a gather's root, leaves
  // its peers free to run ahead): claim first, even with no slot to fill.
  void post(uint32_t s) {
    claim(s);
    g.label(s, ctx_.sequence(), ctx_.desc(), fingerprint_);
    g.publish(ShmGroup::posted, s);
  }
  void wait_posted(uint32_t s) {
    for (int q = 0; q < n; ++q) {
      if (q != me) wait_posted_by(q, s);
    }
  }
  // Also checks that the peer runs the same operation as this rank.
  void wait_posted_by(int local, uint32_t s) {
    g.wait_for(local, ShmGroup::posted, s, idle_);
    if (g.label_matches(local, s, fingerprint_)) return;
    auto [sequence, desc] = g.label_of(local, s);
    if (sequence != ctx_.sequence() || desc != ctx_.desc()) {
      int peer = g.global_rank(local);
      std::string name = "rank " + std::to_string(peer);
      throw CommError(peer, "operation mismatch with " + name + " on operation #" + std::to_string(ctx_.sequence()) +
                                ": rank " + std::to_string(ctx_.rank()) + " issued " + ctx_.desc().describe() + ", " +
                                name + " issued " + desc.describe() + " as operation #" + std::to_string(sequence));
    }
  }
  void mark_reduced(uint32_t s) { g.publish(ShmGroup::reduced, s); }
  void wait_reduced(uint32_t s) { g.wait_all(ShmGroup::reduced, s, idle_); }
  void release(uint32_t s) { g.publish(ShmGroup::consumed, s); }
  void wait_released(uint32_t s) { g.wait_all(ShmGroup::consumed, s, idle_); }
  char* slot(int local, uint32_t s) const { return g.slot(local, s); }

  ShmGroup& g;
  const int me;
  const int n;

 private:
  OpContext& ctx_;
  uint64_t fingerprint_;
  std::function<void(int)> idle_;
  uint64_t claimed_ = UINT64_MAX;  // the step last claimed (never a uint32_t step at first)
};

size_t chunks_of(size_t count, size_t per_chunk) { return count == 0 ? 0 : (count + per_chunk - 1) / per_chunk; }

// Calls step(s, base, len) for each piece [base, base + len) of [0, total)
// (bytes or elements), on consecutive steps taken from the group.
template <class Step>
void for_each_piece(ShmSteps& st, size_t total, size_t piece, Step step) {
  const size_t chunks = chunks_of(total, piece);
  if (chunks == 0) return;
  const uint32_t first = st.take(chunks);
  for (size_t c = 0; c < chunks; ++c) step(first + static_cast<uint32_t>(c), c * piece, std::min(piece, total - c * piece));
}

// The sources of a fold, on the stack for any host with up to kMaxLocal ranks.
class Sources {
 public:
  static constexpr size_t kMaxLocal = 64;
  void push(const char* p) {
    if (count_ < kMaxLocal) fixed_[count_] = p;
    else more_.push_back(p);
    ++count_;
  }
  size_t size() const { return count_; }
  const char* operator[](size_t i) const { return i < kMaxLocal ? fixed_[i] : more_[i - kMaxLocal]; }

 private:
  const char* fixed_[kMaxLocal];
  std::vector<const char*> more_;
  size_t count_ = 0;
};

// dst = srcs[0] op srcs[1] op ... (in that order); dst may be srcs[0].
// With `average` (and op avg) each piece is then divided by the number of
// sources while it is still in cache: the same bits as a second pass over
// dst, without reading it from memory again.
void fold(char* dst, const Sources& srcs, size_t count, DType dtype, ReduceOp op, bool average) {
  const size_t elem = dtype_size(dtype);
  const int n = static_cast<int>(srcs.size());
  const bool divide = average && op == ReduceOp::avg;
  if (n == 1) {
    move_bytes(dst, srcs[0], count * elem);
    if (divide) finish_average(dst, count, dtype, 1);
    return;
  }
  const size_t piece = std::max<size_t>(1, kFoldPieceBytes / elem);
  for (size_t off = 0; off < count; off += piece) {
    size_t c = std::min(piece, count - off);
    size_t at = off * elem;
    reduce_into(dst + at, srcs[0] + at, srcs[1] + at, c, dtype, op);
    for (size_t k = 2; k < srcs.size(); ++k) reduce_into(dst + at, dst + at, srcs[k] + at, c, dtype, op);
    if (divide) finish_average(dst + at, c, dtype, n);
  }
}

void allreduce_one_step(ShmSteps& st, const char* in, char* out, size_t count, DType dtype, ReduceOp op) {
  const size_t nbytes = count * dtype_size(dtype);
  uint32_t s = st.take(1);
  st.claim(s);
  std::memcpy(st.slot(st.me, s), in, nbytes);
  st.post(s);
  st.wait_posted(s);
  // Every rank folds all inputs in local rank order: the same bits everywhere.
  Sources srcs;
  for (int q = 0; q < st.n; ++q) srcs.push(st.slot(q, s));
  fold(out, srcs, count, dtype, op, false);
  st.release(s);  // out is this rank's own: divide after the peers may go on
  if (op == ReduceOp::avg) finish_average(out, count, dtype, st.n);
}

// Reduces [at, at + count bytes) of every local rank's view into this rank's
// own, its input first and then the peers' in order.
template <class View>
void reduce_into_own_view(ShmSteps& st, View view, size_t at, size_t count, DType dtype, ReduceOp op) {
  char* mine = view(st.me) + at;
  Sources srcs;
  srcs.push(mine);
  for (int q = 0; q < st.n; ++q) {
    if (q != st.me) srcs.push(view(q) + at);
  }
  fold(mine, srcs, count, dtype, op, true);
}

// One chunk of an allreduce whose inputs lie in place at view(q) for every
// local rank q (q's slot, or q's shared buffer): this rank reduces its block
// into its own view, and once every block is reduced copies each into out
// (move_bytes skips its own when out is its view).
template <class View>
void reduce_and_share_chunk(ShmSteps& st, uint32_t s, View view, char* out, size_t cnt, DType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  const BlockLayout blocks = BlockLayout::balanced(cnt, st.n);
  st.wait_posted(s);
  reduce_into_own_view(st, view, blocks.offset[st.me] * elem, blocks.count[st.me], dtype, op);
  st.mark_reduced(s);
  st.wait_reduced(s);
  for (int q = 0; q < st.n; ++q) {
    size_t off = blocks.offset[q] * elem;
    move_bytes(out + off, view(q) + off, blocks.count[q] * elem);
  }
  st.release(s);
}

}  // namespace

void allreduce_shm(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op) {
  ShmSteps st(ctx);
  const size_t elem = dtype_size(dtype);
  if (count == 0) return;
  if (count * elem <= std::min(kOneStepMaxBytes, st.g.slot_bytes())) {
    allreduce_one_step(st, in, out, count, dtype, op);
    return;
  }
  // Each chunk goes through the slots: copied in, reduced there, copied out.
  const size_t per_chunk = std::max<size_t>(1, st.g.slot_bytes() / elem);
  for_each_piece(st, count, per_chunk, [&](uint32_t s, size_t base, size_t cnt) {
    st.claim(s);
    std::memcpy(st.slot(st.me, s), in + base * elem, cnt * elem);
    st.post(s);
    reduce_and_share_chunk(st, s, [&](int q) { return st.slot(q, s); }, out + base * elem, cnt, dtype, op);
  });
}

void allreduce_shared_buffers(OpContext& ctx, const std::vector<char*>& buffers, size_t offset, size_t count,
                              DType dtype, ReduceOp op) {
  ShmSteps st(ctx);
  const size_t elem = dtype_size(dtype);
  if (count == 0) return;
  // The chunks of allreduce_shm without the copy into the slots: the inputs
  // already lie in the buffers every rank maps.
  const size_t per_chunk = std::max<size_t>(1, st.g.slot_bytes() / elem);
  uint32_t last = 0;
  for_each_piece(st, count, per_chunk, [&](uint32_t s, size_t first, size_t cnt) {
    const size_t base = offset + first * elem;
    st.post(s);
    reduce_and_share_chunk(st, s, [&](int q) { return buffers[q] + base; }, buffers[st.me] + base, cnt, dtype, op);
    last = s;
  });
  // Peers copy from this rank's buffer until their last step: only then may
  // its owner write to it again.
  st.wait_released(last);
}

void reduce_scatter_shared_buffers(OpContext& ctx, const std::vector<char*>& buffers, size_t offset, size_t count,
                                   DType dtype, ReduceOp op) {
  ShmSteps st(ctx);
  if (count == 0) return;
  // No slot carries data, so one step: every input is in place from the
  // start, and a rank writes only its own block of its own buffer, which no
  // peer reads.
  const uint32_t s = st.take(1);
  const size_t at = offset + static_cast<size_t>(st.me) * count * dtype_size(dtype);
  st.post(s);
  st.wait_posted(s);
  reduce_into_own_view(st, [&](int q) { return buffers[q]; }, at, count, dtype, op);
  st.release(s);
  // Peers read their blocks of this rank's buffer until they release.
  st.wait_released(s);
}

void allgather_shared_buffers(OpContext& ctx, const std::vector<char*>& buffers, size_t offset, size_t count,
                              size_t elem) {
  ShmSteps st(ctx);
  if (count == 0) return;
  // Each rank copies the peers' blocks from their buffers into its own; it
  // writes only blocks that their owners never read from it.
  const uint32_t s = st.take(1);
  st.post(s);
  st.wait_posted(s);
  for (int q = 0; q < st.n; ++q) {
    if (q == st.me) continue;
    const size_t at = offset + static_cast<size_t>(q) * count * elem;
    move_bytes(buffers[st.me] + at, buffers[q] + at, count * elem);
  }
  st.release(s);
  // This rank's block may change once the call returns: peers first.
  st.wait_released(s);
}

SpanLayout SpanLayout::from(const BlockLayout& layout) {
  SpanLayout l;
  for (size_t b = 0; b < layout.count.size(); ++b) l.spans.push_back({{layout.offset[b], layout.count[b]}});
  return l;
}

size_t SpanLayout::count(int block) const {
  size_t total = 0;
  for (const Span& s : spans[block]) total += s.count;
  return total;
}

size_t SpanLayout::max_count() const {
  size_t most = 0;
  for (int b = 0; b < static_cast<int>(spans.size()); ++b) most = std::max(most, count(b));
  return most;
}

namespace {

// Calls f(buffer_offset, position, count) for each stretch of elements
// [start, start + len) of the concatenation of spans, position counted from start.
template <class F>
void for_each_stretch(const std::vector<SpanLayout::Span>& spans, size_t start, size_t len, F f) {
  size_t pos = 0, done = 0;
  for (const auto& span : spans) {
    if (len == 0) break;
    if (start < pos + span.count) {
      size_t from = start - pos, n = std::min(len, span.count - from);
      f(span.offset + from, done, n);
      start += n;
      len -= n;
      done += n;
    }
    pos += span.count;
  }
}

}  // namespace

void reduce_scatter_shm(OpContext& ctx, const char* in, const SpanLayout& layout, char* out, DType dtype,
                        ReduceOp op, bool finish_avg) {
  ShmSteps st(ctx);
  const size_t elem = dtype_size(dtype);
  // A chunk carries the same stretch of every block.
  const size_t piece = std::max<size_t>(1, st.g.slot_bytes() / elem / static_cast<size_t>(st.n));
  const size_t mine = layout.count(st.me);
  for_each_piece(st, layout.max_count(), piece, [&](uint32_t s, size_t base, size_t) {
    st.claim(s);
    for (int b = 0; b < st.n; ++b) {
      char* dst = st.slot(st.me, s) + b * piece * elem;
      for_each_stretch(layout.spans[b], base, piece, [&](size_t offset, size_t at, size_t n) {
        std::memcpy(dst + at * elem, in + offset * elem, n * elem);
      });
    }
    st.post(s);
    st.wait_posted(s);
    if (base < mine) {
      Sources srcs;
      for (int q = 0; q < st.n; ++q) srcs.push(st.slot(q, s) + st.me * piece * elem);
      size_t cnt = std::min(piece, mine - base);
      fold(out + base * elem, srcs, cnt, dtype, op, finish_avg);
    }
    st.release(s);
  });
}

void allgather_shm(OpContext& ctx, const char* in, char* out, const SpanLayout& layout, size_t elem) {
  ShmSteps st(ctx);
  const size_t piece = std::max<size_t>(1, st.g.slot_bytes() / elem);
  const size_t mine = layout.count(st.me);
  for_each_piece(st, layout.max_count(), piece, [&](uint32_t s, size_t base, size_t) {
    st.claim(s);
    if (base < mine) std::memcpy(st.slot(st.me, s), in + base * elem, std::min(piece, mine - base) * elem);
    st.post(s);
    st.wait_posted(s);
    for (int q = 0; q < st.n; ++q) {
      const char* src = st.slot(q, s);
      for_each_stretch(layout.spans[q], base, piece, [&](size_t offset, size_t at, size_t n) {
        move_bytes(out + offset * elem, src + at * elem, n * elem);
      });
    }
    st.release(s);
  });
}

void broadcast_shm(OpContext& ctx, const char* in, char* out, size_t nbytes, int root) {
  ShmSteps st(ctx);
  for_each_piece(st, nbytes, st.g.slot_bytes(), [&](uint32_t s, size_t base, size_t len) {
    if (st.me == root) {
      st.claim(s);
      std::memcpy(st.slot(st.me, s), in + base, len);
      st.post(s);
      move_bytes(out + base, in + base, len);
    } else {
      st.wait_posted_by(root, s);
      std::memcpy(out + base, st.slot(root, s), len);
    }
    st.release(s);
  });
}

void alltoall_shm(OpContext& ctx, const char* in, char* out, size_t block) {
  ShmSteps st(ctx);
  // A chunk carries the same stretch of every destination's block.
  const size_t piece = std::max<size_t>(1, st.g.slot_bytes() / static_cast<size_t>(st.n));
  for_each_piece(st, block, piece, [&](uint32_t s, size_t base, size_t len) {
    st.claim(s);
    for (int b = 0; b < st.n; ++b) {
      if (b != st.me) std::memcpy(st.slot(st.me, s) + b * piece, in + b * block + base, len);
    }
    st.post(s);
    move_bytes(out + st.me * block + base, in + st.me * block + base, len);
    st.wait_posted(s);
    for (int q = 0; q < st.n; ++q) {
      if (q != st.me) std::memcpy(out + q * block + base, st.slot(q, s) + st.me * piece, len);
    }
    st.release(s);
  });
}

void gather_shm(OpContext& ctx, const char* in, char* out, size_t block, int root) {
  ShmSteps st(ctx);
  for_each_piece(st, block, st.g.slot_bytes(), [&](uint32_t s, size_t base, size_t len) {
    if (st.me == root) {
      move_bytes(out + root * block + base, in + base, len);
      st.wait_posted(s);
      for (int q = 0; q < st.n; ++q) {
        if (q != root) std::memcpy(out + q * block + base, st.slot(q, s), len);
      }
    } else {
      st.claim(s);  // the root is done with step s-2 in this slot
      std::memcpy(st.slot(st.me, s), in + base, len);
      st.post(s);
    }
    st.release(s);
  });
}

void scatter_shm(OpContext& ctx, const char* in, char* out, size_t block, int root) {
  ShmSteps st(ctx);
  const size_t piece = std::max<size_t>(1, st.g.slot_bytes() / static_cast<size_t>(st.n));
  for_each_piece(st, block, piece, [&](uint32_t s, size_t base, size_t len) {
    if (st.me == root) {
      st.claim(s);
      for (int b = 0; b < st.n; ++b) {
        if (b != root) std::memcpy(st.slot(root, s) + b * piece, in + b * block + base, len);
      }
      st.post(s);
      move_bytes(out + base, in + root * block + base, len);
    } else {
      st.wait_posted_by(root, s);
      std::memcpy(out + base, st.slot(root, s) + st.me * piece, len);
    }
    st.release(s);
  });
}

void barrier_shm(OpContext& ctx) {
  ShmSteps st(ctx);
  uint32_t s = st.take(1);
  st.post(s);
  st.wait_posted(s);
  st.release(s);
}

void allreduce_hierarchical(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op,
                            const std::vector<int>& cross_host_ring, WireDType wire) {
  ShmGroup& g = *ctx.shm();
  const size_t elem = dtype_size(dtype);
  const BlockLayout layout = BlockLayout::balanced(count, g.local_size());
  const ReduceOp partial = op == ReduceOp::avg ? ReduceOp::sum : op;
  char* mine = out + layout.offset[g.local_rank()] * elem;
  const size_t cnt = layout.count[g.local_rank()];
  // 1. Inside the host: this rank reduces its block of every local input.
  reduce_scatter_shm(ctx, in, SpanLayout::from(layout), mine, dtype, partial, false);
  // 2. Across hosts: one ring per local rank, over that block only.
  if (cross_host_ring.size() > 1) {
    OpContext::Scope scope(ctx, cross_host_ring, 0);
    allreduce_ring(ctx, mine, mine, cnt, dtype, partial, wire);
    // The ring returns once everything has arrived, but its last sends may
    // still be reading `mine`: finish them before the average changes it.
    ctx.wait_all();
  }
  // Every counterpart divides the same sum: the same bits everywhere.
  if (op == ReduceOp::avg) finish_average(mine, cnt, dtype, ctx.size());
  // 3. Inside the host again: everyone copies every block.
  allgather_shm(ctx, mine, out, SpanLayout::from(layout), elem);
}

namespace {

// Local rank l's block: the blocks of the ranks with local rank l, host by host.
SpanLayout blocks_by_local_rank(const std::vector<std::vector<int>>& hosts, size_t count) {
  SpanLayout layout;
  layout.spans.resize(hosts.front().size());
  for (size_t l = 0; l < layout.spans.size(); ++l) {
    for (const auto& members : hosts) layout.spans[l].push_back({static_cast<size_t>(members[l]) * count, count});
  }
  return layout;
}

}  // namespace

void reduce_scatter_hierarchical(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op,
                                 const std::vector<std::vector<int>>& hosts, const std::vector<int>& cross_host_ring) {
  const size_t elem = dtype_size(dtype);
  const size_t num_hosts = hosts.size();
  const ReduceOp partial = op == ReduceOp::avg ? ReduceOp::sum : op;
  // 1. Inside the host: this rank reduces the blocks of its counterparts on
  //    every host, in host order.
  char* partials = ctx.scratch(2, num_hosts * count * elem);
  reduce_scatter_shm(ctx, in, blocks_by_local_rank(hosts, count), partials, dtype, partial, false);
  // 2. Across hosts: the ring of counterparts reduces block h on host h.
  if (num_hosts > 1) {
    OpContext::Scope scope(ctx, cross_host_ring, 0);
    reduce_scatter_ring(ctx, partials, out, count, dtype, partial);
  } else {
    move_bytes(out, partials, count * elem);
  }
  if (op == ReduceOp::avg) finish_average(out, count, dtype, ctx.size());
}

void allgather_hierarchical(OpContext& ctx, const char* in, char* out, size_t count, size_t elem,
                            const std::vector<std::vector<int>>& hosts, const std::vector<int>& cross_host_ring) {
  const size_t num_hosts = hosts.size();
  // 1. Across hosts: gather the blocks of this rank's counterparts, in host order.
  char* gathered = ctx.scratch(2, num_hosts * count * elem);
  if (num_hosts > 1) {
    OpContext::Scope scope(ctx, cross_host_ring, 0);
    allgather_ring(ctx, in, gathered, BlockLayout::balanced(num_hosts * count, static_cast<int>(num_hosts)), elem);
  } else {
    move_bytes(gathered, in, count * elem);
  }
  // 2. Inside the host: every local rank's gathered blocks go to their places.
  allgather_shm(ctx, gathered, out, blocks_by_local_rank(hosts, count), elem);
}

}  // namespace giant::ccl::detail
