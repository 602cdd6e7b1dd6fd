// The host backend (backend.h): collectives on host memory, on the
// communicator's engine (TCP between hosts, shared memory inside one).
#pragma once

#include <string>

#include "giant/ccl/backend.h"
#include "giant/ccl/communicator.h"

namespace giant::ccl {

class HostBackend final : public Backend {
 public:
  // comm owns this backend and outlives it.
  explicit HostBackend(Communicator& comm) : comm_(comm) {}
  const char* name() const override { return "host"; }

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
  Communicator& comm_;
};

}  // namespace giant::ccl
