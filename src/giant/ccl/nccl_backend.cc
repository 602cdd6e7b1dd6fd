// The NCCL backend's life: the communicator made from the store, the
// watchdog that completes and fails Works, abort. The operations are in
// nccl_collectives.cc.
#include "giant/ccl/nccl_backend.h"

#include <cstring>
#include <set>

#include "giant/base/error.h"
#include "giant/ccl/nccl_support.h"
#include "giant/ccl/staged_backend.h"
#include "giant/ccl/store.h"

namespace giant::ccl {
namespace {

// How often the watchdog looks at pending events: short, since a Work's
// wait returns only when the watchdog has seen its event.
constexpr auto kWatchPeriod = std::chrono::microseconds(50);

// The current device, once a device is known to be visible.
int visible_device(const std::string& name) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    const std::string why = status != cudaSuccess ? cudaGetErrorString(status) : "no devices";
    cudaGetLastError();  // clears the sticky error for the next caller
    throw Error("communicator '" + name + "': device memory needs a CUDA device, and none is visible (" + why + ")");
  }
  int device = 0;
  detail::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

// Rank 0 makes the id; the others read it from the store.
ncclUniqueId exchange_id(const DeviceBackendContext& context, const Deadline& deadline) {
  ncclUniqueId id;
  if (context.rank == 0) detail::check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (context.size == 1) return id;
  PrefixStore scoped(context.store, context.store_prefix);
  if (context.rank == 0) {
    scoped.set("nccl_id", Bytes(reinterpret_cast<const uint8_t*>(&id), reinterpret_cast<const uint8_t*>(&id) + sizeof id));
    return id;
  }
  Bytes bytes;
  try {
    bytes = scoped.get("nccl_id", std::chrono::milliseconds(deadline.remaining_ms(1 << 30)));
  } catch (const TimeoutError&) {
    throw TimeoutError(0, "communicator '" + context.name + "': rank 0 did not publish its NCCL id within " +
                              std::to_string(context.config.connect_timeout.count()) + " ms");
  }
  GIANT_CHECK(bytes.size() == sizeof id, "communicator '", context.name, "': bad NCCL id in the store (", bytes.size(),
              " bytes)");
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

}  // namespace

NcclBackend::NcclBackend(const DeviceBackendContext& context)
    : rank_(context.rank),
      size_(context.size),
      name_(context.name),
      config_(context.config),
      host_failed_(context.host_failed) {
  device_ = visible_device(name_);
  GIANT_CHECK(context.store != nullptr || size_ == 1, "communicator '", name_, "': a device backend of ", size_,
              " ranks needs a store");
  const Deadline deadline = Deadline::after(config_.connect_timeout);
  ncclUniqueId id = exchange_id(context, deadline);
  ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
  nccl_config.blocking = 0;  // init and calls return at once, so the deadline holds
  try {
    settle(ncclCommInitRankConfig(&comm_, size_, id, rank_, &nccl_config), "ncclCommInitRankConfig", deadline);
  } catch (const TimeoutError&) {
    throw TimeoutError(-1, "communicator '" + name_ + "': the NCCL communicator of rank " + std::to_string(rank_) +
                               " was not ready within " + std::to_string(config_.connect_timeout.count()) +
                               " ms (a rank did not join)");
  }
  detail::check_cuda(cudaStreamCreateWithFlags(&send_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  detail::check_cuda(cudaStreamCreateWithFlags(&recv_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  detail::check_cuda(cudaMalloc(&barrier_word_, sizeof(int32_t)), "cudaMalloc");
  watchdog_ = std::thread([this] { watch(); });
}

NcclBackend::~NcclBackend() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (comm_ != nullptr && !aborted_) {
    // Finalize lets the peers finish what they share with this rank; a peer
    // that never does costs at most the timeout, then the abort frees all.
    try {
      settle(ncclCommFinalize(comm_), "ncclCommFinalize", Deadline::after(config_.timeout));
      ncclCommDestroy(comm_);
    } catch (const Error&) {
      ncclCommAbort(comm_);
    }
  }  // an aborted communicator is freed already
  if (barrier_word_ != nullptr) cudaFree(barrier_word_);
  if (send_stream_ != nullptr) cudaStreamDestroy(send_stream_);
  if (recv_stream_ != nullptr) cudaStreamDestroy(recv_stream_);
}

void NcclBackend::settle(ncclResult_t result, const char* call, const Deadline& deadline) {
  while (result == ncclInProgress) {
    if (deadline.expired()) {
      throw TimeoutError(-1, std::string(call) + " on communicator '" + name_ + "' did not finish in time");
    }
    std::this_thread::sleep_for(kWatchPeriod);
    ncclCommGetAsyncError(comm_, &result);
  }
  detail::check_nccl(result, call);
}

std::chrono::milliseconds NcclBackend::timeout_of(const OpOptions& options) const {
  return options.timeout.count() > 0 ? options.timeout : config_.timeout;
}

Work NcclBackend::enqueue(const std::string& what, const OpOptions& options, cudaStream_t stream, bool grouped,
                          const Launch& launch) {
  auto work = std::make_shared<detail::WorkState>();
  std::lock_guard<std::mutex> issue(issue_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
  }
  const Deadline deadline = Deadline::after(timeout_of(options));
  detail::check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  if (grouped) {
    detail::check_nccl(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t result = ncclSuccess;
    try {
      result = launch(stream);
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    ncclResult_t ended = ncclGroupEnd();
    settle(result == ncclSuccess ? ended : result, what.c_str(), deadline);
  } else {
    settle(launch(stream), what.c_str(), deadline);
  }
  cudaEvent_t event = nullptr;
  detail::check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  detail::check_cuda(cudaEventRecord(event, stream), "cudaEventRecord");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(Pending{event, work, deadline, what});
  }
  cv_.notify_all();
  return Work(work);
}

Work NcclBackend::enqueue_p2p(const std::string& what, const OpOptions& options, cudaStream_t stream,
                              const Launch& launch) {
  detail::check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  cudaEvent_t ready = nullptr;
  detail::check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  detail::check_cuda(cudaEventRecord(ready, static_cast<cudaStream_t>(options.stream)), "cudaEventRecord");
  detail::check_cuda(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
  cudaEventDestroy(ready);  // released once the wait has run
  return enqueue(what, options, stream, true, launch);
}

void NcclBackend::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, nothing left to watch
    for (auto it = pending_.begin(); it != pending_.end();) {
      cudaError_t status = cudaEventQuery(it->event);
      if (status == cudaErrorNotReady) {
        ++it;
        continue;
      }
      cudaEventDestroy(it->event);
      it->work->finish(status == cudaSuccess ? nullptr
                                             : std::make_exception_ptr(CommError(
                                                   -1, it->what + ": CUDA: " + cudaGetErrorString(status))));
      it = pending_.erase(it);
    }
    if (pending_.empty()) continue;
    std::exception_ptr fault;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    const Pending& oldest = pending_.front();
    if (async != ncclSuccess && async != ncclInProgress) {
      fault = std::make_exception_ptr(CommError(-1, "rank " + std::to_string(rank_) + ": " + oldest.what +
                                                        " failed in NCCL: " + ncclGetErrorString(async)));
    } else if (oldest.deadline.expired()) {
      fault = std::make_exception_ptr(TimeoutError(
          -1, "rank " + std::to_string(rank_) + ": " + oldest.what + " on communicator '" + name_ +
                  "' did not finish within its timeout (a peer is slow, stopped or gone)"));
    } else if (host_failed_ && host_failed_()) {
      fault = std::make_exception_ptr(CommError(-1, "rank " + std::to_string(rank_) + ": " + oldest.what +
                                                        " stopped: communicator '" + name_ + "' failed on the host"));
    }
    if (fault) {
      lock.unlock();
      fail(fault);
      lock.lock();
      continue;
    }
    lock.unlock();
    std::this_thread::sleep_for(kWatchPeriod);
    lock.lock();
  }
}

void NcclBackend::fail(std::exception_ptr error) {
  {
    // Between two issues: no NCCL call uses the communicator while it goes.
    std::lock_guard<std::mutex> issue(issue_mutex_);
    if (!aborted_.exchange(true)) ncclCommAbort(comm_);  // unblocks the kernels waiting on peers
  }
  std::deque<Pending> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = error;
    failed.swap(pending_);
  }
  for (auto& pending : failed) {
    pending.work->finish(error);
    cudaEventDestroy(pending.event);
  }
}

void NcclBackend::abort(const std::string& reason) {
  fail(std::make_exception_ptr(CommError(rank_, "communicator '" + name_ + "' was aborted by rank " +
                                                    std::to_string(rank_) + ": " + reason)));
}

bool NcclBackend::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_ != nullptr;
}

namespace {

// Whether two of the context's ranks use one device, which NCCL refuses:
// each rank publishes its device's UUID and reads every rank's.
bool ranks_share_a_device(const DeviceBackendContext& context) {
  if (context.size == 1) return false;
  int device = 0;
  detail::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  detail::check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  const auto* uuid = reinterpret_cast<const uint8_t*>(properties.uuid.bytes);
  PrefixStore devices(context.store, context.store_prefix + "/devices");
  devices.set(std::to_string(context.rank), Bytes(uuid, uuid + sizeof properties.uuid.bytes));
  std::set<Bytes> seen;
  for (int rank = 0; rank < context.size; ++rank) {
    if (!seen.insert(devices.get(std::to_string(rank), context.config.connect_timeout)).second) return true;
  }
  return false;
}

}  // namespace

// NCCL, or where ranks share a GPU, NCCL's place taken by the host path.
std::unique_ptr<Backend> default_device_backend(const DeviceBackendContext& context) {
  visible_device(context.name);
  if (ranks_share_a_device(context)) return std::make_unique<StagedBackend>(context, default_device_copier());
  return std::make_unique<NcclBackend>(context);
}

const char* default_device_backend_name() { return "nccl"; }

}  // namespace giant::ccl
