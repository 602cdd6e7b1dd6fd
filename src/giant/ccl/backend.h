// The seam between ccl's public collectives and what runs them. A backend
// runs every collective and point-to-point message on buffers of one kind of
// memory. A Communicator holds two: the host backend (TCP between hosts,
// shared memory inside one, on the communicator's engine), made with the
// communicator, and a device backend (NCCL where ccl was built with CUDA),
// made on the first device operation. The functions of collectives.h check
// every call the same way for both, then pass it to the backend of its
// `memory`; a backend checks only what is its own (an algorithm, a wire type).
#pragma once

#include <memory>
#include <string>

#include "giant/ccl/collectives.h"

namespace giant::ccl {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  virtual Work allreduce(const AllreduceOptions& options) = 0;
  virtual Work reduce_scatter(const ReduceScatterOptions& options) = 0;
  virtual Work allgather(const AllgatherOptions& options) = 0;
  virtual Work allgatherv(const AllgathervOptions& options) = 0;
  virtual Work alltoall(const AlltoallOptions& options) = 0;
  virtual Work alltoallv(const AlltoallvOptions& options) = 0;
  virtual Work broadcast(const BroadcastOptions& options) = 0;
  virtual Work reduce(const ReduceOptions& options) = 0;
  virtual Work gather(const GatherOptions& options) = 0;
  virtual Work scatter(const ScatterOptions& options) = 0;
  virtual Work barrier(const BarrierOptions& options) = 0;
  virtual Work send(const SendOptions& options) = 0;
  virtual Work recv(const RecvOptions& options) = 0;

  // Fails every pending and later operation, and the peers' (as
  // Communicator::abort). Callable from any thread; idempotent.
  virtual void abort(const std::string& reason) = 0;
  virtual bool failed() const = 0;
};

// The device backend of this build: NCCL where ccl was built with CUDA
// (GIANT_CUDA); otherwise it throws a giant::Error saying so.
std::unique_ptr<Backend> default_device_backend(const DeviceBackendContext& context);
// The name of default_device_backend's backend, or "none".
const char* default_device_backend_name();

}  // namespace giant::ccl
