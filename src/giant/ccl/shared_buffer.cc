#include "giant/ccl/shared_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "giant/base/logging.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/engine.h"
#include "giant/ccl/shm_group.h"

namespace giant::ccl {
namespace {

char* map_fd(int fd, size_t nbytes) {
  void* at = ::mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return at == MAP_FAILED ? nullptr : static_cast<char*>(at);
}

}  // namespace

SharedBuffer::~SharedBuffer() {
  if (auto registry = registry_.lock()) registry->remove(id_);
  for (char* view : views_) {
    if (view) ::munmap(view, nbytes_);
  }
}

std::shared_ptr<SharedBuffer> allocate_shared_buffer(Communicator& comm, size_t nbytes) {
  std::shared_ptr<SharedBuffer> buffer(new SharedBuffer());
  buffer->nbytes_ = nbytes;
  detail::ShmGroup* group = comm.engine().shm();
  const bool try_shared = group && comm.size() > 1 && comm.topology().num_hosts() == 1 && nbytes > 0;
  if (!try_shared) {
    buffer->plain_.reset(new char[std::max<size_t>(nbytes, 1)]());
    return buffer;
  }
  // Every rank makes a memfd, the ranks swap (pid, fd), and each maps the
  // others' through /proc; then they agree whether everyone managed.
  const int me = comm.rank();
  int fd = ::memfd_create("giant-ccl-buffer", MFD_CLOEXEC);
  if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(nbytes)) != 0) {
    ::close(fd);
    fd = -1;
  }
  std::vector<int64_t> mine{::getpid(), fd}, all(2 * static_cast<size_t>(comm.size()));
  AllgatherOptions gather;
  gather.input = mine.data();
  gather.output = all.data();
  gather.count = 2;
  gather.dtype = DType::i64;
  allgather(comm, gather).wait();
  std::vector<char*> views(comm.size(), nullptr);
  int32_t ok = 1;
  for (int r = 0; r < comm.size(); ++r) {
    int64_t pid = all[2 * r], peer_fd = all[2 * r + 1];
    int opened = -1;
    if (peer_fd >= 0) {
      std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(peer_fd);
      opened = r == me ? fd : ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    }
    views[r] = opened >= 0 ? map_fd(opened, nbytes) : nullptr;
    if (opened >= 0 && r != me) ::close(opened);
    if (!views[r]) ok = 0;
  }
  int32_t everyone = ok;
  AllreduceOptions agree;
  agree.input = &ok;
  agree.output = &everyone;
  agree.count = 1;
  agree.dtype = DType::i32;
  agree.op = ReduceOp::min;
  allreduce(comm, agree).wait();
  if (fd >= 0) ::close(fd);  // every peer has mapped it by now, or given up
  if (!everyone) {
    for (char* view : views) {
      if (view) ::munmap(view, nbytes);
    }
    if (!ok) {
      GIANT_LOG(warn) << "ccl: a shared buffer falls back to plain memory (could not map a peer's)";
    }
    buffer->plain_.reset(new char[nbytes]());
    return buffer;
  }
  buffer->local_rank_ = me;
  buffer->views_ = views;
  const auto& registry = group->buffers();
  buffer->id_ = registry->take_id();
  buffer->registry_ = registry;
  registry->add({buffer->id_, nbytes, views});
  return buffer;
}

}  // namespace giant::ccl
