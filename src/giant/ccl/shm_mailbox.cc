#include "giant/ccl/shm_mailbox.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "giant/base/error.h"
#include "giant/ccl/shm_group.h"

namespace giant::ccl::detail {
namespace {

constexpr size_t kLine = 64;
constexpr size_t kHeader = sizeof(FrameHeader);
// A frame shorter than this waits for more room instead of being cut off.
constexpr size_t kMinPiece = 4096;
// Passes of one progress() call while bytes keep moving.
constexpr int kMaxPasses = 64;

size_t round8(size_t n) { return (n + 7) & ~size_t{7}; }


}  // namespace

// In the sender's segment, one per receiver: where the sender has written
// up to, and whether it waits for the receiver to free space.
struct alignas(kLine) ShmMailbox::Ring {
  std::atomic<uint64_t> head{0};
  std::atomic<uint32_t> want_space{0};
};
// In the receiver's segment, one per sender: what it has consumed.
struct alignas(kLine) ShmMailbox::Tail {
  std::atomic<uint64_t> tail{0};
};
static_assert(sizeof(FrameHeader) % 8 == 0, "frames stay 8-byte aligned in the ring");

size_t ShmMailbox::area_bytes(int local_size, size_t ring_bytes) {
  const size_t n = static_cast<size_t>(local_size);
  return n * sizeof(Ring) + n * sizeof(Tail) + n * ring_bytes;
}

ShmMailbox::ShmMailbox(ShmGroup& group)
    : group_(group), rank_(group.global_rank(group.local_rank())), ring_bytes_(group.ring_bytes()) {
  GIANT_CHECK(ring_bytes_ % kLine == 0 && ring_bytes_ >= 4 * (kHeader + kMinPiece), "mailbox rings of ",
              ring_bytes_, " bytes are too small");
  int highest = 0;
  for (int local = 0; local < group_.local_size(); ++local) highest = std::max(highest, group_.global_rank(local));
  peers_ = std::vector<Peer>(static_cast<size_t>(highest) + 1);
  for (int local = 0; local < group_.local_size(); ++local) {
    if (local == group_.local_rank()) continue;
    const int peer = group_.global_rank(local);
    peers_[peer].local = local;
    local_peers_.push_back(peer);
  }
}

ShmMailbox::Ring& ShmMailbox::ring(int sender_local, int receiver_local) const {
  return reinterpret_cast<Ring*>(group_.mailbox_area(sender_local))[receiver_local];
}

ShmMailbox::Tail& ShmMailbox::tail(int receiver_local, int sender_local) const {
  char* area = group_.mailbox_area(receiver_local);
  return reinterpret_cast<Tail*>(area + group_.local_size() * sizeof(Ring))[sender_local];
}

char* ShmMailbox::ring_data(int sender_local, int receiver_local) const {
  const size_t n = static_cast<size_t>(group_.local_size());
  return group_.mailbox_area(sender_local) + n * (sizeof(Ring) + sizeof(Tail)) +
         static_cast<size_t>(receiver_local) * ring_bytes_;
}

bool ShmMailbox::reaches(int peer) const {
  return peer >= 0 && peer < static_cast<int>(peers_.size()) && peers_[peer].local >= 0;
}

void ShmMailbox::post_send(Request* request) { peers_[request->peer].sends.push_back(request); }

void ShmMailbox::post_recv(Request* request) {
  Peer& p = peers_[request->peer];
  auto found = p.stashed.find(request->key);
  if (found != p.stashed.end()) {
    const Stash& s = *found->second;
    check_descriptor(rank_, request->peer, request->key, s.desc, request->desc);
    if (s.got > 0) std::memcpy(request->data, s.data.get(), s.got);
    request->done_bytes = s.got;
    const bool whole = s.got == s.total;
    p.stashed.erase(found);
    if (whole) {
      request->complete = true;
      return;
    }
  }
  p.posted[request->key] = request;  // the rest of it goes straight to the buffer
}

void ShmMailbox::progress(std::vector<int>* wake) {
  // Pass after pass while bytes move: when both sides are at it, the sender
  // refills what the receiver frees without waiting for a doorbell.
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    bool moved = false;
    for (int peer : local_peers_) {
      const bool wrote = write_frames(peer);
      bool freed_for_waiter = false;
      const bool read = read_frames(peer, &freed_for_waiter);
      moved = moved || wrote || read;
      if ((wrote || freed_for_waiter) && std::find(wake->begin(), wake->end(), peer) == wake->end()) {
        wake->push_back(peer);
      }
    }
    if (!moved) break;
  }
}

bool ShmMailbox::waits_on(int peer) const { return !peers_[peer].sends.empty() || !peers_[peer].posted.empty(); }

bool ShmMailbox::busy() const {
  for (int peer : local_peers_) {
    if (!peers_[peer].sends.empty() || !peers_[peer].posted.empty()) return true;
  }
  return false;
}

void ShmMailbox::drop_all() {
  for (Peer& p : peers_) {
    p.sends.clear();
    p.posted.clear();
    p.stashed.clear();
  }
}

bool ShmMailbox::write_frames(int peer) {
  Peer& p = peers_[peer];
  if (p.sends.empty()) return false;
  const int me = group_.local_rank();
  Ring& r = ring(me, p.local);
  r.want_space.store(0, std::memory_order_relaxed);
  std::atomic<uint64_t>& consumed = tail(p.local, me).tail;
  char* data = ring_data(me, p.local);
  uint64_t head = r.head.load(std::memory_order_relaxed);
  uint64_t seen_tail = consumed.load(std::memory_order_acquire);
  auto put = [&](uint64_t at, const void* src, size_t nbytes) {
    if (nbytes == 0) return;
    const size_t pos = at % ring_bytes_;
    const size_t first = std::min(nbytes, ring_bytes_ - pos);
    std::memcpy(data + pos, src, first);
    std::memcpy(data, static_cast<const char*>(src) + first, nbytes - first);
  };
  bool published = false;
  while (!p.sends.empty()) {
    Request* request = p.sends.front();
    const uint64_t free = ring_bytes_ - (head - seen_tail);
    const uint64_t left = request->nbytes - request->done_bytes;
    uint64_t piece = std::min<uint64_t>(left, ring_bytes_ / 4);
    if (free < kHeader + round8(piece)) {
      // Cut the piece to the room there is, unless that is only a sliver.
      const uint64_t room = free > kHeader ? (free - kHeader) & ~uint64_t{7} : 0;
      piece = room >= std::min<uint64_t>(piece, kMinPiece) && room > 0 ? std::min(piece, room) : UINT64_MAX;
    }
    if (piece == UINT64_MAX) {
      // Full: ask the receiver to say when it frees space, then look once
      // more (it may have freed some before it could see the request).
      r.want_space.store(1, std::memory_order_seq_cst);
      const uint64_t again = consumed.load(std::memory_order_seq_cst);
      if (again == seen_tail) break;
      seen_tail = again;
      continue;
    }
    FrameHeader h;
    h.key_hi = request->key.hi;
    h.key_lo = request->key.lo;
    h.offset = request->done_bytes;
    h.nbytes = piece;
    h.total = request->nbytes;
    h.desc = request->desc;
    put(head, &h, kHeader);
    put(head + kHeader, request->data + request->done_bytes, piece);
    head += kHeader + round8(piece);
    request->done_bytes += piece;
    published = true;
    if (request->done_bytes == request->nbytes) {
      request->complete = true;  // the bytes are in the ring: the buffer is free again
      p.sends.pop_front();
    }
  }
  if (published) r.head.store(head, std::memory_order_release);
  return published;
}

bool ShmMailbox::read_frames(int peer, bool* sender_waits) {
  Peer& p = peers_[peer];
  const int me = group_.local_rank();
  Ring& r = ring(p.local, me);
  std::atomic<uint64_t>& consumed = tail(me, p.local).tail;
  const uint64_t head = r.head.load(std::memory_order_acquire);
  uint64_t at = consumed.load(std::memory_order_relaxed);
  if (at == head) return false;
  while (at != head) {
    FrameHeader h;
    copy_out(p.local, at, &h, kHeader);
    if (h.magic != kFrameMagic || h.nbytes > ring_bytes_ || h.offset > h.total || h.nbytes > h.total - h.offset ||
        head - at < kHeader + round8(h.nbytes)) {
      throw CommError(peer, "corrupt message frame in shared memory from " + rank_name(peer));
    }
    deliver(peer, h, at + kHeader);
    at += kHeader + round8(h.nbytes);
    consumed.store(at, std::memory_order_seq_cst);  // frame by frame: the sender may refill at once
  }
  // Pairs with the sender's store of want_space before its second look.
  *sender_waits = r.want_space.load(std::memory_order_seq_cst) != 0;
  return true;
}

void ShmMailbox::deliver(int peer, const FrameHeader& h, uint64_t payload_at) {
  Peer& p = peers_[peer];
  const MessageKey key{h.key_hi, h.key_lo};
  auto posted = p.posted.find(key);
  if (posted != p.posted.end()) {
    Request* request = posted->second;
    check_descriptor(rank_, peer, key, h.desc, request->desc);
    copy_out(p.local, payload_at, request->data + h.offset, h.nbytes);
    request->done_bytes += h.nbytes;
    if (request->done_bytes == request->nbytes) {
      request->complete = true;
      p.posted.erase(posted);
    }
    return;
  }
  std::unique_ptr<Stash>& s = p.stashed[key];
  if (!s) {
    s = std::make_unique<Stash>();
    s->data.reset(new char[std::max<uint64_t>(h.total, 1)]);
    s->total = h.total;
    s->desc = h.desc;
  }
  if (h.offset != s->got || h.total != s->total) {
    throw CommError(peer, "corrupt message frame in shared memory from " + rank_name(peer) + " (out of order)");
  }
  copy_out(p.local, payload_at, s->data.get() + h.offset, h.nbytes);
  s->got += h.nbytes;
}

void ShmMailbox::copy_out(int sender_local, uint64_t at, void* dst, size_t nbytes) const {
  if (nbytes == 0) return;  // dst may be null then
  const char* data = ring_data(sender_local, group_.local_rank());
  const size_t pos = at % ring_bytes_;
  const size_t first = std::min(nbytes, ring_bytes_ - pos);
  std::memcpy(dst, data + pos, first);
  std::memcpy(static_cast<char*>(dst) + first, data, nbytes - first);
}

}  // namespace giant::ccl::detail
