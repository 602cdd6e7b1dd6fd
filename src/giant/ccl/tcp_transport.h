// Moves messages between ranks over TCP (internal; engine thread only).
//
// Every peer pair has several data sockets. A message is a send Request on
// one side and a recv Request with the same key on the other; large messages
// are striped over the sockets. Frames that arrive before their receive is
// posted are kept ("stashed") and copied out when it is, so a rank always
// drains its sockets and a sender never waits on a receiver's issue order.
#pragma once

#include <poll.h>

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <unordered_map>
#include <vector>

#include "giant/ccl/socket.h"
#include "giant/ccl/wire.h"

namespace giant::ccl::detail {

struct Request {
  enum class Kind { send, recv };
  Kind kind = Kind::send;
  int peer = -1;
  MessageKey key;
  char* data = nullptr;  // send: read only
  size_t nbytes = 0;
  OpDescriptor desc;
  size_t done_bytes = 0;
  int frames_left = 0;  // send: frames not yet fully written
  bool complete = false;
};

class TcpTransport {
 public:
  // data_sockets[peer] holds that peer's sockets (empty for this rank).
  TcpTransport(int rank, std::vector<std::vector<net::Fd>> data_sockets, size_t stripe_bytes);
  ~TcpTransport();

  void post_send(Request* request);
  void post_recv(Request* request);

  // An operation starts running: its frames are checked against desc as they
  // arrive. Several may be running at once (an urgent one inside another).
  void begin_collective(uint64_t sequence, const OpDescriptor& desc);
  // It is done (or ran without the transport): any later frame for it is an
  // error. Sequences are numbered from 1, each ended exactly once.
  void end_collective(uint64_t sequence);
  // Sequences first..last ran without the transport (inline, in shared
  // memory) and are ended: one step when they are the next to end.
  void end_unbegun(uint64_t first, uint64_t last);

  // Appends this transport's descriptors to a poll set; handle() then takes
  // the same slice back. Throws CommError naming the peer on any fault.
  void add_poll_fds(std::vector<pollfd>& fds);
  void handle(const pollfd* fds, size_t count);

  // Forgets every request (they point into user buffers) after a failure.
  void drop_all();
  // A peer that said goodbye may close its sockets without it being a fault.
  void mark_departed(int peer);

 private:
  struct Stash;
  struct OutFrame {
    FrameHeader header;
    const char* data;
    size_t sent = 0;  // header and payload bytes written
    Request* request;
  };
  struct Socket {
    net::Fd fd;
    int peer = -1;
    bool open = true;
    std::deque<OutFrame> out;
    FrameHeader in_header;
    size_t in_header_bytes = 0;
    bool in_payload = false;
    char* in_dst = nullptr;
    size_t in_left = 0;
    size_t in_frame_bytes = 0;
    Request* in_request = nullptr;
    Stash* in_stash = nullptr;
  };
  struct Stash {
    std::unique_ptr<char[]> data;
    size_t total = 0;
    size_t got = 0;
    OpDescriptor desc;
    Request* waiter = nullptr;
  };
  struct Peer {
    std::vector<size_t> sockets;  // indices into sockets_
    std::unordered_map<MessageKey, Request*, MessageKeyHash> posted;
    std::unordered_map<MessageKey, std::unique_ptr<Stash>, MessageKeyHash> stashed;
    int pending_sends = 0;
    int open_sockets = 0;  // none left: the peer has closed its end
    bool departed = false;
    size_t next_socket = 0;
  };

  void write_ready(Socket& s);
  void read_ready(Socket& s);
  void start_frame(Socket& s);
  void finish_frame(Socket& s);
  static void complete_from_stash(Request* request, const Stash& stash);
  void close_socket(Socket& s);
  // Moves next_unended_ past the sequences that ended ahead of it.
  void advance_unended();
  [[noreturn]] void peer_closed(Socket& s, const std::string& why);
  // Drops the stash being made for `key` and names the peer that announced `total` bytes.
  [[noreturn]] void stash_refused(Socket& s, const MessageKey& key, uint64_t total);

  int rank_;
  size_t stripe_bytes_;
  std::vector<Socket> sockets_;
  std::vector<Peer> peers_;
  bool ended(uint64_t sequence) const { return sequence < next_unended_ || ended_ahead_.count(sequence) > 0; }
  std::map<uint64_t, OpDescriptor> active_;  // begun, not ended
  uint64_t next_unended_ = 1;                // every sequence below it has ended
  std::set<uint64_t> ended_ahead_;           // ended out of order, above next_unended_
};

}  // namespace giant::ccl::detail
