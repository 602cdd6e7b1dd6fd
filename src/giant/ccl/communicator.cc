#include "giant/ccl/communicator.h"

#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>

#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/ccl/backend.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/cost_model.h"
#include "giant/ccl/engine.h"
#include "giant/ccl/host_backend.h"
#include "giant/ccl/socket.h"

namespace giant::ccl {
namespace {

struct PeerAddress {
  std::string ip;
  int port = 0;
  int sockets = 0;  // data sockets per peer pair it connects with
  std::string host_id;
};

PeerAddress parse_address(const std::string& text, int peer) {
  std::istringstream in(text);
  PeerAddress a;
  in >> a.ip >> a.port >> a.sockets;
  std::getline(in, a.host_id);
  if (!a.host_id.empty() && a.host_id[0] == ' ') a.host_id.erase(0, 1);
  if (a.ip.empty() || a.port <= 0 || a.sockets < 1) throw CommError(peer, "bad address published by rank " + std::to_string(peer));
  return a;
}

std::chrono::milliseconds left(const Deadline& deadline) {
  return std::chrono::milliseconds(deadline.remaining_ms(INT_MAX));
}

HostTopology build_topology(const std::vector<PeerAddress>& peers, int rank) {
  HostTopology t;
  for (const auto& p : peers) {
    auto it = std::find(t.host_ids.begin(), t.host_ids.end(), p.host_id);
    if (it == t.host_ids.end()) {
      t.host_of_rank.push_back(static_cast<int>(t.host_ids.size()));
      t.host_ids.push_back(p.host_id);
    } else {
      t.host_of_rank.push_back(static_cast<int>(it - t.host_ids.begin()));
    }
  }
  t.host = t.host_of_rank[rank];
  for (int r = 0; r < static_cast<int>(peers.size()); ++r) {
    if (t.host_of_rank[r] == t.host) {
      if (r == rank) t.local_rank = static_cast<int>(t.local_ranks.size());
      t.local_ranks.push_back(r);
    }
  }
  t.local_size = static_cast<int>(t.local_ranks.size());
  return t;
}

// Full mesh: connect to every lower rank, accept every higher one. Each pair
// gets sockets_per_peer data sockets and one control socket.
std::vector<detail::PeerLinks> connect_mesh(int rank, int size, int sockets, const std::vector<PeerAddress>& peers,
                                            net::Fd& listener, const detail::Hello& hello_template,
                                            const Deadline& deadline) {
  std::vector<detail::PeerLinks> links(size);
  for (int p = 0; p < rank; ++p) {
    for (int index = -1; index < sockets; ++index) {
      net::Fd fd;
      try {
        fd = net::connect_tcp(peers[p].ip, peers[p].port, deadline);
        detail::Hello hello = hello_template;
        hello.rank = rank;
        hello.index = index;
        net::send_all(fd.get(), &hello, sizeof hello, deadline);
      } catch (const CommError& e) {
        if (dynamic_cast<const TimeoutError*>(&e)) throw TimeoutError(p, "connecting to rank " + std::to_string(p) + ": " + e.what());
        throw CommError(p, "connecting to rank " + std::to_string(p) + ": " + e.what());
      }
      if (index < 0) links[p].control = std::move(fd);
      else links[p].data.push_back(std::move(fd));
    }
  }
  int expected = (size - 1 - rank) * (sockets + 1);
  std::vector<std::vector<net::Fd>> data(size);
  for (auto& d : data) d.resize(sockets);
  int accepted = 0;
  while (accepted < expected) {
    net::Fd fd;
    try {
      fd = net::accept_tcp(listener.get(), deadline);
    } catch (const TimeoutError&) {
      std::string missing;
      for (int p = rank + 1; p < size; ++p) {
        bool complete = links[p].control.valid();
        for (auto& d : data[p]) complete = complete && d.valid();
        if (!complete) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      throw TimeoutError(missing.empty() ? -1 : std::stoi(missing.substr(0, missing.find(','))),
                         "rank " + std::to_string(rank) + " timed out waiting for connections from rank(s) " + missing);
    }
    detail::Hello hello;
    try {
      net::recv_all(fd.get(), &hello, sizeof hello, deadline.earlier(Deadline::after(std::chrono::seconds(5))));
    } catch (const CommError&) {
      continue;  // not one of ours, or gone: ignore it
    }
    bool valid = hello.magic == detail::kHelloMagic &&
                 std::memcmp(hello.token, hello_template.token, sizeof hello.token) == 0 && hello.rank > rank &&
                 hello.rank < size && hello.index >= -1 && hello.index < sockets;
    if (!valid) {
      GIANT_LOG(warn) << "ignoring a connection that is not from this communicator";
      continue;
    }
    net::Fd& slot = hello.index < 0 ? links[hello.rank].control : data[hello.rank][hello.index];
    if (slot.valid()) continue;
    slot = std::move(fd);
    ++accepted;
  }
  for (int p = rank + 1; p < size; ++p) links[p].data = std::move(data[p]);
  return links;
}

}  // namespace

std::shared_ptr<Communicator> Communicator::create(std::shared_ptr<Store> store, int rank, int size, CommConfig config,
                                                   std::string name, DeviceBackendFactory device_backend) {
  GIANT_CHECK(size >= 1, "communicator size must be at least 1, got ", size);
  GIANT_CHECK(rank >= 0 && rank < size, "rank ", rank, " is out of range for a communicator of size ", size);
  GIANT_CHECK(store != nullptr || size == 1, "a communicator of ", size, " ranks needs a store");
  if (!device_backend) device_backend = default_device_backend;
  return std::shared_ptr<Communicator>(
      new Communicator(std::move(store), rank, size, std::move(config), std::move(name), std::move(device_backend)));
}

Communicator::Communicator(std::shared_ptr<Store> store, int rank, int size, CommConfig config, std::string name,
                           DeviceBackendFactory device_backend)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      config_(std::move(config)),
      name_(std::move(name)),
      device_factory_(std::move(device_backend)) {
  if (config_.host_id.empty()) config_.host_id = default_host_id();
  if (size_ == 1) {
    topology_ = build_topology({PeerAddress{"", 0, 1, config_.host_id}}, 0);
    engine_ = std::make_unique<detail::Engine>(0, 1, config_, std::vector<detail::PeerLinks>{}, nullptr);
    host_backend_ = std::make_unique<HostBackend>(*this);
    return;
  }
  Deadline deadline = Deadline::after(config_.connect_timeout);
  // A name may be used again on the same store: each use is a generation.
  int64_t generation = store_->add("ccl/" + name_ + "/joined/" + std::to_string(rank_), 1);
  store_prefix_ = "ccl/" + name_ + "/" + std::to_string(generation);
  PrefixStore scoped(store_, store_prefix_);

  std::string ip = config_.listen_address;
  if (ip.empty()) ip = store_->local_address();
  if (ip.empty()) ip = "127.0.0.1";
  int port = 0;
  net::Fd listener = net::listen_tcp(ip, 0, &port);

  // Only ranks that can read the store learn the token, so strangers that
  // find the port cannot join.
  detail::Hello hello;
  if (rank_ == 0) {
    GIANT_CHECK(RAND_bytes(hello.token, sizeof hello.token) == 1, "no randomness for the connection token");
    scoped.set("token", Bytes(hello.token, hello.token + sizeof hello.token));
  }
  const int sockets = detail::data_sockets_per_peer(config_);
  scoped.set("rank/" + std::to_string(rank_),
             to_bytes(ip + " " + std::to_string(port) + " " + std::to_string(sockets) + " " + config_.host_id));
  Bytes token = scoped.get("token", left(deadline));
  GIANT_CHECK(token.size() == sizeof hello.token, "bad connection token in the store");
  std::memcpy(hello.token, token.data(), token.size());

  std::vector<PeerAddress> peers;
  for (int p = 0; p < size_; ++p) {
    try {
      peers.push_back(parse_address(to_string(scoped.get("rank/" + std::to_string(p), left(deadline))), p));
    } catch (const TimeoutError& e) {
      throw TimeoutError(p, "rank " + std::to_string(p) + " did not join communicator '" + name_ + "' within " +
                                std::to_string(config_.connect_timeout.count()) + " ms");
    }
  }
  for (int p = 0; p < size_; ++p) {
    if (peers[p].sockets == sockets) continue;
    throw ConfigError("ccl.tcp.sockets_per_peer",
                      "rank " + std::to_string(p) + " of communicator '" + name_ + "' connects with " +
                          std::to_string(peers[p].sockets) + " data sockets per peer, rank " + std::to_string(rank_) +
                          " with " + std::to_string(sockets) +
                          ": every rank needs the same ccl.tcp.sockets_per_peer and ccl.model.tcp_gbps");
  }
  auto links = connect_mesh(rank_, size_, sockets, peers, listener, hello, deadline);
  topology_ = build_topology(peers, rank_);
  auto shm = detail::ShmGroup::create(scoped, topology_, rank_, config_, deadline);
  engine_ = std::make_unique<detail::Engine>(rank_, size_, config_, std::move(links), std::move(shm));
  host_backend_ = std::make_unique<HostBackend>(*this);
}

// The device backend goes first: it may still use the engine's peers.
Communicator::~Communicator() {
  device_backend_.reset();
  host_backend_.reset();
}

Backend& Communicator::backend(Memory memory) {
  if (memory == Memory::host) return *host_backend_;
  std::lock_guard<std::mutex> lock(device_mutex_);
  if (!device_backend_) {
    if (!abort_reason_.empty()) {
      throw CommError(rank_, "communicator '" + name_ + "' was aborted (" + abort_reason_ +
                                 ") before its first device operation");
    }
    Backend* host = host_backend_.get();
    DeviceBackendContext context{store_, store_prefix_ + "/device", rank_, size_, name_, config_,
                                 [host] { return host->failed(); }};
    device_backend_ = device_factory_(context);
    GIANT_CHECK(device_backend_ != nullptr, "communicator '", name_, "': the device backend factory made nothing");
  }
  return *device_backend_;
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) { return split(color, key, config_); }

std::shared_ptr<Communicator> Communicator::split(int color, int key, const CommConfig& config) {
  int index = splits_.fetch_add(1);
  std::vector<int64_t> mine{color, key}, all(2 * static_cast<size_t>(size_));
  AllgatherOptions o;
  o.input = mine.data();
  o.output = all.data();
  o.count = 2;
  o.dtype = DType::i64;
  allgather(*this, o).wait();
  if (color < 0) return nullptr;
  std::vector<std::pair<int64_t, int>> members;  // (key, rank) of our color
  for (int r = 0; r < size_; ++r) {
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == rank_) new_rank = static_cast<int>(i);
  }
  return create(store_, new_rank, static_cast<int>(members.size()), config,
                name_ + "/split" + std::to_string(index) + "/color" + std::to_string(color), device_factory_);
}

std::string Communicator::transport_to(int peer) const {
  GIANT_CHECK(peer >= 0 && peer < size_, "peer ", peer, " is not a rank of a communicator of size ", size_);
  if (peer == rank_) return "self";
  return engine_->shm() && topology_.same_host(rank_, peer) ? "shm" : "tcp";
}

bool Communicator::shared_memory() const { return engine_->shm() != nullptr; }

void Communicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(device_mutex_);
    if (device_backend_) device_backend_->abort(reason);
    else if (abort_reason_.empty()) abort_reason_ = reason;
  }
  host_backend_->abort(reason);
}

bool Communicator::failed() const {
  if (host_backend_->failed()) return true;
  std::lock_guard<std::mutex> lock(device_mutex_);
  return device_backend_ && device_backend_->failed();
}

std::vector<std::string> Communicator::waiting_operations() const { return engine_->describe_waiting(); }

}  // namespace giant::ccl
