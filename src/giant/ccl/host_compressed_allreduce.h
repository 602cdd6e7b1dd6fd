// An allreduce of f32 gradients that compresses only what crosses hosts,
// with error feedback (grad_wire.h), for data-parallel training on slow
// links between hosts.
//
// Every host must hold the same number L of the communicator's ranks (H
// hosts). For n elements padded to a multiple of L x H:
//   1. inside each host, an f32 reduce-scatter: local rank l holds the
//      host's sum of chunk l (n / L elements), in shared memory where
//      there is some;
//   2. the L chunk-owners of each index l across the hosts run a compressed
//      allreduce on it, as 1-bit Adam's compressed allreduce does: each
//      encodes its chunk (plus its "worker" residual) and sends sub-chunk h
//      to host h (alltoall); host h decodes and sums the H pieces in host
//      order, encodes the sum (plus its "server" residual), and the encoded
//      sums are allgathered and decoded by every rank, their own included;
//   3. inside each host, an f32 allgather of the chunks.
// Bytes a rank sends between hosts: 2 (H-1)/H x n/L x 4 / ratio, against
// 2 (H-1)/H x n/L x 4 for a hierarchical f32 allreduce. The result is
// bitwise identical on every rank. Its error is what the two encodings of
// this call drop; with error feedback that error is carried into the next
// call on the same stream instead of being lost, so the running sum of the
// results follows the running sum of the exact reductions within the sum
// of the residuals, which stays bounded.
//
// Operations run in issue order on a thread of their own (over two
// communicators split from the one given), so the caller's thread only
// queues them. A stream (one per tensor reduced again and again, e.g. a
// gradient bucket) owns its residuals; its count must not change.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "giant/ccl/communicator.h"
#include "giant/ccl/grad_wire.h"
#include "giant/ccl/types.h"
#include "giant/ccl/work.h"

namespace giant::ccl {

namespace detail {
struct WorkState;
}

class HostCompressedAllreduce {
 public:
  // Collective over comm (two splits). Throws giant::Error when the hosts
  // hold different numbers of comm's ranks, or for GradWire::none.
  HostCompressedAllreduce(Communicator& comm, GradWire wire);
  // Aborts what is still queued (telling the peers) and joins the thread.
  ~HostCompressedAllreduce();
  HostCompressedAllreduce(const HostCompressedAllreduce&) = delete;
  HostCompressedAllreduce& operator=(const HostCompressedAllreduce&) = delete;

  GradWire wire() const { return wire_; }
  int hosts() const { return hosts_; }
  int ranks_per_host() const { return local_size_; }

  // Starts reducing `count` floats in place (op sum or avg over every rank
  // of comm). data must stay alive and untouched until the Work completes.
  Work allreduce(float* data, size_t count, int stream, ReduceOp op);
  // Waits until every queued operation ended (errors stay in their Works).
  void drain();
  // Fails what is queued or running and tells the peers (any thread).
  void abort(const std::string& reason);
  // Elements of the residual a stream of `count` elements keeps.
  size_t residual_count(size_t count) const;

  // The residuals of every stream, serialised (for checkpoints), and back.
  // Only with nothing in flight (drain() first). restore takes the streams
  // this rank will run with their counts, and throws giant::Error (keeping
  // its residuals) when the bytes are not a state of exactly those streams
  // of this wire format.
  std::vector<uint8_t> save_feedback() const;
  void restore_feedback(const std::vector<uint8_t>& bytes, const std::map<int, size_t>& stream_counts);

 private:
  struct Residuals {
    std::vector<float> worker, server;  // chunk and sub-chunk long
  };
  struct Job {
    float* data;
    size_t count;
    int stream;
    ReduceOp op;
    std::shared_ptr<detail::WorkState> work;
  };
  void run_queue();
  void run(const Job& job);
  void reduce_across_hosts(float* chunk, size_t sub_count, Residuals& residuals);

  GradWire wire_;
  int size_ = 1, hosts_ = 1, local_size_ = 1, host_ = 0;
  std::shared_ptr<Communicator> local_, cross_;
  std::map<int, Residuals> residuals_;  // by stream; touched only by the thread (or when drained)

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  bool running_job_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace giant::ccl
