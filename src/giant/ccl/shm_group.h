// Shared memory between the ranks of one host (internal).
//
// Every rank owns one memfd segment: a control block of counters that only
// it writes, and two data slots. Its peers on the host map the segment
// through /proc/<pid>/fd, so nothing is left behind when a process dies,
// however it dies. The shm algorithms (shm_algorithms.cc) move data in
// numbered steps: a rank fills its slot for step s, publishes `posted = s`,
// and peers read (and reduce) the slot in place; slots alternate by step, so
// step s+1 overlaps the readers of step s. Point-to-point messages have
// rings of their own after the slots (shm_mailbox.h). A waiter spins briefly, then
// sleeps on a futex in the counter, so waiting never burns a core the ranks
// need for compute.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "giant/base/timer.h"
#include "giant/ccl/config.h"
#include "giant/ccl/store.h"
#include "giant/ccl/wire.h"

namespace giant::ccl {
struct HostTopology;
}

namespace giant::ccl::detail {

// Shared buffers (shared_buffer.h) of a communicator, found by address when
// an operation is issued. Thread-safe.
class BufferRegistry {
 public:
  struct Entry {
    int id = -1;                // the same on every rank: buffers are allocated collectively, in order
    size_t nbytes = 0;
    std::vector<char*> views;   // every local rank's buffer
  };
  int take_id() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_id_++;
  }
  void add(Entry entry);
  void remove(int id);
  // The buffer of this rank (local rank `me`) holding [data, data + nbytes),
  // and where in it; false if there is none.
  bool find(const void* data, size_t nbytes, int me, Entry* entry, size_t* offset) const;

 private:
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  int next_id_ = 0;
};

class ShmGroup {
 public:
  enum Counter { posted = 0, reduced = 1, consumed = 2, kCounters = 3 };

  // Collective over the whole communicator. Ranks that share a host map each
  // other's segments; then every rank says through the store whether it
  // managed, and shared memory is used only if all did (so that every rank
  // makes the same choice of algorithm). Returns nullptr when it is off
  // (ccl.transport=tcp, no two ranks share a host, or a rank failed).
  static std::unique_ptr<ShmGroup> create(Store& store, const HostTopology& topology, int rank,
                                          const CommConfig& config, const Deadline& deadline);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int local_rank() const { return local_rank_; }
  int local_size() const { return static_cast<int>(peers_.size()); }
  // The communicator rank of local rank `local`.
  int global_rank(int local) const { return peers_[local].rank; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Data slot `which` (0 or 1) of local rank `local`.
  char* slot(int local, uint32_t which) const;

  // Reserves `count` consecutive steps (the same numbers on every local rank,
  // since they run the same operations in the same order); returns the first.
  uint32_t take_steps(uint32_t count) {
    uint32_t first = next_step_;
    next_step_ += count;
    return first;
  }

  // What this rank runs at step s (written before publishing posted=s), so
  // that peers can tell a mismatched operation from their own: the
  // operation's sequence number and descriptor, and their fingerprint.
  static uint64_t fingerprint(uint64_t sequence, const OpDescriptor& desc);
  void label(uint32_t step, uint64_t sequence, const OpDescriptor& desc, uint64_t fingerprint);
  // Whether local rank `local` labelled step s with this fingerprint (valid
  // once it posted s); label_of gives its whole label for the error message.
  bool label_matches(int local, uint32_t step, uint64_t fingerprint) const;
  std::pair<uint64_t, OpDescriptor> label_of(int local, uint32_t step) const;

  // Sets this rank's counter and wakes peers sleeping on it.
  void publish(Counter counter, uint32_t value);
  // Returns once counter `counter` of local rank `local` has reached `value`
  // (wrap-around safe). Between naps of at most a few milliseconds it calls
  // idle(local), which may throw to give up (deadline, dead peer, abort);
  // its verdict stands only if the counter, read again after it, still falls
  // short (a peer may publish and exit between two looks).
  void wait_for(int local, Counter counter, uint32_t value, const std::function<void(int local)>& idle);
  // Waits until every local rank's counter has reached value.
  void wait_all(Counter counter, uint32_t value, const std::function<void(int local)>& idle);
  // False once the peer's process is gone.
  bool alive(int local) const;

  const std::shared_ptr<BufferRegistry>& buffers() const { return buffers_; }

  // Local rank `local`'s area for point-to-point rings (ShmMailbox lays it
  // out), after its data slots; each ring holds ring_bytes().
  char* mailbox_area(int local) const;
  size_t ring_bytes() const { return ring_bytes_; }

 private:
  struct Segment;
  struct Peer {
    int rank = -1;
    pid_t pid = 0;
    Segment* segment = nullptr;  // mapped
  };
  ShmGroup() = default;
  std::atomic<uint32_t>& word(int local, Counter counter) const;
  std::atomic<uint32_t>& sleepers(int local, Counter counter) const;

  int local_rank_ = 0;
  size_t slot_bytes_ = 0;
  size_t ring_bytes_ = 0;
  size_t segment_bytes_ = 0;
  int own_fd_ = -1;
  std::vector<Peer> peers_;  // in local rank order, this rank included
  uint32_t next_step_ = 1;
  std::shared_ptr<BufferRegistry> buffers_ = std::make_shared<BufferRegistry>();
};

}  // namespace giant::ccl::detail
