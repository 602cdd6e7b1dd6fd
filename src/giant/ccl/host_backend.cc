// The host backend: collectives on host memory, run by the communicator's
// engine over TCP between hosts and shared memory inside one. Picks the
// algorithm (cost_model.h) and describes each call for cross-rank matching.
// World size 1 is done right here.
#include "giant/ccl/host_backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "giant/base/error.h"
#include "giant/ccl/algorithms.h"
#include "giant/ccl/cost_model.h"
#include "giant/ccl/engine.h"

namespace giant::ccl {

using detail::OpContext;
using detail::OpDescriptor;
using detail::OpKind;

namespace {

OpDescriptor describe(OpKind kind, DType dtype, uint64_t count, int root = -1, uint8_t op = 0,
                      uint64_t aux = 0, Algorithm algorithm = Algorithm::automatic) {
  OpDescriptor d;
  d.kind = kind;
  d.dtype = static_cast<uint8_t>(dtype);
  d.count = count;
  d.root = root;
  d.op = op;
  d.aux = aux;
  d.algorithm = static_cast<uint8_t>(algorithm);
  return d;
}

uint64_t hash_counts(const std::vector<size_t>& counts) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
  for (size_t c : counts) {
    for (int i = 0; i < 8; ++i) {
      h ^= (c >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

Work submit(Communicator& comm, const OpDescriptor& desc, const OpOptions& options,
            std::function<void(OpContext&)> body) {
  auto op = std::make_unique<detail::CollectiveOp>();
  op->desc = desc;
  op->timeout = options.timeout;
  op->priority = options.priority;
  op->segment_bytes = options.segment_bytes;
  op->body = std::move(body);
  return comm.engine().submit(std::move(op));
}

// A small shared-memory operation runs on this thread when nothing is ahead
// of it (Engine::try_inline); otherwise it is submitted like any other.
template <class Body>
Work run_or_submit(Communicator& comm, const OpDescriptor& desc, const OpOptions& options, bool small, Body body) {
  if (small) {
    Work work;
    if (comm.engine().try_inline(desc, options.timeout, detail::InlineBody(body), &work)) return work;
  }
  return submit(comm, desc, options, std::move(body));
}

// Below this, shared-memory operations run inline on the issuing thread.
constexpr size_t kInlineMaxBytes = 32 << 10;

// An operation in place on a shared buffer reads the peers' buffers
// directly. Its descriptor names the buffer and offset (aux), so every rank
// must do the same.
struct SharedStretch {
  std::vector<char*> buffers;  // every local rank's buffer; empty: not on one
  size_t offset = 0;           // of the stretch, in bytes
  uint64_t aux = 0;
};
SharedStretch find_shared_stretch(Communicator& comm, Algorithm algorithm, bool in_place, const void* data,
                                  size_t nbytes) {
  SharedStretch found;
  detail::BufferRegistry::Entry entry;
  if (algorithm == Algorithm::shm && in_place && nbytes > kInlineMaxBytes &&
      comm.engine().shm()->buffers()->find(data, nbytes, comm.rank(), &entry, &found.offset)) {
    found.buffers = std::move(entry.views);
    found.aux = (static_cast<uint64_t>(entry.id + 1) << 40) | found.offset;
  }
  return found;
}

// Where this rank's block of a buffer of equal blocks starts: an in-place
// reduce-scatter's output, an in-place allgather's input.
const char* rank_block(const void* whole, int rank, size_t block_bytes) {
  return static_cast<const char*>(whole) + static_cast<size_t>(rank) * block_bytes;
}

void copy_if_distinct(void* out, const void* in, size_t nbytes) { detail::move_bytes(out, in, nbytes); }

void gather_blocks(OpContext& ctx, Algorithm algorithm, const void* input, void* output,
                   const detail::BlockLayout& layout, size_t elem) {
  auto in = static_cast<const char*>(input);
  auto out = static_cast<char*>(output);
  if (algorithm == Algorithm::shm) {
    // allgather_shm takes this rank's block from a buffer of its own.
    detail::allgather_shm(ctx, in, out, detail::SpanLayout::from(layout), elem);
  }
  else detail::allgather_ring(ctx, in, out, layout, elem);
}

}  // namespace

Algorithm choose_allreduce_algorithm(const Communicator& comm, size_t nbytes) {
  return choose_allreduce(detail::group_shape(comm), CostModel::from(comm.config()), static_cast<double>(nbytes))
      .algorithm;
}

namespace {

// Whether the shm or hierarchical algorithm can run here; the error explains
// why not. Every rank reaches the same answer.
void check_algorithm_runs(const char* what, const Communicator& comm, Algorithm algorithm) {
  if (algorithm == Algorithm::shm) {
    GIANT_CHECK(comm.shared_memory(), what,
                ": algorithm shm needs shared memory between the ranks (ccl.transport=auto, and every rank able to "
                "set it up)");
    GIANT_CHECK(comm.topology().num_hosts() == 1, what, ": algorithm shm needs every rank on one host, but they are on ",
                comm.topology().num_hosts());
  }
  if (algorithm == Algorithm::hierarchical) {
    GIANT_CHECK(!detail::cross_host_ring(comm).empty(), what,
                ": algorithm hierarchical needs the same number of ranks on every host, and shared memory between "
                "the ranks of a host (ccl.transport=auto)");
  }
}

// Reduce-scatter, allgather, broadcast and barrier run in shared memory when
// every rank is on one host with it, over the tcp ring otherwise.
bool all_in_shared_memory(const Communicator& comm) {
  return comm.shared_memory() && comm.topology().num_hosts() == 1;
}

// Reduce-scatter and allgather: the requested algorithm, or for automatic
// the one choose_reduce_scatter names (algorithm_choice.h).
Algorithm resolve_movement(const char* what, const Communicator& comm, Algorithm requested, size_t total_bytes) {
  GIANT_CHECK(requested != Algorithm::halving_doubling, what, ": algorithm halving_doubling is for allreduce only");
  check_algorithm_runs(what, comm, requested);
  if (requested != Algorithm::automatic) return requested;
  return choose_reduce_scatter(detail::group_shape(comm), CostModel::from(comm.config()),
                               static_cast<double>(total_bytes))
      .algorithm;
}

// What the hierarchical algorithms need, found when the call is issued.
struct HostLayout {
  std::vector<std::vector<int>> hosts;  // ranks host by host
  std::vector<int> ring;                // this rank's cross-host ring
};

// With one rank per host the hierarchical algorithm is the ring; otherwise
// fills what it needs. Returns the algorithm that runs.
Algorithm settle_hierarchical(const Communicator& comm, Algorithm algorithm, HostLayout* layout) {
  if (algorithm != Algorithm::hierarchical) return algorithm;
  if (comm.topology().local_size == 1) return Algorithm::ring;
  layout->hosts = detail::ranks_by_host(comm);
  layout->ring = detail::cross_host_ring(comm);
  return algorithm;
}

}  // namespace

Work HostBackend::allreduce(const AllreduceOptions& o) {
  Communicator& comm = comm_;
  if (o.wire != WireDType::none) {
    GIANT_CHECK(o.wire == WireDType::bf16 || o.wire == WireDType::fp16, "allreduce: unknown wire dtype ",
                static_cast<int>(o.wire));
    GIANT_CHECK(o.dtype == DType::f32, "allreduce: wire compression (", wire_dtype_name(o.wire),
                ") needs f32 data, got ", dtype_name(o.dtype));
    GIANT_CHECK(o.algorithm == Algorithm::automatic || o.algorithm == Algorithm::ring ||
                    o.algorithm == Algorithm::hierarchical,
                "allreduce: wire compression needs ring or hierarchical, got ", algorithm_name(o.algorithm));
  }
  size_t nbytes = o.count * dtype_size(o.dtype);
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, nbytes);
    return Work();
  }
  Algorithm algorithm = o.algorithm;
  check_algorithm_runs("allreduce", comm, algorithm);
  if (algorithm == Algorithm::automatic && o.wire == WireDType::none) {
    algorithm = choose_allreduce_algorithm(comm, nbytes);
  } else if (algorithm == Algorithm::automatic) {
    // With a wire type, the cheapest of the algorithms that compress.
    const auto costs = allreduce_costs(detail::group_shape(comm), CostModel::from(comm.config()),
                                       static_cast<double>(nbytes));
    for (const auto& cost : costs) {
      algorithm = cost.algorithm;
      if (o.wire == WireDType::none || algorithm == Algorithm::ring || algorithm == Algorithm::hierarchical) break;
    }
  }
  HostLayout layout;
  algorithm = settle_hierarchical(comm, algorithm, &layout);
  std::vector<int> ring = std::move(layout.ring);
  const SharedStretch shared = find_shared_stretch(comm, algorithm, o.input == o.output, o.input, nbytes);
  auto desc = describe(OpKind::allreduce, o.dtype, o.count, -1, static_cast<uint8_t>(o.op), shared.aux, algorithm);
  desc.algorithm |= static_cast<uint8_t>(static_cast<uint8_t>(o.wire) << detail::kWireShift);  // ranks must agree
  // Large buffers go in chunks, each a whole allreduce; between them more
  // urgent work may overtake (OpContext::boundary).
  const size_t elem = dtype_size(o.dtype);
  const size_t chunk = std::max<size_t>(1, comm.config().engine_chunk_bytes / elem);
  const bool small = algorithm == Algorithm::shm && nbytes <= kInlineMaxBytes;
  return run_or_submit(comm, desc, o, small, [o, algorithm, ring, chunk, elem, shared](OpContext& ctx) {
    for (size_t first = 0; first < o.count; first += chunk) {
      if (first > 0) ctx.boundary();
      auto in = static_cast<const char*>(o.input) + first * elem;
      auto out = static_cast<char*>(o.output) + first * elem;
      size_t count = std::min(chunk, o.count - first);
      if (!shared.buffers.empty()) {
        detail::allreduce_shared_buffers(ctx, shared.buffers, shared.offset + first * elem, count, o.dtype, o.op);
        continue;
      }
      switch (algorithm) {
        case Algorithm::ring: detail::allreduce_ring(ctx, in, out, count, o.dtype, o.op, o.wire); break;
        case Algorithm::shm: detail::allreduce_shm(ctx, in, out, count, o.dtype, o.op); break;
        case Algorithm::hierarchical:
          detail::allreduce_hierarchical(ctx, in, out, count, o.dtype, o.op, ring, o.wire);
          break;
        default: detail::allreduce_halving_doubling(ctx, in, out, count, o.dtype, o.op); break;
      }
    }
  });
}

Work HostBackend::reduce_scatter(const ReduceScatterOptions& o) {
  Communicator& comm = comm_;
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, o.count * dtype_size(o.dtype));
    return Work();
  }
  const int n = comm.size();
  HostLayout hl;
  Algorithm algorithm = settle_hierarchical(
      comm, resolve_movement("reduce_scatter", comm, o.algorithm, o.count * n * dtype_size(o.dtype)), &hl);
  // In place (output is this rank's block of input) on a shared buffer:
  // each rank reduces its block straight from the peers' buffers.
  const size_t elem = dtype_size(o.dtype);
  const bool in_place = rank_block(o.input, comm.rank(), o.count * elem) == o.output;
  const SharedStretch shared = find_shared_stretch(comm, algorithm, in_place, o.input, o.count * n * elem);
  auto desc =
      describe(OpKind::reduce_scatter, o.dtype, o.count, -1, static_cast<uint8_t>(o.op), shared.aux, algorithm);
  return submit(comm, desc, o, [o, algorithm, n, hl, shared](OpContext& ctx) {
    auto in = static_cast<const char*>(o.input);
    auto out = static_cast<char*>(o.output);
    if (!shared.buffers.empty()) {
      detail::reduce_scatter_shared_buffers(ctx, shared.buffers, shared.offset, o.count, o.dtype, o.op);
    } else if (algorithm == Algorithm::shm) {
      auto layout = detail::SpanLayout::from(detail::BlockLayout::balanced(o.count * n, n));
      detail::reduce_scatter_shm(ctx, in, layout, out, o.dtype, o.op, true);
    } else if (algorithm == Algorithm::hierarchical) {
      detail::reduce_scatter_hierarchical(ctx, in, out, o.count, o.dtype, o.op, hl.hosts, hl.ring);
    } else {
      detail::reduce_scatter_ring(ctx, in, out, o.count, o.dtype, o.op);
    }
  });
}

Work HostBackend::allgather(const AllgatherOptions& o) {
  Communicator& comm = comm_;
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, o.count * dtype_size(o.dtype));
    return Work();
  }
  HostLayout hl;
  Algorithm algorithm = settle_hierarchical(
      comm, resolve_movement("allgather", comm, o.algorithm, o.count * comm.size() * dtype_size(o.dtype)), &hl);
  // In place (input is this rank's block of output) on a shared buffer: each
  // rank copies the peers' blocks straight from their buffers.
  const size_t elem = dtype_size(o.dtype);
  const bool in_place = rank_block(o.output, comm.rank(), o.count * elem) == o.input;
  const SharedStretch shared = find_shared_stretch(comm, algorithm, in_place, o.output, o.count * comm.size() * elem);
  auto desc = describe(OpKind::allgather, o.dtype, o.count, -1, 0, shared.aux, algorithm);
  std::vector<size_t> counts(comm.size(), o.count);
  return submit(comm, desc, o, [o, algorithm, counts, hl, shared, elem](OpContext& ctx) {
    if (!shared.buffers.empty()) {
      detail::allgather_shared_buffers(ctx, shared.buffers, shared.offset, o.count, elem);
    } else if (algorithm == Algorithm::hierarchical) {
      detail::allgather_hierarchical(ctx, static_cast<const char*>(o.input), static_cast<char*>(o.output), o.count,
                                     elem, hl.hosts, hl.ring);
    } else {
      gather_blocks(ctx, algorithm, o.input, o.output, detail::BlockLayout::from_counts(counts), elem);
    }
  });
}

Work HostBackend::allgatherv(const AllgathervOptions& o) {
  Communicator& comm = comm_;
  size_t total = std::accumulate(o.counts.begin(), o.counts.end(), size_t{0});
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, total * dtype_size(o.dtype));
    return Work();
  }
  Algorithm algorithm = all_in_shared_memory(comm) ? Algorithm::shm : Algorithm::ring;
  auto desc = describe(OpKind::allgatherv, o.dtype, total, -1, 0, hash_counts(o.counts));
  return submit(comm, desc, o, [o, algorithm](OpContext& ctx) {
    gather_blocks(ctx, algorithm, o.input, o.output, detail::BlockLayout::from_counts(o.counts), dtype_size(o.dtype));
  });
}

Work HostBackend::alltoall(const AlltoallOptions& o) {
  Communicator& comm = comm_;
  size_t block = o.count * dtype_size(o.dtype);
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, block);
    return Work();
  }
  auto desc = describe(OpKind::alltoall, o.dtype, o.count);
  if (all_in_shared_memory(comm)) {
    return submit(comm, desc, o, [o, block](OpContext& ctx) {
      detail::alltoall_shm(ctx, static_cast<const char*>(o.input), static_cast<char*>(o.output), block);
    });
  }
  std::vector<size_t> sizes(comm.size(), block);
  return submit(comm, desc, o, [o, sizes](OpContext& ctx) {
    detail::alltoallv_pairwise(ctx, static_cast<const char*>(o.input), sizes, static_cast<char*>(o.output), sizes);
  });
}

Work HostBackend::alltoallv(const AlltoallvOptions& o) {
  Communicator& comm = comm_;
  const size_t n = static_cast<size_t>(comm.size());
  size_t elem = dtype_size(o.dtype);
  std::vector<size_t> send_bytes, recv_bytes;
  for (size_t i = 0; i < n; ++i) {
    send_bytes.push_back(o.send_counts[i] * elem);
    recv_bytes.push_back(o.recv_counts[i] * elem);
  }
  if (n == 1) {
    copy_if_distinct(o.output, o.input, send_bytes[0]);
    return Work();
  }
  auto desc = describe(OpKind::alltoallv, o.dtype, 0);
  return submit(comm, desc, o, [o, send_bytes, recv_bytes](OpContext& ctx) {
    detail::alltoallv_pairwise(ctx, static_cast<const char*>(o.input), send_bytes, static_cast<char*>(o.output),
                               recv_bytes);
  });
}

Work HostBackend::broadcast(const BroadcastOptions& o) {
  Communicator& comm = comm_;
  size_t nbytes = o.count * dtype_size(o.dtype);
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, nbytes);
    return Work();
  }
  auto desc = describe(OpKind::broadcast, o.dtype, o.count, o.root);
  const bool shm = all_in_shared_memory(comm);
  return run_or_submit(comm, desc, o, shm && nbytes <= kInlineMaxBytes, [o, nbytes, shm](OpContext& ctx) {
    auto in = static_cast<const char*>(o.input);
    auto out = static_cast<char*>(o.output);
    // With every rank on one host, local rank and rank coincide.
    if (shm) detail::broadcast_shm(ctx, in, out, nbytes, o.root);
    else detail::broadcast_chain(ctx, in, out, nbytes, o.root);
  });
}

Work HostBackend::reduce(const ReduceOptions& o) {
  Communicator& comm = comm_;
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, o.count * dtype_size(o.dtype));
    return Work();
  }
  auto desc = describe(OpKind::reduce, o.dtype, o.count, o.root, static_cast<uint8_t>(o.op));
  const bool shm = all_in_shared_memory(comm);
  return submit(comm, desc, o, [o, shm](OpContext& ctx) {
    auto in = static_cast<const char*>(o.input);
    if (shm) {
      // In shared memory an allreduce costs about what a reduction to one
      // rank would; the others keep their copy in scratch.
      char* out = ctx.rank() == o.root ? static_cast<char*>(o.output) : ctx.scratch(1, o.count * dtype_size(o.dtype));
      detail::allreduce_shm(ctx, in, out, o.count, o.dtype, o.op);
    } else {
      detail::reduce_chain(ctx, in, static_cast<char*>(o.output), o.count, o.dtype, o.op, o.root);
    }
  });
}

Work HostBackend::gather(const GatherOptions& o) {
  Communicator& comm = comm_;
  size_t nbytes = o.count * dtype_size(o.dtype);
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, nbytes);
    return Work();
  }
  auto desc = describe(OpKind::gather, o.dtype, o.count, o.root);
  const bool shm = all_in_shared_memory(comm);
  return submit(comm, desc, o, [o, nbytes, shm](OpContext& ctx) {
    auto in = static_cast<const char*>(o.input);
    auto out = static_cast<char*>(o.output);
    if (shm) detail::gather_shm(ctx, in, out, nbytes, o.root);
    else detail::gather_direct(ctx, in, out, nbytes, o.root);
  });
}

Work HostBackend::scatter(const ScatterOptions& o) {
  Communicator& comm = comm_;
  size_t nbytes = o.count * dtype_size(o.dtype);
  if (comm.size() == 1) {
    copy_if_distinct(o.output, o.input, nbytes);
    return Work();
  }
  auto desc = describe(OpKind::scatter, o.dtype, o.count, o.root);
  const bool shm = all_in_shared_memory(comm);
  return submit(comm, desc, o, [o, nbytes, shm](OpContext& ctx) {
    auto in = static_cast<const char*>(o.input);
    auto out = static_cast<char*>(o.output);
    if (shm) detail::scatter_shm(ctx, in, out, nbytes, o.root);
    else detail::scatter_direct(ctx, in, out, nbytes, o.root);
  });
}

Work HostBackend::barrier(const BarrierOptions& o) {
  Communicator& comm = comm_;
  if (comm.size() == 1) return Work();
  const bool shm = all_in_shared_memory(comm);
  return run_or_submit(comm, describe(OpKind::barrier, DType::u8, 0), o, shm, [shm](OpContext& ctx) {
    if (shm) detail::barrier_shm(ctx);
    else detail::barrier_dissemination(ctx);
  });
}

Work HostBackend::send(const SendOptions& o) {
  return comm_.engine().submit_p2p(true, o.peer, o.tag, const_cast<void*>(o.buffer), o.nbytes, o.timeout);
}

Work HostBackend::recv(const RecvOptions& o) {
  return comm_.engine().submit_p2p(false, o.peer, o.tag, o.buffer, o.nbytes, o.timeout);
}

void HostBackend::abort(const std::string& reason) { comm_.engine().abort(reason); }

bool HostBackend::failed() const { return comm_.engine().failed(); }

}  // namespace giant::ccl
