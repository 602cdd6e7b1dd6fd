#include "giant/ccl/host_compressed_allreduce.h"

#include <algorithm>
#include <cstring>

#include "giant/base/byte_record.h"
#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/work_state.h"

namespace giant::ccl {
namespace {

// Every host must hold the same number of ranks; returns it.
int equal_ranks_per_host(const HostTopology& topology) {
  std::vector<int> count(topology.num_hosts(), 0);
  for (int host : topology.host_of_rank) ++count[host];
  for (size_t h = 0; h < count.size(); ++h) {
    if (count[h] != count[0]) {
      throw Error("compressed gradient allreduce: host " + topology.host_ids[h] + " holds " +
                  std::to_string(count[h]) + " of the ranks and host " + topology.host_ids[0] + " " +
                  std::to_string(count[0]) + "; every host must hold as many");
    }
  }
  return count[0];
}

constexpr uint32_t kFeedbackMagic = 0x46574747;  // "GGWF"

const char* const kFeedbackState = "gradient wire feedback state";

}  // namespace

HostCompressedAllreduce::HostCompressedAllreduce(Communicator& comm, GradWire wire) : wire_(wire) {
  GIANT_CHECK(is_elementwise(wire), "HostCompressedAllreduce needs an elementwise wire format, not ",
              grad_wire_name(wire));
  const HostTopology& topology = comm.topology();
  size_ = comm.size();
  hosts_ = topology.num_hosts();
  local_size_ = equal_ranks_per_host(topology);
  host_ = topology.host;
  local_ = comm.split(topology.host, topology.local_rank);
  cross_ = comm.split(topology.local_rank, topology.host);
  thread_ = std::thread([this] { run_queue(); });
}

HostCompressedAllreduce::~HostCompressedAllreduce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    // Peers are told; the data of queued operations may be going away.
    if (!queue_.empty() || running_job_) abort("compressed gradient allreduce destroyed with operations in flight");
  }
  changed_.notify_all();
  thread_.join();
}

Work HostCompressedAllreduce::allreduce(float* data, size_t count, int stream, ReduceOp op) {
  GIANT_CHECK(op == ReduceOp::sum || op == ReduceOp::avg, "compressed gradient allreduce: only sum and avg");
  auto state = std::make_shared<detail::WorkState>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    GIANT_CHECK(!stopping_, "compressed gradient allreduce is shutting down");
    queue_.push_back({data, count, stream, op, state});
  }
  changed_.notify_all();
  return Work(state);
}

void HostCompressedAllreduce::abort(const std::string& reason) {
  local_->abort(reason);
  cross_->abort(reason);
}

size_t HostCompressedAllreduce::residual_count(size_t count) const {
  const size_t parts = static_cast<size_t>(local_size_) * hosts_;
  return (count + parts - 1) / parts * hosts_;
}

void HostCompressedAllreduce::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !running_job_; });
}

void HostCompressedAllreduce::run_queue() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = true;
    }
    std::exception_ptr error;
    try {
      run(job);
    } catch (...) {
      error = std::current_exception();
    }
    {
      // Not running any more before the caller can see it done, so that a
      // destructor right after the wait finds nothing in flight.
      std::lock_guard<std::mutex> lock(mutex_);
      running_job_ = false;
    }
    changed_.notify_all();
    job.work->finish(error);
  }
}

void HostCompressedAllreduce::run(const Job& job) {
  const size_t parts = static_cast<size_t>(local_size_) * hosts_;
  const size_t chunk_count = residual_count(job.count);
  const size_t sub_count = chunk_count / hosts_;
  Residuals& residuals = residuals_[job.stream];
  if (residuals.worker.empty()) {
    residuals.worker.assign(chunk_count, 0.0f);
    residuals.server.assign(sub_count, 0.0f);
  }
  GIANT_CHECK(residuals.worker.size() == chunk_count,
              "compressed gradient allreduce: stream " + std::to_string(job.stream) + " changed its length");
  // The padded input; local rank l's chunk is elements [l, l+1) x chunk_count.
  std::vector<float> padded(parts * sub_count, 0.0f);
  std::copy(job.data, job.data + job.count, padded.begin());
  std::vector<float> chunk(chunk_count);
  float* mine = local_size_ > 1 ? chunk.data() : padded.data();
  if (local_size_ > 1) {
    ReduceScatterOptions scatter;
    scatter.input = padded.data();
    scatter.output = chunk.data();
    scatter.count = chunk_count;
    reduce_scatter(*local_, scatter).wait();
  }
  reduce_across_hosts(mine, sub_count, residuals);
  if (local_size_ > 1) {
    AllgatherOptions gather;
    gather.input = chunk.data();
    gather.output = padded.data();
    gather.count = chunk_count;
    allgather(*local_, gather).wait();
  }
  if (job.op == ReduceOp::avg) {
    const float n = static_cast<float>(size_);
    for (size_t i = 0; i < job.count; ++i) job.data[i] = padded[i] / n;
  } else {
    std::copy(padded.begin(), padded.begin() + job.count, job.data);
  }
}

// Step 2: chunk (hosts_ sub-chunks) becomes the sum over hosts, decoded.
void HostCompressedAllreduce::reduce_across_hosts(float* chunk, size_t sub_count, Residuals& residuals) {
  const size_t sub_bytes = grad_wire_bytes(wire_, sub_count);
  std::vector<uint8_t> encoded(sub_bytes * hosts_), received(sub_bytes * hosts_);
  for (int h = 0; h < hosts_; ++h) {
    encode_with_feedback(wire_, chunk + h * sub_count, residuals.worker.data() + h * sub_count, sub_count,
                         encoded.data() + h * sub_bytes);
  }
  AlltoallOptions exchange;
  exchange.input = encoded.data();
  exchange.output = received.data();
  exchange.count = sub_bytes;
  exchange.dtype = DType::u8;
  alltoall(*cross_, exchange).wait();
  std::vector<float> sum(sub_count, 0.0f);
  for (int h = 0; h < hosts_; ++h) decode_grad_wire(wire_, received.data() + h * sub_bytes, sub_count, sum.data(), true);
  encode_with_feedback(wire_, sum.data(), residuals.server.data(), sub_count, encoded.data());
  AllgatherOptions gather;
  gather.input = encoded.data();
  gather.output = received.data();
  gather.count = sub_bytes;
  gather.dtype = DType::u8;
  allgather(*cross_, gather).wait();
  for (int h = 0; h < hosts_; ++h) {
    decode_grad_wire(wire_, received.data() + h * sub_bytes, sub_count, chunk + h * sub_count, false);
  }
}

std::vector<uint8_t> HostCompressedAllreduce::save_feedback() const {
  std::vector<uint8_t> out;
  put_u64(out, kFeedbackMagic);
  put_u64(out, static_cast<uint64_t>(wire_));
  put_u64(out, residuals_.size());
  for (const auto& [stream, r] : residuals_) {
    put_u64(out, static_cast<uint64_t>(stream));
    for (const auto* v : {&r.worker, &r.server}) {
      put_u64(out, v->size());
      put_floats(out, v->data(), v->size());
    }
  }
  return out;
}

void HostCompressedAllreduce::restore_feedback(const std::vector<uint8_t>& bytes,
                                               const std::map<int, size_t>& stream_counts) {
  size_t at = 0;
  GIANT_CHECK(take_u64(bytes, at, kFeedbackState) == kFeedbackMagic, "not a gradient wire feedback state");
  const auto wire = static_cast<GradWire>(take_u64(bytes, at, kFeedbackState));
  GIANT_CHECK(wire == wire_, std::string("gradient wire feedback state is for ") + grad_wire_name(wire) + ", not " +
                                 grad_wire_name(wire_));
  std::map<int, Residuals> restored;
  const uint64_t streams = take_u64(bytes, at, kFeedbackState);
  for (uint64_t s = 0; s < streams; ++s) {
    Residuals& r = restored[static_cast<int>(take_u64(bytes, at, kFeedbackState))];
    for (auto* v : {&r.worker, &r.server}) {
      const uint64_t n = take_u64(bytes, at, kFeedbackState);
      GIANT_CHECK(n <= (bytes.size() - at) / sizeof(float), "gradient wire feedback state is truncated");
      v->resize(n);
      take_floats(bytes, at, v->data(), n, kFeedbackState);
    }
  }
  GIANT_CHECK(at == bytes.size(), "gradient wire feedback state has trailing bytes");
  GIANT_CHECK(restored.size() == stream_counts.size(), "gradient wire feedback state holds " +
                                                           std::to_string(restored.size()) + " streams, not " +
                                                           std::to_string(stream_counts.size()));
  for (const auto& [stream, count] : stream_counts) {
    const auto found = restored.find(stream);
    GIANT_CHECK(found != restored.end() && found->second.worker.size() == residual_count(count) &&
                    found->second.server.size() == residual_count(count) / hosts_,
                "gradient wire feedback state does not match stream " + std::to_string(stream) + " of " +
                    std::to_string(count) + " elements");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  GIANT_CHECK(queue_.empty() && !running_job_, "restore_feedback with operations in flight");
  residuals_ = std::move(restored);
}

}  // namespace giant::ccl
