// The engine's control messages and faults: the control sockets (pings,
// goodbyes, schedules, aborts), judging peers that are gone, timeouts and
// whom to blame, and failing every operation with the same error.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/base/units.h"
#include "giant/ccl/control_channel.h"
#include "giant/ccl/engine.h"

namespace giant::ccl::detail {
namespace {

// Control messages are tiny; a peer that cannot take one in a second is stuck.
Deadline control_io_deadline() { return Deadline::after(std::chrono::seconds(1)); }

}  // namespace

std::exception_ptr Engine::explained(std::exception_ptr fault) {
  try {
    explain_fault();
  } catch (...) {
    return std::current_exception();  // the report of the peer that saw it first
  }
  return fault;
}

void Engine::judge_gone_peers() {
  // The tcp transport judges its own sockets as they close, and shared-memory
  // collectives check that the peer's process lives; left are the mailbox's
  // messages, just pumped, which nothing more can complete.
  if (!mailbox_) return;
  for (int p = 0; p < size_; ++p) {
    if ((departed_[p] || vanished_[p]) && mailbox_->reaches(p) && mailbox_->waits_on(p)) {
      throw CommError(p, gone_peer_message(p) + " with messages to or from it unfinished");
    }
  }
}

std::string Engine::gone_peer_message(int peer) const {
  if (departed_[peer]) return rank_name(peer) + " has shut down its communicator";
  return rank_name(peer) + " closed its connections unexpectedly (did the process die?)";
}

void Engine::explain_fault() {
  // A peer that failed tells everyone why on its control socket and may then
  // exit, resetting its sockets. Its report (the real culprit and reason) is
  // worth more than the reset or the silence we saw, so give the reports
  // already on their way a moment to arrive.
  Deadline grace = Deadline::after(std::chrono::milliseconds(100));
  std::vector<pollfd> fds;
  std::vector<int> peers;
  while (!grace.expired()) {
    fds.clear();
    peers.clear();
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && control_[p].valid()) {
        fds.push_back({control_[p].get(), POLLIN, 0});
        peers.push_back(p);
      }
    }
    if (fds.empty() || ::poll(fds.data(), fds.size(), grace.remaining_ms(100)) <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      try {
        handle_control(peers[i]);
      } catch (const CommError& report) {
        if (is_peer_report(report.what())) throw;
        // Another closed socket: keep listening to the rest.
      }
    }
  }
}

void Engine::handle_control(int peer) {
  ControlHeader h;
  ssize_t n = ::recv(control_[peer].get(), &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    // A rank may exit straight after its last operation, with or without
    // destroying its communicator. What it sent before is still to be taken
    // in (the data sockets and shared memory are read after this one), so it
    // is judged by what this rank still waits on, not by the closing.
    control_[peer].reset();
    if (!departed_[peer]) vanished_[peer] = true;
    return;
  }
  const ControlMessage m = read_control(control_[peer].get(), peer, size_, control_io_deadline());
  switch (m.header.type) {
    case ControlType::ping:
      send_control(peer, ControlType::pong, m.header.sequence, -1, FailureKind::comm, "");
      break;
    case ControlType::pong:
      pong_sequence_[peer] = std::max(pong_sequence_[peer], m.header.sequence);
      break;
    case ControlType::goodbye:
      departed_[peer] = true;
      transport_->mark_departed(peer);
      break;
    case ControlType::doorbell:  // the mailbox has news; progress_once pumps it next
      break;
    case ControlType::announce:
      announced_[peer].insert(m.header.sequence);
      break;
    case ControlType::schedule:
      decisions_[std::make_tuple(m.header.sequence, m.schedule.boundary, m.schedule.round)] = m.schedule.run;
      break;
    case ControlType::abort: {
      std::string what = peer_report(peer, m.reason);
      // The same error type and culprit on every rank, whoever saw it first.
      if (m.header.failure == FailureKind::timeout) throw TimeoutError(m.header.culprit, what);
      throw CommError(m.header.culprit, what);
    }
  }
}

void Engine::send_control(int peer, ControlType type, uint64_t sequence, int culprit, FailureKind failure,
                          const std::string& reason) {
  if (!control_[peer].valid()) return;
  const std::string message = encode_control(type, sequence, culprit, failure, reason);
  try {
    net::send_all(control_[peer].get(), message.data(), message.size(), control_io_deadline());
  } catch (const CommError&) {
    // The peer is gone or stuck; what it misses here it learns from its own checks.
  }
}

std::vector<int> Engine::unresponsive_peers(std::chrono::milliseconds window) {
  uint64_t sequence = ++ping_sequence_;
  std::vector<int> asked;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && control_[p].valid() && !departed_[p]) {
      send_control(p, ControlType::ping, sequence, -1, FailureKind::comm, "");
      asked.push_back(p);
    }
  }
  Deadline until = Deadline::after(window);
  probing_ = true;
  try {
    while (!until.expired()) {
      bool all = std::all_of(asked.begin(), asked.end(), [&](int p) { return pong_sequence_[p] >= sequence; });
      if (all) break;
      progress_once(until);
    }
  } catch (...) {
    probing_ = false;
    throw;
  }
  probing_ = false;
  std::vector<int> silent;
  for (int p : asked) {
    if (pong_sequence_[p] < sequence) silent.push_back(p);
  }
  return silent;
}

void Engine::raise_timeout(const std::string& what, std::vector<int> waited_on) {
  // A stopped process keeps its sockets open, so silence is the only sign:
  // ask every peer and blame the one that does not answer.
  auto window = std::clamp(config_.timeout / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(2000));
  std::vector<int> silent = unresponsive_peers(window);
  for (int p : waited_on) {
    if (departed_[p] || vanished_[p]) throw CommError(p, what + ": " + gone_peer_message(p));
  }
  int culprit = -1;
  for (int p : waited_on) {
    if (std::find(silent.begin(), silent.end(), p) != silent.end()) {
      culprit = p;
      break;
    }
  }
  if (culprit < 0 && !silent.empty()) culprit = silent.front();
  std::string why;
  if (culprit >= 0) {
    why = rank_name(culprit) + " does not respond (stopped or hung?)";
  } else if (!waited_on.empty()) {
    culprit = waited_on.front();
    why = "still waiting on " + rank_name(culprit) + ", which responds but has not sent its part";
  } else {
    why = "no peer to blame";
  }
  double seconds = std::chrono::duration<double>(config_.timeout).count();
  throw TimeoutError(culprit, what + " did not finish within " + format_seconds(seconds) + ": " + why);
}

void Engine::fail(std::exception_ptr error) {
  std::deque<std::unique_ptr<CollectiveOp>> queued;
  std::vector<std::unique_ptr<P2POp>> submitted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_told_) return;
    failure_told_ = true;
    if (failure_) error = failure_;  // an inline operation failed first
    failure_ = error;
    queued.swap(queue_);
    submitted.swap(p2p_submitted_);
  }
  transport_->drop_all();
  if (mailbox_) mailbox_->drop_all();
  int culprit = -1;
  FailureKind kind = FailureKind::comm;
  std::string reason = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    culprit = e.peer();
    kind = FailureKind::timeout;
    reason = e.what();
  } catch (const CommError& e) {
    culprit = e.peer();
    reason = e.what();
  } catch (const std::exception& e) {
    culprit = rank_;
    reason = e.what();
  } catch (...) {
  }
  const bool adopted = is_peer_report(reason);
  GIANT_LOG(debug) << "communicator failed: " << reason;
  // Tell the peers before waking any waiter: a woken caller may exit at once,
  // and the peers would then see only a reset instead of the reason.
  if (!adopted) {  // an adopted report was sent to everyone by its author
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && !departed_[p]) send_control(p, ControlType::abort, 0, culprit, kind, reason);
    }
  }
  for (auto& work : running_works_) work->finish(error);
  running_works_.clear();
  for (auto& op : queued) op->work->finish(error);
  for (auto& op : submitted) op->work->finish(error);
  for (auto& op : p2p_in_flight_) op->work->finish(error);
  p2p_in_flight_.clear();
}

}  // namespace giant::ccl::detail
