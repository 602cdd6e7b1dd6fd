// A device backend that runs device buffers through ccl's host path: each
// operation copies its device inputs to host memory (after the work queued
// on the caller's stream), runs on a host communicator of its own, made from
// the context's store as NCCL's is (the same algorithms, wire, faults and
// timeouts as host memory), and copies its outputs back. It serves ranks
// that share a GPU, which NCCL refuses (it takes one rank per device): two
// pipeline stages or two ZeRO ranks on one GPU.
//
// A collective returns once its outputs are on the device (its Work already
// complete), so kernels queued afterwards see them, as they would NCCL's
// on the caller's stream. Sends and receives are asynchronous: a send's
// buffer is copied before send returns; a receive's holds the message once
// its Work completes. A thread finishes them as their host operations
// complete, in whatever order they do.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "giant/ccl/backend.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/device_copier.h"

namespace giant::ccl {

class StagedBackend final : public Backend {
 public:
  // Collective over the context's ranks, as a communicator's creation.
  StagedBackend(const DeviceBackendContext& context, std::unique_ptr<DeviceCopier> copier);
  ~StagedBackend() override;  // waits for the sends and receives in flight (each bounded by its timeout)
  StagedBackend(const StagedBackend&) = delete;
  StagedBackend& operator=(const StagedBackend&) = delete;
  const char* name() const override { return "staged"; }

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
  struct Staged;  // an operation's host buffers and the device buffer its output goes back to
  // Issues a host operation with `in` and `out`, host copies of device_in
  // (in_bytes, copied now) and device_out (out_bytes, copied back once the
  // host operation completes); a null device buffer has a null copy.
  using Issue = std::function<Work(Backend& host, const void* in, void* out)>;
  Work run(const OpOptions& options, const void* device_in, size_t in_bytes, void* device_out, size_t out_bytes,
           const Issue& issue, bool asynchronous);
  // A collective: `call` (the host backend's) on host copies of its input
  // and output, returning once the output is back on the device.
  template <class Options>
  Work collective(const Options& options, const void* device_in, size_t in_bytes, void* device_out,
                  size_t out_bytes, Work (Backend::*call)(const Options&));
  // The finishing thread: completes each send and receive whose host
  // operation has completed (a receive's message copied back first).
  void finish_completed();

  std::shared_ptr<Communicator> host_;
  std::unique_ptr<DeviceCopier> copier_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Staged>> in_flight_;  // under mutex_
  bool stopping_ = false;                            // under mutex_
  std::thread finisher_;
};

}  // namespace giant::ccl
