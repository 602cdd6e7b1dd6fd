#include "giant/ccl/shm_group.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/shm_mailbox.h"

namespace giant::ccl::detail {
namespace {

constexpr size_t kLine = 64;
constexpr auto kYieldFor = std::chrono::microseconds(50);

// One counter per cache line, with the number of peers asleep on it, so a
// publisher makes the futex call only when someone waits.
struct alignas(kLine) CounterLine {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};
  // posted only: a fingerprint of the label by step parity, so that the
  // common check reads the cache line the waiter has just read anyway.
  uint64_t fingerprint[2] = {0, 0};
};

// Steps are compared modulo 2^32.
bool reached(uint32_t current, uint32_t target) { return static_cast<int32_t>(current - target) >= 0; }

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long nanoseconds) {
  timespec timeout{0, nanoseconds};
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::chrono::milliseconds left(const Deadline& deadline) {
  return std::chrono::milliseconds(deadline.remaining_ms(INT_MAX));
}

// Maps the segment rank `peer` published (its pid and memfd, read through
// /proc). Throws Error saying why it cannot.
void* map_peer_segment(Store& store, int peer, size_t segment_bytes, const Deadline& deadline, pid_t* pid) {
  std::istringstream in(to_string(store.get("shm/" + std::to_string(peer), left(deadline))));
  int peer_fd = -1;
  *pid = 0;
  in >> *pid >> peer_fd;
  if (*pid <= 0) throw Error("rank " + std::to_string(peer) + " has no segment");
  const std::string path = "/proc/" + std::to_string(*pid) + "/fd/" + std::to_string(peer_fd);
  const int mapped_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mapped_fd < 0) {
    throw Error("cannot open rank " + std::to_string(peer) + "'s segment " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  const bool sized = ::fstat(mapped_fd, &st) == 0 && static_cast<size_t>(st.st_size) == segment_bytes;
  void* at = sized ? ::mmap(nullptr, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mapped_fd, 0) : MAP_FAILED;
  ::close(mapped_fd);
  if (at == MAP_FAILED) {
    throw Error("cannot map rank " + std::to_string(peer) + "'s segment (" +
                (sized ? std::strerror(errno) : "size differs: ccl.shm.chunk_bytes") + ")");
  }
  return at;
}

// Agree: shared memory is used only if every rank could set it up (every
// rank publishes its verdict, so none waits in vain).
bool every_rank_set_up(Store& store, int rank, int size, const std::string& failure, const Deadline& deadline) {
  store.set("shm_ok/" + std::to_string(rank), to_bytes(failure.empty() ? "1" : "0"));
  bool everyone = true;
  for (int r = 0; r < size && everyone; ++r) {
    everyone = to_string(store.get("shm_ok/" + std::to_string(r), left(deadline))) == "1";
  }
  if (!failure.empty()) {
    GIANT_LOG(warn) << "ccl: shared memory is off (rank " << rank << "): " << failure;
  }
  return everyone;
}

}  // namespace

struct ShmGroup::Segment {
  // The header keeps the slots that follow it aligned.
  alignas(kLine) CounterLine counters[kCounters];
  struct alignas(kLine) Label {
    uint64_t sequence;
    OpDescriptor desc;
  } labels[2];  // by step parity
  // The data slots follow, each slot_bytes_ long, starting at kLine alignment.
  char* data() { return reinterpret_cast<char*>(this + 1); }
};

std::unique_ptr<ShmGroup> ShmGroup::create(Store& store, const HostTopology& topology, int rank,
                                           const CommConfig& config, const Deadline& deadline) {
  const int size = static_cast<int>(topology.host_of_rank.size());
  bool any_shared = false;
  for (int h = 0; h < topology.num_hosts(); ++h) {
    int members = 0;
    for (int r = 0; r < size; ++r) members += topology.host_of_rank[r] == h;
    any_shared = any_shared || members > 1;
  }
  // Every rank sees the same topology and config key, so all return here together.
  if (config.transport == "tcp" || !any_shared) return nullptr;

  std::unique_ptr<ShmGroup> group(new ShmGroup());
  group->local_rank_ = topology.local_rank;
  group->slot_bytes_ = round_up(config.shm_chunk_bytes, kLine);
  // A point-to-point ring holds four slots' worth (2 MiB by default), so a
  // sender writes pieces while the receiver drains the ones before; smaller
  // rings measured slower for messages of megabytes.
  group->ring_bytes_ = 4 * group->slot_bytes_;
  group->segment_bytes_ = sizeof(Segment) + 2 * group->slot_bytes_ +
                          ShmMailbox::area_bytes(std::max(topology.local_size, 1), group->ring_bytes_);
  std::string failure;
  if (topology.local_size > 1) {
    // Published even on failure ("-1 -1"), so that no peer waits for it in vain.
    int fd = ::memfd_create("giant-ccl", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(group->segment_bytes_)) != 0) {
      ::close(fd);
      fd = -1;
    }
    if (fd < 0) failure = std::string("cannot create a shared memory segment: ") + std::strerror(errno);
    group->own_fd_ = fd;
    store.set("shm/" + std::to_string(rank),
              to_bytes(fd < 0 ? "-1 -1" : std::to_string(::getpid()) + " " + std::to_string(fd)));
    try {
      for (int local = 0; local < topology.local_size; ++local) {
        Peer p;
        p.rank = topology.local_ranks[local];
        void* at = map_peer_segment(store, p.rank, group->segment_bytes_, deadline, &p.pid);
        p.segment = static_cast<Segment*>(at);
        group->peers_.push_back(p);
      }
    } catch (const TimeoutError&) {
      throw;
    } catch (const std::exception& e) {
      if (failure.empty()) failure = e.what();
    }
  }
  const bool everyone = every_rank_set_up(store, rank, size, failure, deadline);
  if (!everyone) return nullptr;
  // Every peer has mapped our segment by now: the mapping keeps it alive.
  if (group->own_fd_ >= 0) ::close(group->own_fd_);
  group->own_fd_ = -1;
  if (topology.local_size == 1) {
    // Alone on this host: a group of one, so shm algorithms still run locally.
    Peer self;
    self.rank = rank;
    self.pid = ::getpid();
    void* at = ::mmap(nullptr, group->segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    GIANT_CHECK(at != MAP_FAILED, "mmap: ", std::strerror(errno));
    self.segment = new (at) Segment();
    group->peers_.push_back(self);
  }
  return group;
}

ShmGroup::~ShmGroup() {
  for (auto& p : peers_) {
    if (p.segment) ::munmap(p.segment, segment_bytes_);
  }
  if (own_fd_ >= 0) ::close(own_fd_);
}

char* ShmGroup::slot(int local, uint32_t which) const {
  return peers_[local].segment->data() + (which & 1) * slot_bytes_;
}

char* ShmGroup::mailbox_area(int local) const { return peers_[local].segment->data() + 2 * slot_bytes_; }

std::atomic<uint32_t>& ShmGroup::word(int local, Counter counter) const {
  return peers_[local].segment->counters[counter].value;
}

std::atomic<uint32_t>& ShmGroup::sleepers(int local, Counter counter) const {
  return peers_[local].segment->counters[counter].sleepers;
}

uint64_t ShmGroup::fingerprint(uint64_t sequence, const OpDescriptor& desc) {
  // Field by field (no padding bytes), a multiply per word: it is on the
  // path of every small operation.
  const uint64_t words[] = {sequence,
                            static_cast<uint64_t>(desc.kind) | uint64_t{desc.dtype} << 8 | uint64_t{desc.op} << 16 |
                                uint64_t{desc.algorithm} << 24 | uint64_t{static_cast<uint32_t>(desc.root)} << 32,
                            desc.count, desc.aux};
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t w : words) h = (h ^ w) * 0xBF58476D1CE4E5B9ull ^ (h >> 29);
  return h | 1;  // never 0, the value of a fresh segment
}

void ShmGroup::label(uint32_t step, uint64_t sequence, const OpDescriptor& desc, uint64_t fingerprint) {
  Segment* own = peers_[local_rank_].segment;
  auto& l = own->labels[step & 1];
  l.sequence = sequence;
  l.desc = desc;
  own->counters[posted].fingerprint[step & 1] = fingerprint;
}

bool ShmGroup::label_matches(int local, uint32_t step, uint64_t fingerprint) const {
  return peers_[local].segment->counters[posted].fingerprint[step & 1] == fingerprint;
}

std::pair<uint64_t, OpDescriptor> ShmGroup::label_of(int local, uint32_t step) const {
  const auto& l = peers_[local].segment->labels[step & 1];
  return {l.sequence, l.desc};
}

void ShmGroup::publish(Counter counter, uint32_t value) {
  auto& w = word(local_rank_, counter);
  w.store(value, std::memory_order_seq_cst);
  // Pairs with the waiter's increment of sleepers before its last check.
  if (sleepers(local_rank_, counter).load(std::memory_order_seq_cst) > 0) futex_wake_all(&w);
}

void ShmGroup::wait_for(int local, Counter counter, uint32_t value, const std::function<void(int)>& idle) {
  auto& w = word(local, counter);
  // Spin briefly (a peer on another core is usually a few microseconds away),
  // then yield, then sleep: with more ranks than cores, spinning would only
  // delay the peer being waited for.
  for (int i = 0; i < 128; ++i) {
    if (reached(w.load(std::memory_order_acquire), value)) return;
    cpu_relax();
  }
  // Yielding hands the core to a peer that shares it; only after kYieldFor
  // of that does the waiter sleep (a futex wake costs the peer a syscall and
  // this rank a reschedule). The clock is read after every yield: when the
  // cores are busy, one yield can last a whole time slice of the thread it
  // lets run, and each is two context switches.
  const auto yield_until = std::chrono::steady_clock::now() + kYieldFor;
  while (true) {
    if (reached(w.load(std::memory_order_acquire), value)) return;
    ::sched_yield();
    if (std::chrono::steady_clock::now() > yield_until) break;
  }
  auto& asleep = sleepers(local, counter);
  while (true) {
    try {
      idle(local);
    } catch (...) {
      // A peer publishes and may then exit at once: what it posted before it
      // went counts. Only a wait that its last word leaves short fails.
      if (reached(w.load(std::memory_order_seq_cst), value)) return;
      throw;
    }
    asleep.fetch_add(1, std::memory_order_seq_cst);
    uint32_t seen = w.load(std::memory_order_seq_cst);
    if (!reached(seen, value)) futex_wait(&w, seen, 2'000'000);
    asleep.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(w.load(std::memory_order_acquire), value)) return;
  }
}

void ShmGroup::wait_all(Counter counter, uint32_t value, const std::function<void(int)>& idle) {
  for (int local = 0; local < local_size(); ++local) {
    if (local != local_rank_) wait_for(local, counter, value, idle);
  }
}

void BufferRegistry::add(Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back(std::move(entry));
}

void BufferRegistry::remove(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->id == id) {
      entries_.erase(it);
      return;
    }
  }
}

bool BufferRegistry::find(const void* data, size_t nbytes, int me, Entry* entry, size_t* offset) const {
  auto p = static_cast<const char*>(data);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_) {
    const char* base = e.views[me];
    if (p >= base && p + nbytes <= base + e.nbytes) {
      *entry = e;
      *offset = static_cast<size_t>(p - base);
      return true;
    }
  }
  return false;
}

bool ShmGroup::alive(int local) const {
  pid_t pid = peers_[local].pid;
  if (pid == ::getpid()) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A killed child stays a zombie until reaped: it is gone all the same.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || (line[paren + 2] != 'Z' && line[paren + 2] != 'X');
}

}  // namespace giant::ccl::detail
