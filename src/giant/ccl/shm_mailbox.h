// Point-to-point messages between the ranks of one host, through rings in
// shared memory (internal; engine thread only).
//
// Every ordered pair (sender, receiver) has a byte ring in the sender's
// segment: the sender writes frames (a FrameHeader, as on a TCP socket, then
// payload) and publishes its head; the receiver copies them out and publishes
// its tail in its own segment. Each side writes only its own memory. A
// message larger than a quarter of the ring goes as several frames, so the
// receiver drains one while the sender writes the next. Frames that arrive
// before their receive is posted are stashed, as TcpTransport does, so a
// sender never waits on the receiver's issue order.
//
// Neither side spins: after a pass that published something, progress()
// names the peers to wake (new data, or space a blocked sender waits for),
// and the engine rings them on the control socket it already polls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "giant/ccl/tcp_transport.h"  // Request
#include "giant/ccl/wire.h"

namespace giant::ccl::detail {

class ShmGroup;

class ShmMailbox {
 public:
  // Bytes of one rank's mailbox area for `local_size` ranks and rings of
  // `ring_bytes` (ShmGroup sizes its segments with it).
  static size_t area_bytes(int local_size, size_t ring_bytes);

  explicit ShmMailbox(ShmGroup& group);

  // Whether messages to and from global rank `peer` go through the mailbox
  // (it shares this host). The same answer on both sides of a pair.
  bool reaches(int peer) const;

  void post_send(Request* request);
  void post_recv(Request* request);

  // Moves every byte it can, completing requests. Appends to `wake` the
  // global ranks that should be told (deduplicated).
  void progress(std::vector<int>* wake);
  // Requests are posted and not yet complete: the engine then polls with a
  // short timeout, in case a wake-up crossed a pass.
  bool busy() const;
  // Requests to or from global rank `peer` are posted and not yet complete.
  bool waits_on(int peer) const;
  // Forgets every request (they point into user buffers) after a failure.
  void drop_all();

 private:
  struct Ring;
  struct Tail;
  struct Stash {
    std::unique_ptr<char[]> data;
    uint64_t total = 0;
    uint64_t got = 0;
    OpDescriptor desc;
  };
  struct Peer {
    int local = -1;
    std::deque<Request*> sends;  // in order of posting; the front is being written
    std::unordered_map<MessageKey, Request*, MessageKeyHash> posted;
    std::unordered_map<MessageKey, std::unique_ptr<Stash>, MessageKeyHash> stashed;
  };

  Ring& ring(int sender_local, int receiver_local) const;
  Tail& tail(int receiver_local, int sender_local) const;
  char* ring_data(int sender_local, int receiver_local) const;
  // Writes frames to `peer` while there is room; true if anything was published.
  bool write_frames(int peer);
  // Reads every frame from `peer`; true if anything was consumed, and then
  // *sender_waits says whether the peer waits for the space.
  bool read_frames(int peer, bool* sender_waits);
  void deliver(int peer, const FrameHeader& header, uint64_t payload_at);
  void copy_out(int sender_local, uint64_t at, void* dst, size_t nbytes) const;

  ShmGroup& group_;
  int rank_;
  size_t ring_bytes_;
  std::vector<Peer> peers_;  // by global rank; local == -1 for those off this host (and this rank)
  std::vector<int> local_peers_;  // global ranks that reaches() is true for
};

}  // namespace giant::ccl::detail
