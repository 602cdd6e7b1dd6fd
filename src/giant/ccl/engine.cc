#include "giant/ccl/engine.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>

#include "giant/base/error.h"
#include "giant/base/units.h"
#include "giant/ccl/cost_model.h"

namespace giant::ccl::detail {
namespace {

constexpr int kIdlePollMs = 1000;

}  // namespace

// ---------------------------------------------------------------- OpContext

OpContext::OpContext(Engine& engine, uint64_t sequence, const OpDescriptor& desc, const Deadline& deadline,
                     bool on_caller_thread)
    : engine_(engine), sequence_(sequence), desc_(desc), deadline_(deadline), on_caller_thread_(on_caller_thread) {}

OpContext::~OpContext() {
  for (const auto& r : requests_) {
    if (!r.complete) {
      // Unwinding from a fault: the transport must forget these buffers.
      engine_.transport_->drop_all();
      break;
    }
  }
}

int OpContext::rank() const {
  if (members_.empty()) return engine_.rank_;
  return static_cast<int>(std::find(members_.begin(), members_.end(), engine_.rank_) - members_.begin());
}
int OpContext::size() const { return members_.empty() ? engine_.size_ : static_cast<int>(members_.size()); }
const CommConfig& OpContext::config() const { return engine_.config_; }

OpContext::Scope::Scope(OpContext& ctx, std::vector<int> members, uint64_t step_base)
    : ctx_(ctx), saved_members_(std::move(ctx.members_)), saved_base_(ctx.step_base_) {
  GIANT_CHECK(std::find(members.begin(), members.end(), ctx.engine_.rank_) != members.end(),
              "a scope must include this rank");
  ctx.members_ = std::move(members);
  ctx.step_base_ = step_base;
}

OpContext::Scope::~Scope() {
  ctx_.members_ = std::move(saved_members_);
  ctx_.step_base_ = saved_base_;
}

ShmGroup* OpContext::shm() const { return engine_.shm_.get(); }

void OpContext::boundary() {
  GIANT_CHECK(!on_caller_thread_, "an operation run inline has no boundaries");
  // Nothing of this operation stays in flight across a boundary: the work
  // that may run there reuses the scratch buffers, and the next chunk too.
  wait_all();
  engine_.at_boundary(*this, boundaries_++);
}

void OpContext::shm_idle(int local) {
  ShmGroup* g = engine_.shm_.get();
  int peer = g->global_rank(local);
  if (on_caller_thread_) {
    // The engine thread watches the sockets meanwhile: take its verdict.
    if (auto failure = engine_.failure()) std::rethrow_exception(failure);
  }
  if (!g->alive(local)) {
    throw CommError(peer, rank_name(peer) + " died (its process is gone) during " + desc_.describe());
  }
  if (deadline_.expired()) {
    std::string what = desc_.describe() + " (operation #" + std::to_string(sequence_) + ")";
    if (on_caller_thread_) {
      double seconds = std::chrono::duration<double>(engine_.config_.timeout).count();
      throw TimeoutError(peer, what + " did not finish within " + format_seconds(seconds) + ": still waiting on " +
                                   rank_name(peer) + " (stopped or hung?)");
    }
    engine_.raise_timeout(what, {peer});
  }
  if (!on_caller_thread_) engine_.progress_once(Deadline::passed());  // control messages: aborts, pings, closed sockets
}

Request* OpContext::send(int peer, uint64_t step, const void* data, size_t nbytes) {
  requests_.emplace_back();
  Request* r = &requests_.back();
  r->kind = Request::Kind::send;
  r->peer = to_global(peer);
  r->key = {sequence_, step_base_ + step};
  r->data = const_cast<char*>(static_cast<const char*>(data));
  r->nbytes = nbytes;
  r->desc = desc_;
  engine_.transport_->post_send(r);
  return r;
}

Request* OpContext::recv(int peer, uint64_t step, void* data, size_t nbytes) {
  requests_.emplace_back();
  Request* r = &requests_.back();
  r->kind = Request::Kind::recv;
  r->peer = to_global(peer);
  r->key = {sequence_, step_base_ + step};
  r->data = static_cast<char*>(data);
  r->nbytes = nbytes;
  r->desc = desc_;
  engine_.transport_->post_recv(r);
  return r;
}

void OpContext::progress() {
  if (deadline_.expired()) {
    std::vector<int> waited;
    for (const auto& r : requests_) {
      if (!r.complete && std::find(waited.begin(), waited.end(), r.peer) == waited.end()) {
        // Receives first: the peer we wait to hear from is the likelier culprit.
        if (r.kind == Request::Kind::recv) waited.insert(waited.begin(), r.peer);
        else waited.push_back(r.peer);
      }
    }
    engine_.raise_timeout(desc_.describe() + " (operation #" + std::to_string(sequence_) + ")", waited);
  }
  engine_.progress_once(deadline_);
}

void OpContext::wait(Request* request) {
  while (!request->complete) progress();
}

void OpContext::wait_all() {
  for (auto& r : requests_) wait(&r);
}

size_t OpContext::segment_bytes(size_t block_bytes, int hops) const {
  return ring_segment_bytes(engine_.config_, segment_bytes_, block_bytes, hops);
}

char* OpContext::scratch(int slot, size_t bytes) {
  auto& buf = engine_.scratch_[slot];
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// ------------------------------------------------------------------- Engine

namespace {

// Messages above this are striped over a peer pair's sockets: a quarter of
// a fixed segment, 256 KiB when segments are chosen per call.
size_t stripe_bytes(const CommConfig& config) {
  return config.segment_bytes > 0 ? std::max<size_t>(config.segment_bytes / 4, 64 << 10) : 256 << 10;
}

}  // namespace

Engine::Engine(int rank, int size, CommConfig config, std::vector<PeerLinks> links, std::unique_ptr<ShmGroup> shm)
    : rank_(rank), size_(size), config_(std::move(config)), departed_(size, false), vanished_(size, false),
      pong_sequence_(size, 0),
      shm_(std::move(shm)), announced_(size) {
  std::vector<std::vector<net::Fd>> data(size);
  control_.resize(size);
  for (int p = 0; p < size && p < static_cast<int>(links.size()); ++p) {
    data[p] = std::move(links[p].data);
    control_[p] = std::move(links[p].control);
    if (control_[p].valid()) net::set_nonblocking(control_[p].get(), true);
  }
  transport_ = std::make_unique<TcpTransport>(rank, std::move(data), stripe_bytes(config_));
  if (shm_ && shm_->local_size() > 1) mailbox_ = std::make_unique<ShmMailbox>(*shm_);
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  GIANT_CHECK(wake_fd_.valid(), "eventfd failed: ", std::strerror(errno));
  thread_ = std::thread([this] { main_loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

void Engine::wake() {
  uint64_t one = 1;
  ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
  (void)n;
}

bool Engine::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_ != nullptr;
}

std::exception_ptr Engine::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

Work Engine::submit(std::unique_ptr<CollectiveOp> op) {
  Work work(op->work);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) {
      op->work->finish(failure_);
      return work;
    }
    GIANT_CHECK(!stopping_, "communicator is shutting down");
    op->sequence = next_sequence_++;
    track({op->work, op->desc, -1, false, std::chrono::steady_clock::now()});
    queue_.push_back(std::move(op));
  }
  wake();
  return work;
}

namespace {

Work failed_work(std::exception_ptr error) {
  auto state = std::make_shared<WorkState>();
  state->finish(std::move(error));
  return Work(std::move(state));
}

}  // namespace

bool Engine::try_inline(const OpDescriptor& desc, std::chrono::milliseconds timeout, InlineBody body, Work* work) {
  uint64_t sequence;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) {
      *work = failed_work(failure_);
      return true;
    }
    GIANT_CHECK(!stopping_, "communicator is shutting down");
    if (!queue_.empty() || running_ || inline_running_) return false;
    sequence = next_sequence_++;
    inline_running_ = true;
    inline_op_ = Issued{{}, desc, -1, false, std::chrono::steady_clock::now()};
  }
  std::exception_ptr error = run_inline(sequence, desc, timeout, body);
  bool queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inline_running_ = false;
    inline_op_.reset();
    if (!inline_done_.empty() && inline_done_.back().second + 1 == sequence) inline_done_.back().second = sequence;
    else inline_done_.emplace_back(sequence, sequence);
    queued = !queue_.empty();
  }
  if (queued) wake();  // work issued meanwhile waited for this one
  *work = error ? failed_work(error) : Work();
  return true;
}

std::exception_ptr Engine::run_inline(uint64_t sequence, const OpDescriptor& desc, std::chrono::milliseconds timeout,
                                      InlineBody body) {
  try {
    OpContext ctx(*this, sequence, desc, Deadline::after(timeout_or_default(timeout)), true);
    body(ctx);
    return nullptr;
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    {
      // Broken from now on; the engine thread tells the peers and fails the rest.
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_) error = failure_;
      else failure_ = error;
    }
    wake();
    return error;
  }
}

Work Engine::submit_p2p(bool is_send, int peer, uint32_t tag, void* data, size_t nbytes,
                        std::chrono::milliseconds timeout) {
  auto op = std::make_unique<P2POp>();
  Work work(op->work);
  Request& r = op->request;
  r.kind = is_send ? Request::Kind::send : Request::Kind::recv;
  r.peer = peer;
  r.data = static_cast<char*>(data);
  r.nbytes = nbytes;
  r.desc.kind = OpKind::send_recv;
  r.desc.count = nbytes;
  r.desc.root = static_cast<int32_t>(tag);
  op->timeout = timeout_or_default(timeout);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) {
      op->work->finish(failure_);
      return work;
    }
    GIANT_CHECK(!stopping_, "communicator is shutting down");
    auto& counter = (is_send ? send_sequence_ : recv_sequence_)[{peer, tag}];
    r.key = {kP2PBit | tag, counter++};
    track({op->work, r.desc, peer, is_send, std::chrono::steady_clock::now()});
    p2p_submitted_.push_back(std::move(op));
  }
  wake();
  return work;
}

void Engine::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ || abort_requested_) return;
    abort_requested_ = true;
    abort_reason_ = reason;
  }
  wake();
}

void Engine::main_loop() {
  try {
    while (true) {
      std::unique_ptr<CollectiveOp> op;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (failure_ && !failure_told_) std::rethrow_exception(failure_);  // from an inline operation
        if (stopping_ && !inline_running_) break;
        if (!queue_.empty() && !inline_running_) {
          op = std::move(queue_.front());
          queue_.pop_front();
          running_ = true;
        }
      }
      if (op) {
        for (auto& seen : announced_) seen.erase(op->sequence);
        run_collective(*op);
        std::lock_guard<std::mutex> lock(mutex_);
        running_ = false;
      } else {
        progress_once(Deadline::after(std::chrono::milliseconds(kIdlePollMs)));
      }
    }
    // Orderly shutdown: whatever is still pending can no longer complete.
    absorb_submissions();
    bool pending;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending = !queue_.empty() || !p2p_in_flight_.empty();
    }
    if (pending) throw CommError(rank_, "communicator destroyed while operations were pending");
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && control_[p].valid() && !departed_[p]) {
        send_control(p, ControlType::goodbye, 0, -1, FailureKind::comm, "");
      }
    }
  } catch (const TimeoutError&) {
    fail(std::current_exception());
  } catch (const CommError& e) {
    // A fault seen here first may be the echo of a peer's failure: prefer its report.
    bool first_hand = e.peer() != rank_ && !is_peer_report(e.what());
    fail(first_hand ? explained(std::current_exception()) : std::current_exception());
  } catch (...) {
    fail(std::current_exception());
  }
}

void Engine::run_collective(CollectiveOp& op) {
  Deadline deadline = Deadline::after(timeout_or_default(op.timeout));
  running_priorities_.push_back(op.priority);
  try {
    transport_->begin_collective(op.sequence, op.desc);  // may find a mismatch already
    OpContext ctx(*this, op.sequence, op.desc, deadline);
    ctx.segment_bytes_ = op.segment_bytes;
    op.body(ctx);
    ctx.wait_all();
  } catch (...) {
    // Unsettled requests point at the caller's buffers, which stay untouched
    // once the Work reports the error.
    transport_->drop_all();
    running_works_.push_back(op.work);  // fail() finishes it, after telling the peers
    running_priorities_.pop_back();
    throw;
  }
  running_priorities_.pop_back();
  transport_->end_collective(op.sequence);
  op.work->finish(nullptr);
}

int Engine::running_priority() const {
  return running_priorities_.empty() ? INT_MIN : running_priorities_.back();
}

void Engine::at_boundary(OpContext& ctx, uint64_t boundary) {
  for (uint64_t round = 0;; ++round) {
    uint64_t run = 0;
    if (rank_ == 0) {
      progress_once(Deadline::passed());  // take in the latest announcements
      run = pick_overtaking(running_priority());
      ScheduleBody body;
      body.boundary = boundary;
      body.round = round;
      body.run = run;
      std::string payload(reinterpret_cast<const char*>(&body), sizeof body);
      for (int p = 1; p < size_; ++p) {
        if (!departed_[p]) send_control(p, ControlType::schedule, ctx.sequence(), -1, FailureKind::comm, payload);
      }
    } else {
      announce_urgent();
      auto key = std::make_tuple(ctx.sequence(), boundary, round);
      while (decisions_.find(key) == decisions_.end()) {
        // Its decisions come before its sockets close: none can come now.
        if (departed_[0] || vanished_[0]) throw CommError(0, gone_peer_message(0) + " during " + ctx.desc().describe());
        ctx.progress();
      }
      run = decisions_[key];
      decisions_.erase(key);
    }
    if (run == 0) return;
    std::unique_ptr<CollectiveOp> op = take_queued(run);
    if (!op) throw CommError(0, "rank 0 scheduled operation #" + std::to_string(run) + ", which rank " +
                                    std::to_string(rank_) + " has not issued");
    for (auto& seen : announced_) seen.erase(run);
    run_collective(*op);
  }
}

uint64_t Engine::pick_overtaking(int than) {
  std::lock_guard<std::mutex> lock(mutex_);
  const CollectiveOp* best = nullptr;
  for (const auto& op : queue_) {
    if (op->priority <= than || (best && op->priority <= best->priority)) continue;
    bool everyone = true;
    for (int p = 1; p < size_ && everyone; ++p) everyone = departed_[p] || announced_[p].count(op->sequence) > 0;
    if (everyone) best = op.get();
  }
  return best ? best->sequence : 0;
}

std::unique_ptr<CollectiveOp> Engine::take_queued(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if ((*it)->sequence == sequence) {
      auto op = std::move(*it);
      queue_.erase(it);
      return op;
    }
  }
  return nullptr;
}

void Engine::announce_urgent() {
  if (rank_ == 0 || running_priorities_.empty()) return;
  std::vector<uint64_t> urgent;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    int lowest_ahead = *std::min_element(running_priorities_.begin(), running_priorities_.end());
    for (const auto& op : queue_) {
      if (op->sequence > announced_upto_ && op->priority > lowest_ahead) urgent.push_back(op->sequence);
      lowest_ahead = std::min(lowest_ahead, op->priority);
      announced_upto_ = std::max(announced_upto_, op->sequence);
    }
  }
  for (uint64_t sequence : urgent) send_control(0, ControlType::announce, sequence, -1, FailureKind::comm, "");
}

void Engine::absorb_submissions() {
  std::vector<std::unique_ptr<P2POp>> fresh;
  std::vector<std::pair<uint64_t, uint64_t>> ran_inline;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ && !failure_told_) std::rethrow_exception(failure_);  // from an inline operation
    if (abort_requested_) {
      throw CommError(rank_, "aborted by rank " + std::to_string(rank_) + ": " + abort_reason_);
    }
    ran_inline.swap(inline_done_);
    if (stopping_ && (!queue_.empty() || !p2p_in_flight_.empty() || !p2p_submitted_.empty())) {
      throw CommError(rank_, "communicator destroyed while operations were pending");
    }
    fresh.swap(p2p_submitted_);
  }
  for (auto [first, last] : ran_inline) transport_->end_unbegun(first, last);
  announce_urgent();
  for (auto& op : fresh) {
    op->deadline = Deadline::after(op->timeout);
    P2POp* raw = op.get();
    p2p_in_flight_.push_back(std::move(op));
    const bool is_send = raw->request.kind == Request::Kind::send;
    if (mailbox_ && mailbox_->reaches(raw->request.peer)) {
      if (is_send) mailbox_->post_send(&raw->request);
      else mailbox_->post_recv(&raw->request);
    } else if (is_send) {
      transport_->post_send(&raw->request);
    } else {
      transport_->post_recv(&raw->request);
    }
  }
  pump_mailbox();
  finish_p2p();
}

void Engine::pump_mailbox() {
  if (!mailbox_) return;
  mailbox_wake_.clear();
  mailbox_->progress(&mailbox_wake_);
  for (int peer : mailbox_wake_) {
    if (!departed_[peer]) send_control(peer, ControlType::doorbell, 0, -1, FailureKind::comm, "");
  }
}

void Engine::finish_p2p() {
  auto done = std::stable_partition(p2p_in_flight_.begin(), p2p_in_flight_.end(),
                                    [](const auto& op) { return !op->request.complete; });
  for (auto it = done; it != p2p_in_flight_.end(); ++it) (*it)->work->finish(nullptr);
  p2p_in_flight_.erase(done, p2p_in_flight_.end());
  if (probing_) return;
  for (auto& op : p2p_in_flight_) {
    if (op->deadline.expired()) {
      const Request& r = op->request;
      raise_timeout(std::string(r.kind == Request::Kind::send ? "send to " : "recv from ") + rank_name(r.peer) +
                        " (tag " + std::to_string(r.key.hi & ~kP2PBit) + ", " + std::to_string(r.nbytes) + " bytes)",
                    {r.peer});
    }
  }
}

void Engine::progress_once(const Deadline& until) {
  poll_fds_.clear();
  poll_fds_.push_back({wake_fd_.get(), POLLIN, 0});
  for (int p = 0; p < size_; ++p) poll_fds_.push_back({control_[p].valid() ? control_[p].get() : -1, POLLIN, 0});
  size_t data_start = poll_fds_.size();
  transport_->add_poll_fds(poll_fds_);

  Deadline wake_by = until;
  for (const auto& op : p2p_in_flight_) wake_by = wake_by.earlier(op->deadline);
  // A doorbell rung while this rank was busy elsewhere is not lost (the
  // control socket keeps it), but look at the rings now and then anyway.
  if (mailbox_ && mailbox_->busy()) wake_by = wake_by.earlier(Deadline::after(std::chrono::milliseconds(10)));
  int rc = ::poll(poll_fds_.data(), poll_fds_.size(), wake_by.remaining_ms(kIdlePollMs));
  if (rc < 0 && errno != EINTR) throw CommError(rank_, std::string("poll failed: ") + std::strerror(errno));
  if (rc > 0) {
    if (poll_fds_[0].revents) {
      uint64_t n;
      while (::read(wake_fd_.get(), &n, sizeof n) > 0) {
      }
    }
    for (int p = 0; p < size_; ++p) {
      if (poll_fds_[1 + p].revents) handle_control(p);
    }
    transport_->handle(poll_fds_.data() + data_start, poll_fds_.size() - data_start);
  }
  absorb_submissions();
  judge_gone_peers();
}

}  // namespace giant::ccl::detail
