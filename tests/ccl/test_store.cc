// Stores: the behaviour every Store shares (run against MemoryStore,
// FileStore and TcpStore), then what only the TCP store must survive:
// wrong secrets, hostile and silent clients, a server that goes away.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/store.h"
#include "giant/ccl/tcp_store_wire.h"

namespace giant::ccl {
namespace {

using namespace std::chrono_literals;

const std::string kSecret = "test-secret-0123456789";

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "giant-store-XXXXXX").string();
    GIANT_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Makes stores of one kind; every store it makes shares the same data.
class StoreFactory {
 public:
  explicit StoreFactory(const std::string& kind) : kind_(kind) {
    if (kind == "memory") shared_memory_ = std::make_shared<MemoryStore>();
    if (kind == "tcp") server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, kSecret);
  }
  std::shared_ptr<Store> make() {
    if (kind_ == "memory") return shared_memory_;
    if (kind_ == "file") return std::make_shared<FileStore>(dir_.path() + "/store");
    return std::make_shared<TcpStore>("127.0.0.1", server_->port(), kSecret, 5s);
  }

 private:
  std::string kind_;
  TempDir dir_;
  std::shared_ptr<MemoryStore> shared_memory_;
  std::unique_ptr<TcpStoreServer> server_;
};

class AnyStore : public ::testing::TestWithParam<std::string> {
 protected:
  StoreFactory factory_{GetParam()};
};

TEST_P(AnyStore, SetGetAddWait) {
  auto store = factory_.make();
  store->set("a/b", to_bytes("hello"));
  EXPECT_EQ(to_string(store->get("a/b", 1s)), "hello");
  store->set("a/b", to_bytes("again"));
  EXPECT_EQ(to_string(store->get("a/b", 1s)), "again");
  store->set("empty", {});
  EXPECT_TRUE(store->get("empty", 1s).empty());

  Bytes binary = {0, 1, 255, 10, 0};
  store->set("binary", binary);
  EXPECT_EQ(store->get("binary", 1s), binary);

  EXPECT_EQ(store->add("counter", 1), 1);
  EXPECT_EQ(store->add("counter", 2), 3);
  EXPECT_EQ(store->add("counter", -10), -7);
  EXPECT_EQ(to_string(store->get("counter", 1s)), "-7");  // decimal text
  EXPECT_EQ(store->add("counter", 0), -7);
  EXPECT_THROW(store->add("a/b", 1), Error);  // not an integer

  store->wait({"a/b", "counter", "binary"}, 1s);
  store->wait({}, 1s);
}

TEST_P(AnyStore, KeysAreOpaque) {
  auto store = factory_.make();
  std::vector<std::string> keys = {"x", "x/", "/x", "x/y/z", "..", ".", "a b%20c", "%41", "A", "a",
                                   std::string(300, 'k'), std::string(301, 'k'), std::string("nul\0in", 6)};
  for (size_t i = 0; i < keys.size(); ++i) store->set(keys[i], to_bytes(std::to_string(i)));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(to_string(store->get(keys[i], 1s)), std::to_string(i)) << "key #" << i;
  }
}

TEST_P(AnyStore, TimeoutNamesTheMissingKey) {
  auto store = factory_.make();
  store->set("present", to_bytes("1"));
  Stopwatch watch;
  try {
    store->get("missing/key", 150ms);
    FAIL() << "get() of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("missing/key"), std::string::npos) << e.what();
    EXPECT_EQ(e.peer(), -1);
  }
  EXPECT_GE(watch.seconds(), 0.14);
  EXPECT_LT(watch.seconds(), 3.0);

  try {
    store->wait({"present", "absent"}, 100ms);
    FAIL() << "wait() for a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("present"), std::string::npos) << e.what();
  }
  // The store still works after a timeout.
  EXPECT_EQ(to_string(store->get("present", 1s)), "1");
}

TEST_P(AnyStore, BlockingGetWokenByLaterSet) {
  auto waiter = factory_.make();
  auto writer = factory_.make();
  auto result = std::async(std::launch::async, [&] { return to_string(waiter->get("late", 10s)); });
  auto wait_result = std::async(std::launch::async, [&] {
    factory_.make()->wait({"late", "later"}, 10s);
    return true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(result.wait_for(0ms), std::future_status::timeout);
  // Blocked waiters do not hold up other clients.
  writer->set("other", to_bytes("x"));
  EXPECT_EQ(to_string(writer->get("other", 1s)), "x");
  Stopwatch watch;
  writer->set("late", to_bytes("finally"));
  EXPECT_EQ(result.get(), "finally");
  EXPECT_LT(watch.seconds(), 2.0);
  writer->add("later", 1);
  EXPECT_TRUE(wait_result.get());
}

TEST_P(AnyStore, ConcurrentAddsAreExact) {
  constexpr int kThreads = 8;
  constexpr int kAddsPerThread = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        auto store = factory_.make();  // a client (connection) per thread
        for (int i = 0; i < kAddsPerThread; ++i) store->add("count", 1);
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(to_string(factory_.make()->get("count", 1s)), std::to_string(kThreads * kAddsPerThread));
}

TEST_P(AnyStore, PrefixStoreSeparatesNamespaces) {
  auto base = factory_.make();
  PrefixStore a(base, "comm-a");
  PrefixStore b(base, "comm-b");
  a.set("k", to_bytes("from a"));
  b.set("k", to_bytes("from b"));
  EXPECT_EQ(to_string(a.get("k", 1s)), "from a");
  EXPECT_EQ(to_string(b.get("k", 1s)), "from b");
  EXPECT_EQ(to_string(base->get("comm-a/k", 1s)), "from a");
  EXPECT_EQ(a.add("n", 5), 5);
  EXPECT_EQ(b.add("n", 1), 1);
  a.wait({"k", "n"}, 1s);
  EXPECT_THROW(b.wait({"only-in-a"}, 50ms), TimeoutError);
  EXPECT_EQ(a.local_address(), base->local_address());
}

INSTANTIATE_TEST_SUITE_P(Stores, AnyStore, ::testing::Values("memory", "file", "tcp"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------- FileStore

TEST(FileStore, CreatesItsDirectoryAndSharesIt) {
  TempDir dir;
  FileStore first(dir.path() + "/deep/er");
  FileStore second(dir.path() + "/deep/er");
  first.set("rank/0/addr", to_bytes("10.0.0.1:1234"));
  EXPECT_EQ(to_string(second.get("rank/0/addr", 1s)), "10.0.0.1:1234");
  // Atomic writes leave no temp files behind.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/deep/er")) {
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp", 0), std::string::npos) << entry.path();
  }
}

// ---------------------------------------------------------------- TcpStore

// True once the server has closed fd, within the timeout (data is drained).
bool closed_by_peer(int fd, std::chrono::milliseconds timeout) {
  Deadline deadline = Deadline::after(timeout);
  char buffer[256];
  while (!deadline.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.remaining_ms(100)) <= 0) continue;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

void send_u32(int fd, uint32_t value) {
  uint8_t bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
  net::send_all(fd, bytes, 4, Deadline::after(1s));
}

// Plays the client side of the handshake by hand, so that a test can
// misbehave once authenticated.
void authenticate_by_hand(int fd, const std::string& secret) {
  using namespace store_wire;
  Bytes hello = recv_frame(fd, kMaxHandshakeFrame, Deadline::after(2s));
  ASSERT_EQ(hello.size(), sizeof kMagic + kNonceBytes);
  Nonce server_nonce;
  std::memcpy(server_nonce.data(), hello.data() + sizeof kMagic, kNonceBytes);
  Mac proof = prove(secret, "giant-store-client", server_nonce);
  Nonce client_nonce = random_nonce();
  Writer answer;
  answer.raw(proof.data(), kMacBytes).raw(client_nonce.data(), kNonceBytes);
  send_frame(fd, answer, Deadline::after(1s));
  Bytes verdict = recv_frame(fd, kMaxHandshakeFrame, Deadline::after(2s));
  ASSERT_EQ(verdict.size(), 1 + kMacBytes);
  ASSERT_EQ(verdict[0], 1) << "the server refused the hand-made handshake";
  EXPECT_TRUE(same_mac(prove(secret, "giant-store-server", client_nonce), verdict.data() + 1));
}

class TcpStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<TcpStore> client(const std::string& secret = kSecret) {
    return std::make_unique<TcpStore>("127.0.0.1", server_->port(), secret, 5s);
  }
  net::Fd raw_connection() { return net::connect_tcp("127.0.0.1", server_->port(), Deadline::after(5s)); }
  void expect_serving(TcpStore& store, const std::string& key) {
    store.set(key, to_bytes("ok"));
    EXPECT_EQ(to_string(store.get(key, 1s)), "ok");
  }

  TcpStoreLimits limits_ = [] {
    TcpStoreLimits limits;
    limits.handshake_timeout = 300ms;
    limits.max_value_bytes = 1 << 20;
    return limits;
  }();
  std::unique_ptr<TcpStoreServer> server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, kSecret, limits_);
};

TEST_F(TcpStoreTest, PortAndLocalAddress) {
  EXPECT_GT(server_->port(), 0);
  EXPECT_EQ(client()->local_address(), "127.0.0.1");
  MemoryStore memory;
  EXPECT_EQ(memory.local_address(), "");
}

TEST_F(TcpStoreTest, EmptySecretIsRefused) {
  EXPECT_THROW(TcpStoreServer("127.0.0.1", 0, ""), Error);
  try {
    TcpStore("127.0.0.1", server_->port(), "", 1s);
    FAIL() << "a client with an empty secret was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

TEST_F(TcpStoreTest, WrongSecretIsRefusedAndOthersCarryOn) {
  auto good = client();
  try {
    client("not-the-secret");
    FAIL() << "a client with the wrong secret was accepted";
  } catch (const CommError& e) {
    FAIL() << "expected a plain giant::Error, got CommError: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
  expect_serving(*good, "after-wrong-secret");
  expect_serving(*client(), "new-client-after-wrong-secret");
}

TEST_F(TcpStoreTest, HugeLengthBeforeAuthenticationIsDropped) {
  auto good = client();
  net::Fd hostile = raw_connection();
  send_u32(hostile.get(), 0xFFFFFFF0u);
  EXPECT_TRUE(closed_by_peer(hostile.get(), 2s));
  expect_serving(*good, "after-hostile-1");
}

TEST_F(TcpStoreTest, HugeLengthAfterAuthenticationIsDropped) {
  auto good = client();
  net::Fd hostile = raw_connection();
  authenticate_by_hand(hostile.get(), kSecret);
  send_u32(hostile.get(), 0xFFFFFFF0u);
  EXPECT_TRUE(closed_by_peer(hostile.get(), 2s));
  expect_serving(*good, "after-hostile-2");
  expect_serving(*client(), "after-hostile-3");
}

TEST_F(TcpStoreTest, GarbageRequestIsDropped) {
  auto good = client();
  net::Fd hostile = raw_connection();
  authenticate_by_hand(hostile.get(), kSecret);
  uint8_t bogus[4 + 3] = {3, 0, 0, 0, 99, 1, 2};  // unknown op 99
  net::send_all(hostile.get(), bogus, sizeof bogus, Deadline::after(1s));
  EXPECT_TRUE(closed_by_peer(hostile.get(), 2s));
  expect_serving(*good, "after-garbage");
}

TEST_F(TcpStoreTest, SilentClientIsDroppedAfterHandshakeTimeout) {
  net::Fd silent = raw_connection();
  Stopwatch watch;
  // While it sits there, others are served at once.
  auto good = client();
  expect_serving(*good, "during-silence");
  EXPECT_LT(watch.seconds(), 0.25);
  EXPECT_TRUE(closed_by_peer(silent.get(), 3s));
  EXPECT_GE(watch.seconds(), 0.25);
  expect_serving(*good, "after-silence");
}

TEST_F(TcpStoreTest, OversizedValueIsRejected) {
  auto store = client();
  // The client refuses what its own limits forbid before sending it...
  EXPECT_THROW(store->set("big", Bytes((64 << 20) + 1)), Error);
  expect_serving(*store, "after-refused-value");
  // ...and this server, with a lower limit, drops a client that sends more.
  EXPECT_THROW(store->set("big", Bytes((1 << 20) + 1)), CommError);
  EXPECT_THROW(store->get("after-refused-value", 1s), CommError);  // connection is gone
  auto fresh = client();
  Bytes large(1 << 20, 42);
  fresh->set("large", large);
  EXPECT_EQ(fresh->get("large", 1s), large);
}

TEST_F(TcpStoreTest, ManyClientsAddConcurrently) {
  constexpr int kClients = 24;
  constexpr int kAdds = 25;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&] {
      auto store = client();
      for (int i = 0; i < kAdds; ++i) store->add("shared", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(to_string(client()->get("shared", 1s)), std::to_string(kClients * kAdds));
}

TEST_F(TcpStoreTest, OneClientIsThreadSafe) {
  auto store = client();
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
        store->set(key, to_bytes(key));
        EXPECT_EQ(to_string(store->get(key, 1s)), key);
        store->add("total", 1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store->add("total", 0), 180);
}

TEST_F(TcpStoreTest, ServerGoneWakesWaitingClientWithCommError) {
  auto store = client();
  auto waiting = std::async(std::launch::async, [&]() -> std::string {
    try {
      store->get("never-set", 30s);
      return "returned";
    } catch (const TimeoutError& e) {
      return std::string("TimeoutError: ") + e.what();
    } catch (const CommError& e) {
      return e.peer() == -1 ? "CommError" : "CommError with a peer";
    }
  });
  auto idle = client();
  std::this_thread::sleep_for(100ms);
  Stopwatch watch;
  server_.reset();
  EXPECT_LT(watch.seconds(), 2.0) << "the server took long to stop";
  ASSERT_EQ(waiting.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(waiting.get(), "CommError");
  try {
    idle->set("k", to_bytes("v"));
    FAIL() << "set() on a dead store returned";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("lost connection to the store"), std::string::npos) << e.what();
  }
}

TEST_F(TcpStoreTest, UnreachableServerIsATimeout) {
  int port = server_->port();
  server_.reset();
  Stopwatch watch;
  EXPECT_THROW(TcpStore("127.0.0.1", port, kSecret, 200ms), TimeoutError);
  EXPECT_LT(watch.seconds(), 3.0);
}

TEST_F(TcpStoreTest, NotAStoreIsAClearError) {
  // Something that accepts and speaks another protocol: a client-less listener.
  int port = 0;
  net::Fd listener = net::listen_tcp("127.0.0.1", 0, &port);
  auto impostor = std::async(std::launch::async, [&] {
    net::Fd conn = net::accept_tcp(listener.get(), Deadline::after(5s));
    const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    net::send_all(conn.get(), reply, sizeof reply - 1, Deadline::after(1s));
    closed_by_peer(conn.get(), 3s);
  });
  EXPECT_THROW(TcpStore("127.0.0.1", port, kSecret, 2s), Error);
  impostor.get();
}

}  // namespace
}  // namespace giant::ccl
