// Collective algorithms (internal). Each runs on the engine thread inside an
// OpContext and returns when this rank's part is done. Buffers are raw
// bytes; counts are elements of `dtype`.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "giant/ccl/collectives.h"
#include "giant/ccl/engine.h"
#include "giant/ccl/types.h"

namespace giant::ccl::detail {

// memmove that accepts empty (possibly null) ranges and skips copying onto itself.
inline void move_bytes(void* dst, const void* src, size_t nbytes) {
  if (nbytes > 0 && dst != src) std::memmove(dst, src, nbytes);
}

// Element offsets and counts of the blocks a buffer is cut into, one per rank.
struct BlockLayout {
  std::vector<size_t> offset;
  std::vector<size_t> count;
  static BlockLayout balanced(size_t total, int blocks);
  static BlockLayout from_counts(const std::vector<size_t>& counts);
  size_t max_count() const;
};

// Blocks made of several stretches of one buffer: block b is the
// concatenation of spans[b] (element offsets and counts). A BlockLayout is
// the case of one span per block.
struct SpanLayout {
  struct Span {
    size_t offset;
    size_t count;
  };
  std::vector<std::vector<Span>> spans;
  static SpanLayout from(const BlockLayout& layout);
  size_t count(int block) const;
  size_t max_count() const;
};

// Ring reduce-scatter then allgather, pipelined in segments; the owner of
// each block computes it and everyone copies it, so all ranks agree bitwise.
// wire (f32 data only): partial sums and the finished blocks travel in that
// type (half the bytes) and are reduced in f32; the owner rounds its block
// through the wire type as well. Uses scratch slots 0 and 2.
void allreduce_ring(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op,
                    WireDType wire = WireDType::none);
// Recursive halving then doubling (Rabenseifner), folding extra ranks when
// the size is not a power of two. Fewer steps: better for small messages.
void allreduce_halving_doubling(OpContext& ctx, const char* in, char* out, size_t count, DType dtype,
                                ReduceOp op);
void reduce_scatter_ring(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op);
// out holds every rank's block (layout in elements); this rank's input goes to
// its own block first.
void allgather_ring(OpContext& ctx, const char* in, char* out, const BlockLayout& layout, size_t elem_size);
// Pipelined chain from the root.
void broadcast_chain(OpContext& ctx, const char* in, char* out, size_t nbytes, int root);
// Pipelined chain ending at the root.
void reduce_chain(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op, int root);
// Every pair exchanges directly; sizes and offsets in bytes.
void alltoallv_pairwise(OpContext& ctx, const char* in, const std::vector<size_t>& send_bytes, char* out,
                        const std::vector<size_t>& recv_bytes);
void gather_direct(OpContext& ctx, const char* in, char* out, size_t nbytes, int root);
void scatter_direct(OpContext& ctx, const char* in, char* out, size_t nbytes, int root);
// Dissemination barrier: ceil(log2 n) rounds of empty messages.
void barrier_dissemination(OpContext& ctx);

// In shared memory (shm_algorithms.cc), between the ranks of this host
// (ctx.shm() set; blocks are indexed by local rank). reduce_scatter_shm
// reduces block `local rank` of `layout` (stretches of in) into out, a
// contiguous buffer, dividing for avg only if finish_avg. allgather_shm
// copies every local rank's contiguous input into its block of out.
void allreduce_shm(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op);
// In place on shared buffers (shared_buffer.h): buffers[q] is local rank q's
// buffer mapped here, the data at `offset` bytes in each.
void allreduce_shared_buffers(OpContext& ctx, const std::vector<char*>& buffers, size_t offset, size_t count,
                              DType dtype, ReduceOp op);
// Block q (count elements) of each buffer at offset + q * count elements:
// reduce_scatter leaves the reduction of block me in this rank's block me;
// allgather copies every peer's block q from its buffer into this one's.
void reduce_scatter_shared_buffers(OpContext& ctx, const std::vector<char*>& buffers, size_t offset, size_t count,
                                   DType dtype, ReduceOp op);
void allgather_shared_buffers(OpContext& ctx, const std::vector<char*>& buffers, size_t offset, size_t count,
                              size_t elem);
void reduce_scatter_shm(OpContext& ctx, const char* in, const SpanLayout& layout, char* out, DType dtype,
                        ReduceOp op, bool finish_avg);
void allgather_shm(OpContext& ctx, const char* in, char* out, const SpanLayout& layout, size_t elem);
void broadcast_shm(OpContext& ctx, const char* in, char* out, size_t nbytes, int root);
// Blocks of `block` bytes: alltoall sends in's block q to local rank q;
// gather collects every input at the root; scatter hands out the root's.
void alltoall_shm(OpContext& ctx, const char* in, char* out, size_t block);
void gather_shm(OpContext& ctx, const char* in, char* out, size_t block, int root);
void scatter_shm(OpContext& ctx, const char* in, char* out, size_t block, int root);
void barrier_shm(OpContext& ctx);
// Reduce-scatter inside each host over shm, allreduce of each block across
// hosts over a ring of the ranks with the same local rank (cross_host_ring,
// communicator ranks in host order), allgather inside each host.
void allreduce_hierarchical(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op,
                            const std::vector<int>& cross_host_ring, WireDType wire = WireDType::none);
// Two levels for the other two: reduce-scatter inside the host (each local
// rank gets its blocks of every host), then across hosts; allgather across
// hosts, then inside. `hosts` lists the communicator's ranks host by host,
// in local rank order; cross_host_ring as above.
void reduce_scatter_hierarchical(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op,
                                 const std::vector<std::vector<int>>& hosts, const std::vector<int>& cross_host_ring);
void allgather_hierarchical(OpContext& ctx, const char* in, char* out, size_t count, size_t elem,
                            const std::vector<std::vector<int>>& hosts, const std::vector<int>& cross_host_ring);

}  // namespace giant::ccl::detail
