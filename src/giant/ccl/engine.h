// The engine behind a Communicator (internal): one thread per communicator
// that runs collectives one at a time in issue order, keeps point-to-point
// messages moving beside them, watches the peers (control messages, pings),
// and turns every fault into an error on every pending Work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <memory>
#include <optional>
#include <mutex>
#include <thread>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/config.h"
#include "giant/ccl/shm_group.h"
#include "giant/ccl/shm_mailbox.h"
#include "giant/ccl/tcp_transport.h"
#include "giant/ccl/work.h"
#include "giant/ccl/work_state.h"

namespace giant::ccl::detail {

class Engine;

// What a running collective sees: its rank, peers and a way to move bytes.
class OpContext {
  friend class Engine;

 public:
  // An inline context runs on the issuing thread (see Engine::submit): it
  // must not touch the sockets, so it moves data through shared memory only.
  OpContext(Engine& engine, uint64_t sequence, const OpDescriptor& desc, const Deadline& deadline,
            bool on_caller_thread = false);
  ~OpContext();
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;

  // Rank and size within the current scope (the whole communicator unless a
  // Scope narrows it); peers passed to send and recv are scope ranks.
  int rank() const;
  int size() const;
  const CommConfig& config() const;
  const OpDescriptor& desc() const { return desc_; }
  uint64_t sequence() const { return sequence_; }

  // Narrows rank(), size(), send and recv to a subset of the communicator's
  // ranks (in the given order) until destroyed; steps are offset by
  // step_base so that phases of one operation never share a message key.
  class Scope {
   public:
    Scope(OpContext& ctx, std::vector<int> members, uint64_t step_base);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpContext& ctx_;
    std::vector<int> saved_members_;
    uint64_t saved_base_;
  };

  // step numbers must be unique within the operation for each peer pair.
  Request* send(int peer, uint64_t step, const void* data, size_t nbytes);
  Request* recv(int peer, uint64_t step, void* data, size_t nbytes);
  void wait(Request* request);
  void wait_all();
  // A reusable buffer of the engine (slot 0..2), valid until the op ends.
  char* scratch(int slot, size_t bytes);
  // The pipeline segment for blocks of block_bytes through `hops` steps of a
  // ring or chain (cost_model.h, ring_segment_bytes).
  size_t segment_bytes(size_t block_bytes, int hops) const;

  // Between chunks of a large operation: where more urgent queued work may
  // run first. Every rank reaches the same boundaries and follows rank 0's
  // decision there, so they all run the same operations in the same order.
  void boundary();

  // Shared memory with the ranks of this host; nullptr when it is off.
  ShmGroup* shm() const;
  // For ShmGroup waits: between naps, gives up on the deadline, a dead peer
  // (local rank `local`) or a fault reported on the sockets.
  void shm_idle(int local);

 private:
  void progress();
  int to_global(int peer) const { return members_.empty() ? peer : members_[peer]; }
  Engine& engine_;
  uint64_t sequence_;
  OpDescriptor desc_;
  Deadline deadline_;
  std::list<Request> requests_;  // stable addresses; empty costs nothing (inline operations)
  std::vector<int> members_;  // empty: every rank
  uint64_t step_base_ = 0;
  bool on_caller_thread_ = false;
  uint64_t boundaries_ = 0;
  size_t segment_bytes_ = 0;  // the call's OpOptions::segment_bytes
};

struct CollectiveOp {
  OpDescriptor desc;
  std::chrono::milliseconds timeout{0};
  int priority = 0;  // larger is more urgent
  size_t segment_bytes = 0;  // OpOptions::segment_bytes
  std::function<void(OpContext&)> body;
  std::shared_ptr<WorkState> work = std::make_shared<WorkState>();
  uint64_t sequence = 0;
};

// A body for Engine::try_inline: it refers to the caller's callable, which
// outlives the call, instead of owning a copy (no allocation per operation).
class InlineBody {
 public:
  template <class F>
  explicit InlineBody(F& body)
      : body_(&body), call_([](void* b, OpContext& ctx) { (*static_cast<F*>(b))(ctx); }) {}
  void operator()(OpContext& ctx) const { call_(body_, ctx); }

 private:
  void* body_;
  void (*call_)(void*, OpContext&);
};

struct PeerLinks {
  std::vector<net::Fd> data;
  net::Fd control;
};

class Engine {
 public:
  Engine(int rank, int size, CommConfig config, std::vector<PeerLinks> links, std::unique_ptr<ShmGroup> shm);
  ~Engine();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommConfig& config() const { return config_; }

  ShmGroup* shm() const { return shm_.get(); }

  Work submit(std::unique_ptr<CollectiveOp> op);
  // A small shared-memory collective (it must never touch the sockets) runs
  // here, on the issuing thread, when nothing is queued or running ahead of
  // it: returns true with *work set, complete or failed. Returns false,
  // having issued nothing, when it must be submitted instead.
  bool try_inline(const OpDescriptor& desc, std::chrono::milliseconds timeout, InlineBody body, Work* work);
  Work submit_p2p(bool is_send, int peer, uint32_t tag, void* data, size_t nbytes,
                  std::chrono::milliseconds timeout);
  void abort(const std::string& reason);
  bool failed() const;
  // The operations issued here and not finished yet, oldest first, each as
  // "allreduce(count=..., ...), issued 3.2 s ago" or "recv from rank 1
  // (nbytes=..., tag=...), posted ...": what an issuing thread stuck in a
  // wait is waiting on. Callable from any thread.
  std::vector<std::string> describe_waiting() const;

 private:
  // An operation issued and perhaps not finished, for describe_waiting.
  struct Issued {
    std::weak_ptr<WorkState> work;  // expired or done: finished
    OpDescriptor desc;
    int peer = -1;  // point-to-point: the peer; -1: a collective
    bool is_send = false;
    std::chrono::steady_clock::time_point at;
  };
  // Records an issued operation (mutex_ held); drops finished ones now and
  // then, so the list stays as long as what is in flight.
  void track(Issued issued);
  friend class OpContext;
  struct P2POp {
    Request request;
    std::shared_ptr<WorkState> work = std::make_shared<WorkState>();
    std::chrono::milliseconds timeout{0};
    Deadline deadline = Deadline::never();
  };

  void main_loop();
  void run_collective(CollectiveOp& op);
  // Runs body on the calling thread; a failure is handed to the engine
  // thread (which tells the peers) and returned.
  std::exception_ptr run_inline(uint64_t sequence, const OpDescriptor& desc, std::chrono::milliseconds timeout,
                                InlineBody body);
  void at_boundary(OpContext& ctx, uint64_t boundary);
  // Rank 0: the most urgent queued operation, more urgent than `than`, that
  // every rank has announced; 0 if none.
  uint64_t pick_overtaking(int than);
  std::unique_ptr<CollectiveOp> take_queued(uint64_t sequence);
  // Followers tell rank 0 of queued work more urgent than what runs ahead of it.
  void announce_urgent();
  int running_priority() const;
  std::exception_ptr failure() const;
  // One poll round over every socket; throws on any fault.
  void progress_once(const Deadline& until);
  void absorb_submissions();
  void handle_control(int peer);
  // A peer that departed or vanished is a fault only once this rank still
  // waits on it after taking in all it sent: throws then.
  void judge_gone_peers();
  std::string gone_peer_message(int peer) const;
  // Before blaming a peer for a broken or closed socket, waits briefly for a
  // report from any peer on the control sockets and throws it if one comes.
  void explain_fault();
  // The report explain_fault() finds, else `fault` itself.
  std::exception_ptr explained(std::exception_ptr fault);
  void finish_p2p();
  // Moves point-to-point bytes through shared memory and rings the peers
  // that have something new to look at.
  void pump_mailbox();
  [[noreturn]] void raise_timeout(const std::string& what, std::vector<int> waited_on);
  std::vector<int> unresponsive_peers(std::chrono::milliseconds window);
  void send_control(int peer, ControlType type, uint64_t sequence, int culprit, FailureKind failure,
                    const std::string& reason);
  void fail(std::exception_ptr error);
  void wake();
  std::chrono::milliseconds timeout_or_default(std::chrono::milliseconds t) const {
    return t.count() > 0 ? t : config_.timeout;
  }

  const int rank_;
  const int size_;
  const CommConfig config_;
  std::vector<net::Fd> control_;
  std::vector<bool> departed_;   // said goodbye: its communicator is shut down
  std::vector<bool> vanished_;   // closed its control socket without a goodbye: its process ended
  std::vector<uint64_t> pong_sequence_;
  uint64_t ping_sequence_ = 0;
  bool probing_ = false;
  std::unique_ptr<TcpTransport> transport_;
  std::unique_ptr<ShmGroup> shm_;
  std::unique_ptr<ShmMailbox> mailbox_;  // point-to-point within the host; after shm_, which it uses
  std::vector<int> mailbox_wake_;
  net::Fd wake_fd_;
  std::vector<pollfd> poll_fds_;
  std::vector<char> scratch_[3];
  std::vector<std::unique_ptr<P2POp>> p2p_in_flight_;
  std::vector<std::shared_ptr<WorkState>> running_works_;  // collectives that failed, until fail() ends them
  std::vector<int> running_priorities_;                    // of the running collectives, outermost first
  std::vector<std::set<uint64_t>> announced_;              // rank 0: what each peer announced
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t> decisions_;  // followers: rank 0's decisions
  uint64_t announced_upto_ = 0;                            // followers: queue scanned up to this sequence

  // Shared with issuing threads, under mutex_.
  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<CollectiveOp>> queue_;
  std::vector<std::unique_ptr<P2POp>> p2p_submitted_;
  uint64_t next_sequence_ = 1;
  std::map<std::pair<int, uint32_t>, uint64_t> send_sequence_, recv_sequence_;
  std::string abort_reason_;
  bool abort_requested_ = false;
  std::vector<Issued> issued_;
  size_t prune_at_ = 64;
  std::optional<Issued> inline_op_;  // the operation an issuing thread runs inline, while it runs
  bool running_ = false;           // the engine thread runs a collective
  bool inline_running_ = false;    // an issuing thread runs one
  // Sequences that ran inline, as ranges [first, last], for the transport's
  // bookkeeping: a run of small operations costs the engine thread one step.
  std::vector<std::pair<uint64_t, uint64_t>> inline_done_;
  bool failure_told_ = false;          // fail() has run: the peers know (failure_ may be set before, inline)
  bool stopping_ = false;
  std::exception_ptr failure_;

  std::thread thread_;
};

}  // namespace giant::ccl::detail
