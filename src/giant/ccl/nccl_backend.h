// The NCCL device backend (backend.h): collectives and point-to-point
// messages on CUDA device buffers, through one NCCL communicator per ccl
// communicator, made from the store on the first device operation.
//
// Ordering: an operation runs on OpOptions::stream (libtorch's current
// stream, as the caller passes it; null: the default stream), so kernels
// queued on that stream after it see its result without a host wait. Sends
// and receives run on streams of their own, after the work queued on the
// caller's stream: wait on their Work before using a received buffer. NCCL
// matches a pair's messages in issue order whatever their tags.
//
// Faults, as on the host: a watchdog thread completes each Work when its
// event fires, and fails every pending one (aborting the NCCL communicator,
// so no kernel waits forever) when one passes its timeout, NCCL reports an
// error, or the communicator's host side learns of a fault.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "giant/base/timer.h"
#include "giant/ccl/backend.h"
#include "giant/ccl/work_state.h"

namespace giant::ccl {

class NcclBackend final : public Backend {
 public:
  // Collective over the context's ranks; throws giant::Error when no CUDA
  // device is visible, TimeoutError when the peers do not join in time.
  explicit NcclBackend(const DeviceBackendContext& context);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;
  const char* name() const override { return "nccl"; }

  Work allreduce(const AllreduceOptions& options) override;
  Work reduce_scatter(const ReduceScatterOptions& options) override;
  Work allgather(const AllgatherOptions& options) override;
  Work allgatherv(const AllgathervOptions& options) override;
  Work alltoall(const AlltoallOptions& options) override;
  Work alltoallv(const AlltoallvOptions& options) override;
  Work broadcast(const BroadcastOptions& options) override;
  Work reduce(const ReduceOptions& options) override;
  Work gather(const GatherOptions& options) override;
  Work scatter(const ScatterOptions& options) override;
  Work barrier(const BarrierOptions& options) override;
  Work send(const SendOptions& options) override;
  Work recv(const RecvOptions& options) override;
  void abort(const std::string& reason) override;
  bool failed() const override;

 private:
  struct Pending {
    cudaEvent_t event = nullptr;
    std::shared_ptr<detail::WorkState> work;
    Deadline deadline = Deadline::never();
    std::string what;
  };
  // Makes an operation's NCCL calls on a stream; returns the last call's result.
  using Launch = std::function<ncclResult_t(cudaStream_t)>;

  // Issues launch's NCCL calls on `stream` (grouped when `grouped`) and
  // returns a Work that completes with them.
  Work enqueue(const std::string& what, const OpOptions& options, cudaStream_t stream, bool grouped,
               const Launch& launch);
  // Sends and receives: on `stream`, after what is queued on the caller's.
  Work enqueue_p2p(const std::string& what, const OpOptions& options, cudaStream_t stream, const Launch& launch);
  // With a non-blocking NCCL communicator, a call may still be in progress
  // when it returns: waits until it is issued, within the deadline.
  void settle(ncclResult_t result, const char* call, const Deadline& deadline);
  // Sends `count` elements to and receives from every peer, block by block
  // (alltoall, alltoallv, gather, scatter), blocks laid out contiguously in
  // rank order; this rank's own block is copied. Inside a group.
  ncclResult_t exchange_blocks(cudaStream_t stream, const char* input, const std::vector<size_t>& send_bytes,
                               char* output, const std::vector<size_t>& recv_bytes);
  void watch();
  // Fails every pending Work with `error` and aborts the NCCL communicator.
  void fail(std::exception_ptr error);
  std::chrono::milliseconds timeout_of(const OpOptions& options) const;

  const int rank_;
  const int size_;
  const std::string name_;
  const CommConfig config_;
  const std::function<bool()> host_failed_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t send_stream_ = nullptr;
  cudaStream_t recv_stream_ = nullptr;
  void* barrier_word_ = nullptr;  // a device int the barrier's allreduce runs on

  std::mutex issue_mutex_;  // NCCL calls from one thread at a time, in issue order
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;  // under mutex_
  std::exception_ptr failure_;   // under mutex_
  bool stopping_ = false;        // under mutex_
  std::atomic<bool> aborted_{false};
  std::thread watchdog_;
};

}  // namespace giant::ccl
