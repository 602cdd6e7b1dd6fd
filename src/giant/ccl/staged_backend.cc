#include "giant/ccl/staged_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>

#include "giant/ccl/store.h"
#include "giant/ccl/types.h"
#include "giant/ccl/work_state.h"

namespace giant::ccl {
namespace {

// How often the finishing thread looks at the sends and receives in flight:
// a receive's Work completes at most this long after its message arrived.
constexpr auto kPollPeriod = std::chrono::microseconds(200);

template <class Options>
Options on_host(Options options) {
  options.memory = Memory::host;
  options.stream = nullptr;
  return options;
}

size_t bytes_of(size_t count, DType dtype) { return count * dtype_size(dtype); }

size_t sum(const std::vector<size_t>& counts) { return std::accumulate(counts.begin(), counts.end(), size_t{0}); }

}  // namespace

struct StagedBackend::Staged {
  std::vector<uint8_t> in, out;  // the host copies
  void* device_out = nullptr;
  size_t out_bytes = 0;
  Work host_work;
  std::shared_ptr<detail::WorkState> done = std::make_shared<detail::WorkState>();

  void copy_back(DeviceCopier& copier) const {
    if (device_out != nullptr && out_bytes > 0) copier.to_device(device_out, out.data(), out_bytes);
  }
};

StagedBackend::StagedBackend(const DeviceBackendContext& context, std::unique_ptr<DeviceCopier> copier)
    : copier_(std::move(copier)) {
  std::shared_ptr<Store> store;
  if (context.store) store = std::make_shared<PrefixStore>(context.store, context.store_prefix);
  host_ = Communicator::create(store, context.rank, context.size, context.config, context.name + "/staged");
  finisher_ = std::thread([this] { finish_completed(); });
}

StagedBackend::~StagedBackend() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  finisher_.join();
}

Work StagedBackend::run(const OpOptions& options, const void* device_in, size_t in_bytes, void* device_out,
                        size_t out_bytes, const Issue& issue, bool asynchronous) {
  auto op = std::make_shared<Staged>();
  // At least a byte each, so that an empty operation still gets buffers.
  if (device_in != nullptr) op->in.resize(std::max<size_t>(in_bytes, 1));
  if (device_out != nullptr) op->out.resize(std::max<size_t>(out_bytes, 1));
  if (device_in != nullptr && in_bytes > 0) copier_->to_host(op->in.data(), device_in, in_bytes, options.stream);
  op->device_out = device_out;
  op->out_bytes = out_bytes;
  op->host_work = issue(host_->backend(Memory::host), device_in != nullptr ? op->in.data() : nullptr,
                        device_out != nullptr ? op->out.data() : nullptr);
  if (!asynchronous) {
    std::exception_ptr error;
    try {
      op->host_work.wait();
      op->copy_back(*copier_);
    } catch (...) {
      error = std::current_exception();
    }
    op->done->finish(error);
    return Work(op->done);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back(op);
  }
  cv_.notify_one();
  return Work(op->done);
}

void StagedBackend::finish_completed() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !in_flight_.empty(); });
    if (in_flight_.empty()) return;  // stopping, with nothing left
    std::vector<std::shared_ptr<Staged>> completed;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if ((*it)->host_work.test()) {
        completed.push_back(*it);
        it = in_flight_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    for (const auto& op : completed) {
      std::exception_ptr error = op->host_work.error();
      if (!error) {
        try {
          op->copy_back(*copier_);
        } catch (...) {
          error = std::current_exception();
        }
      }
      op->done->finish(error);
    }
    if (completed.empty()) std::this_thread::sleep_for(kPollPeriod);
    lock.lock();
  }
}

template <class Options>
Work StagedBackend::collective(const Options& o, const void* device_in, size_t in_bytes, void* device_out,
                               size_t out_bytes, Work (Backend::*call)(const Options&)) {
  return run(o, device_in, in_bytes, device_out, out_bytes, [&](Backend& host, const void* in, void* out) {
    Options h = on_host(o);
    h.input = in;
    h.output = out;
    return (host.*call)(h);
  }, false);
}

Work StagedBackend::allreduce(const AllreduceOptions& o) {
  const size_t bytes = bytes_of(o.count, o.dtype);
  return collective(o, o.input, bytes, o.output, bytes, &Backend::allreduce);
}

Work StagedBackend::reduce_scatter(const ReduceScatterOptions& o) {
  const size_t block = bytes_of(o.count, o.dtype);
  const size_t all = block * static_cast<size_t>(host_->size());
  return collective(o, o.input, all, o.output, block, &Backend::reduce_scatter);
}

Work StagedBackend::allgather(const AllgatherOptions& o) {
  const size_t block = bytes_of(o.count, o.dtype);
  const size_t all = block * static_cast<size_t>(host_->size());
  return collective(o, o.input, block, o.output, all, &Backend::allgather);
}

Work StagedBackend::allgatherv(const AllgathervOptions& o) {
  const size_t mine = bytes_of(o.counts.at(static_cast<size_t>(host_->rank())), o.dtype);
  return collective(o, o.input, mine, o.output, bytes_of(sum(o.counts), o.dtype), &Backend::allgatherv);
}

Work StagedBackend::alltoall(const AlltoallOptions& o) {
  const size_t bytes = bytes_of(o.count, o.dtype) * static_cast<size_t>(host_->size());
  return collective(o, o.input, bytes, o.output, bytes, &Backend::alltoall);
}

Work StagedBackend::alltoallv(const AlltoallvOptions& o) {
  return collective(o, o.input, bytes_of(sum(o.send_counts), o.dtype), o.output, bytes_of(sum(o.recv_counts), o.dtype),
                    &Backend::alltoallv);
}

Work StagedBackend::broadcast(const BroadcastOptions& o) {
  const bool root = host_->rank() == o.root;
  const size_t bytes = bytes_of(o.count, o.dtype);
  return collective(o, root ? o.input : nullptr, bytes, o.output, bytes, &Backend::broadcast);
}

Work StagedBackend::reduce(const ReduceOptions& o) {
  const bool root = host_->rank() == o.root;
  const size_t bytes = bytes_of(o.count, o.dtype);
  return collective(o, o.input, bytes, root ? o.output : nullptr, bytes, &Backend::reduce);
}

Work StagedBackend::gather(const GatherOptions& o) {
  const bool root = host_->rank() == o.root;
  const size_t block = bytes_of(o.count, o.dtype);
  const size_t all = block * static_cast<size_t>(host_->size());
  return collective(o, o.input, block, root ? o.output : nullptr, all, &Backend::gather);
}

Work StagedBackend::scatter(const ScatterOptions& o) {
  const bool root = host_->rank() == o.root;
  const size_t block = bytes_of(o.count, o.dtype);
  const size_t all = block * static_cast<size_t>(host_->size());
  return collective(o, root ? o.input : nullptr, all, o.output, block, &Backend::scatter);
}

Work StagedBackend::barrier(const BarrierOptions& o) {
  return run(o, nullptr, 0, nullptr, 0, [&](Backend& host, const void*, void*) { return host.barrier(on_host(o)); },
             false);
}

Work StagedBackend::send(const SendOptions& o) {
  return run(o, o.buffer, o.nbytes, nullptr, 0, [&](Backend& host, const void* in, void*) {
    SendOptions h = on_host(o);
    h.buffer = in;
    return host.send(h);
  }, true);
}

Work StagedBackend::recv(const RecvOptions& o) {
  return run(o, nullptr, 0, o.buffer, o.nbytes, [&](Backend& host, const void*, void* out) {
    RecvOptions h = on_host(o);
    h.buffer = out;
    return host.recv(h);
  }, true);
}

void StagedBackend::abort(const std::string& reason) { host_->abort(reason); }

bool StagedBackend::failed() const { return host_->failed(); }

}  // namespace giant::ccl
