#include "giant/ccl/tcp_transport.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "giant/base/error.h"
#include "giant/base/host_memory.h"

namespace giant::ccl::detail {
namespace {

// A frame may announce at most this much; larger is a corrupt or hostile peer.
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 40;


}  // namespace

TcpTransport::TcpTransport(int rank, std::vector<std::vector<net::Fd>> data_sockets, size_t stripe_bytes)
    : rank_(rank), stripe_bytes_(stripe_bytes), peers_(data_sockets.size()) {
  for (size_t p = 0; p < data_sockets.size(); ++p) {
    for (auto& fd : data_sockets[p]) {
      net::set_nonblocking(fd.get(), true);
      Socket s;
      s.fd = std::move(fd);
      s.peer = static_cast<int>(p);
      peers_[p].sockets.push_back(sockets_.size());
      ++peers_[p].open_sockets;
      sockets_.push_back(std::move(s));
    }
  }
}

TcpTransport::~TcpTransport() = default;

void TcpTransport::mark_departed(int peer) { peers_[peer].departed = true; }

void TcpTransport::end_collective(uint64_t sequence) {
  active_.erase(sequence);
  ended_ahead_.insert(sequence);
  advance_unended();
}

void TcpTransport::end_unbegun(uint64_t first, uint64_t last) {
  if (first != next_unended_) {
    for (uint64_t s = first; s <= last; ++s) end_collective(s);
    return;
  }
  next_unended_ = last + 1;
  advance_unended();
}

void TcpTransport::advance_unended() {
  while (!ended_ahead_.empty() && ended_ahead_.erase(next_unended_) > 0) ++next_unended_;
}

void TcpTransport::begin_collective(uint64_t sequence, const OpDescriptor& desc) {
  active_[sequence] = desc;
  for (size_t p = 0; p < peers_.size(); ++p) {
    for (auto& kv : peers_[p].stashed) {
      if (!kv.first.is_p2p() && kv.first.hi == sequence) {
        check_descriptor(rank_, static_cast<int>(p), kv.first, kv.second->desc, desc);
      }
    }
  }
}

void TcpTransport::post_send(Request* r) {
  Peer& peer = peers_[r->peer];
  if (peer.open_sockets < static_cast<int>(peer.sockets.size()) || peer.sockets.empty()) {
    throw CommError(r->peer, rank_name(r->peer) + (peer.departed ? " has shut down its communicator"
                                                                  : " is not connected"));
  }
  size_t nsock = peer.sockets.size();
  size_t parts = 1;
  if (nsock > 1 && r->nbytes >= 2 * stripe_bytes_) parts = std::min(nsock, r->nbytes / stripe_bytes_);
  size_t first = peer.next_socket++ % nsock;
  r->frames_left = static_cast<int>(parts);
  size_t offset = 0;
  for (size_t i = 0; i < parts; ++i) {
    size_t len = r->nbytes / parts + (i < r->nbytes % parts ? 1 : 0);
    OutFrame f;
    f.header.key_hi = r->key.hi;
    f.header.key_lo = r->key.lo;
    f.header.offset = offset;
    f.header.nbytes = len;
    f.header.total = r->nbytes;
    f.header.desc = r->desc;
    f.data = r->data + offset;
    f.request = r;
    Socket& s = sockets_[peer.sockets[(first + i) % nsock]];
    bool idle = s.out.empty();
    s.out.push_back(f);
    offset += len;
    if (idle) write_ready(s);  // most small messages leave right away
  }
  ++peer.pending_sends;
}

void TcpTransport::post_recv(Request* r) {
  Peer& peer = peers_[r->peer];
  auto st = peer.stashed.find(r->key);
  if (st != peer.stashed.end()) {
    check_descriptor(rank_, r->peer, r->key, st->second->desc, r->desc);
    if (st->second->total != r->nbytes) {
      throw CommError(r->peer, "message size mismatch with " + rank_name(r->peer) + ": expected " +
                                   std::to_string(r->nbytes) + " bytes, it sent " +
                                   std::to_string(st->second->total) + " (" + r->desc.describe() + ")");
    }
    if (st->second->got == st->second->total) {
      complete_from_stash(r, *st->second);
      peer.stashed.erase(st);
    } else {
      st->second->waiter = r;  // the rest of it is still arriving
    }
    return;
  }
  if (peer.open_sockets == 0) {
    throw CommError(r->peer, rank_name(r->peer) + (peer.departed ? " has shut down its communicator"
                                                                  : " closed its connections"));
  }
  peer.posted[r->key] = r;
}

void TcpTransport::complete_from_stash(Request* r, const Stash& stash) {
  if (r->nbytes > 0) std::memcpy(r->data, stash.data.get(), r->nbytes);
  r->done_bytes = r->nbytes;
  r->complete = true;
}

void TcpTransport::add_poll_fds(std::vector<pollfd>& fds) {
  for (auto& s : sockets_) {
    short events = 0;
    if (s.open) events = static_cast<short>(POLLIN | (s.out.empty() ? 0 : POLLOUT));
    fds.push_back({s.open ? s.fd.get() : -1, events, 0});
  }
}

void TcpTransport::handle(const pollfd* fds, size_t count) {
  for (size_t i = 0; i < count && i < sockets_.size(); ++i) {
    Socket& s = sockets_[i];
    if (!s.open || fds[i].revents == 0) continue;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_ready(s);
    if (s.open && !s.out.empty() && (fds[i].revents & (POLLOUT | POLLERR))) write_ready(s);
  }
}

void TcpTransport::write_ready(Socket& s) {
  while (!s.out.empty()) {
    OutFrame& f = s.out.front();
    const size_t header_bytes = sizeof(FrameHeader);
    iovec iov[2];
    int n_iov = 0;
    if (f.sent < header_bytes) {
      iov[n_iov++] = {reinterpret_cast<char*>(&f.header) + f.sent, header_bytes - f.sent};
      if (f.header.nbytes > 0) iov[n_iov++] = {const_cast<char*>(f.data), f.header.nbytes};
    } else {
      size_t done = f.sent - header_bytes;
      iov[n_iov++] = {const_cast<char*>(f.data) + done, f.header.nbytes - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n_iov);
    ssize_t n = ::sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      peer_closed(s, "sending failed: " + net::describe_errno(errno));
    }
    f.sent += static_cast<size_t>(n);
    if (f.sent < header_bytes + f.header.nbytes) continue;
    Request* r = f.request;
    r->done_bytes += f.header.nbytes;
    s.out.pop_front();
    if (--r->frames_left == 0) {
      r->complete = true;
      --peers_[s.peer].pending_sends;
    }
  }
}

void TcpTransport::read_ready(Socket& s) {
  // Bounded so one busy socket cannot starve the others of the same poll round.
  for (int rounds = 0; rounds < 64; ++rounds) {
    ssize_t n;
    if (!s.in_payload) {
      n = ::recv(s.fd.get(), reinterpret_cast<char*>(&s.in_header) + s.in_header_bytes,
                 sizeof(FrameHeader) - s.in_header_bytes, MSG_DONTWAIT);
    } else {
      n = ::recv(s.fd.get(), s.in_dst, s.in_left, MSG_DONTWAIT);
    }
    if (n == 0) {
      // A peer that finished closes its sockets; only a cut frame, or a
      // message that can no longer arrive, makes that a fault.
      bool mid_frame = s.in_payload || s.in_header_bytes > 0;
      if (mid_frame) peer_closed(s, "closed the connection in the middle of a message");
      close_socket(s);
      const Peer& peer = peers_[s.peer];
      if (peer.open_sockets == 0 && (!peer.posted.empty() || peer.pending_sends > 0)) {
        peer_closed(s, "closed the connection");
      }
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      peer_closed(s, "receiving failed: " + net::describe_errno(errno));
    }
    if (!s.in_payload) {
      s.in_header_bytes += static_cast<size_t>(n);
      if (s.in_header_bytes == sizeof(FrameHeader)) start_frame(s);
    } else {
      s.in_dst += n;
      s.in_left -= static_cast<size_t>(n);
      if (s.in_left == 0) finish_frame(s);
    }
  }
}

void TcpTransport::start_frame(Socket& s) {
  const FrameHeader& h = s.in_header;
  Peer& peer = peers_[s.peer];
  if (h.magic != kFrameMagic || h.total > kMaxMessageBytes || h.offset > h.total ||
      h.nbytes > h.total - h.offset) {
    throw CommError(s.peer, "corrupt frame from " + rank_name(s.peer));
  }
  MessageKey key{h.key_hi, h.key_lo};
  if (!key.is_p2p()) {
    if (ended(key.hi)) {
      throw CommError(s.peer, "operation mismatch with " + rank_name(s.peer) + ": it sent data for operation #" +
                                  std::to_string(key.hi) + ", which rank " + std::to_string(rank_) +
                                  " has finished (the ranks issued different sequences of collectives)");
    }
    auto active = active_.find(key.hi);
    if (active != active_.end()) check_descriptor(rank_, s.peer, key, h.desc, active->second);
  }
  s.in_request = nullptr;
  s.in_stash = nullptr;
  auto posted = peer.posted.find(key);
  if (posted != peer.posted.end()) {
    Request* r = posted->second;
    check_descriptor(rank_, s.peer, key, h.desc, r->desc);
    if (h.total != r->nbytes) {
      throw CommError(s.peer, "message size mismatch with " + rank_name(s.peer) + ": expected " +
                                  std::to_string(r->nbytes) + " bytes, it sent " + std::to_string(h.total) +
                                  " (" + r->desc.describe() + ")");
    }
    s.in_request = r;
    s.in_dst = r->data + h.offset;
  } else {
    auto& slot = peer.stashed[key];
    if (!slot) {
      // The size comes off the wire: a message no receive here could hold,
      // or memory this host cannot give, is the peer's fault, named.
      const auto physical = static_cast<uint64_t>(physical_memory_bytes());
      if (physical > 0 && h.total > physical) stash_refused(s, key, h.total);
      slot = std::make_unique<Stash>();
      slot->data.reset(new (std::nothrow) char[h.total > 0 ? h.total : 1]);
      if (!slot->data) stash_refused(s, key, h.total);
      slot->total = h.total;
      slot->desc = h.desc;
    } else if (slot->total != h.total || slot->desc != h.desc) {
      throw CommError(s.peer, "corrupt frame from " + rank_name(s.peer) + " (inconsistent parts)");
    }
    s.in_stash = slot.get();
    s.in_dst = slot->data.get() + h.offset;
  }
  s.in_left = h.nbytes;
  s.in_frame_bytes = h.nbytes;
  s.in_payload = true;
  if (s.in_left == 0) finish_frame(s);
}

void TcpTransport::finish_frame(Socket& s) {
  Peer& peer = peers_[s.peer];
  MessageKey key{s.in_header.key_hi, s.in_header.key_lo};
  if (s.in_request != nullptr) {
    Request* r = s.in_request;
    r->done_bytes += s.in_frame_bytes;
    if (r->done_bytes == r->nbytes) {
      r->complete = true;
      peer.posted.erase(key);
    }
  } else {
    Stash* st = s.in_stash;
    st->got += s.in_frame_bytes;
    if (st->got == st->total && st->waiter != nullptr) {
      complete_from_stash(st->waiter, *st);
      peer.stashed.erase(key);
    }
  }
  s.in_payload = false;
  s.in_header_bytes = 0;
  s.in_request = nullptr;
  s.in_stash = nullptr;
}

void TcpTransport::stash_refused(Socket& s, const MessageKey& key, uint64_t total) {
  peers_[s.peer].stashed.erase(key);
  throw CommError(s.peer, rank_name(s.peer) + " sent part of a message of " + std::to_string(total) +
                              " bytes, more than this host can hold");
}

void TcpTransport::close_socket(Socket& s) {
  if (!s.open) return;
  s.open = false;
  s.fd.reset();
  --peers_[s.peer].open_sockets;
}

void TcpTransport::peer_closed(Socket& s, const std::string& why) {
  int peer = s.peer;
  close_socket(s);
  std::string detail = peers_[peer].departed ? " after shutting down its communicator"
                                             : " (did the process die?)";
  throw CommError(peer, rank_name(peer) + " " + why + detail);
}

void TcpTransport::drop_all() {
  for (auto& s : sockets_) {
    s.out.clear();
    s.in_request = nullptr;
    s.in_stash = nullptr;
    if (s.open && (s.in_payload || s.in_header_bytes > 0)) {
      // Mid-frame: the stream cannot be resumed, so stop reading it. The
      // socket itself stays open: closing it with unread data would reset the
      // connection before the engine has told the peer why.
      s.open = false;
      --peers_[s.peer].open_sockets;
    }
  }
  for (auto& p : peers_) {
    p.posted.clear();
    p.stashed.clear();
    p.pending_sends = 0;
  }
}

}  // namespace giant::ccl::detail
