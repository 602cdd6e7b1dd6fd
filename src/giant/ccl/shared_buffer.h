// Host memory that the other ranks of this host read in place.
//
// An allreduce run in place on a shared buffer (all of it or a stretch, the
// same stretch on every rank) skips the copy into the shared segment: each
// rank reduces its block straight from its peers' buffers and copies the
// other blocks from theirs, one copy in all. Gradient buckets are the use.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace giant::ccl {

class Communicator;
namespace detail {
class BufferRegistry;
}

class SharedBuffer {
 public:
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void* data() const { return views_.empty() ? plain_.get() : views_[local_rank_]; }
  size_t nbytes() const { return nbytes_; }
  // False when it is plain memory (no shared memory on this communicator, or
  // a rank could not map its peers' buffers): collectives then copy as usual.
  bool shared() const { return !views_.empty(); }

 private:
  friend std::shared_ptr<SharedBuffer> allocate_shared_buffer(Communicator& comm, size_t nbytes);
  SharedBuffer() = default;
  size_t nbytes_ = 0;
  int local_rank_ = 0;
  std::unique_ptr<char[]> plain_;
  std::vector<char*> views_;  // every local rank's buffer, mapped here
  int id_ = -1;               // in the communicator's registry
  std::weak_ptr<detail::BufferRegistry> registry_;
};

// Collective: every rank of comm calls it with the same nbytes, in the same
// order. The buffer is zeroed. With ranks on several hosts, or shared memory
// off, it is plain memory. Keep it alive until every operation on it is done.
std::shared_ptr<SharedBuffer> allocate_shared_buffer(Communicator& comm, size_t nbytes);

}  // namespace giant::ccl
