// Collective algorithms (internal). Each runs on the engine thread inside an
// OpContext and returns when this rank's part is done. Buffers are raw
// bytes; counts are elements of `dtype`.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

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

// Ring reduce-scatter then allgather, pipelined in segments; the owner of
// each block computes it and everyone copies it, so all ranks agree bitwise.
void allreduce_ring(OpContext& ctx, const char* in, char* out, size_t count, DType dtype, ReduceOp op);
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

}  // namespace giant::ccl::detail
