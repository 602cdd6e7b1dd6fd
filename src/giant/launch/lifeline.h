// Ranks must not outlive a launcher that dies without stopping them (SIGKILL,
// a crash, the OOM killer): a quiet rank would otherwise live on, holding its
// ports and cores, until it next writes to its output and takes SIGPIPE.
//
// The launcher forks a small watcher process at the start, joined to it by a
// socket (the lifeline). The watcher makes one process group per rank, each
// led by a sleeping anchor process of its own, and every rank is started in
// its group. When the launcher's end of the socket closes without a goodbye
// (it died: the kernel closes its sockets), the watcher kills every group
// (SIGKILL), removes the run's secret file and says so on stderr.
//
// Why groups, and why made before the ranks: whatever a rank starts lives in
// the rank's process group, and only a group kill reaches it (the normal stop
// path signals groups for the same reason). PR_SET_PDEATHSIG would end
// `sh -c 'sleep 100'` but not the sleep the shell started: it is not
// inherited across fork (it also fires on the death of the parent *thread*,
// and needs code between fork and exec, which posix_spawn does not run). A
// lifeline fd inherited by the ranks would need every program to watch it.
// With groups made first the watcher never has to be told of a rank (telling
// it after each start leaves a gap: the launcher may die between the start
// and the telling), and since it does not reap its anchors until it ends, no
// group id can be reused while it may kill it. A rank being started as the
// launcher dies joins its group a moment later (still before it runs its
// program): the watcher kills the groups again 0.1 s and 0.5 s later for it.
// A network namespace (`ip netns exec`) changes neither pids nor groups.
//
// Not covered: a process that left its rank's group (setsid, setpgid), as on
// the normal stop path.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace giant::launch {

class Lifeline {
 public:
  // Forks the watcher with `groups` groups; it removes remove_on_death (if
  // not empty) when the launcher dies. Throws giant::Error when the socket or
  // the processes cannot be made.
  Lifeline(int groups, const std::string& remove_on_death);
  // Says goodbye (the watcher then ends its anchors and exits without killing
  // anything else) and reaps the watcher. The launcher must have ended its
  // ranks first.
  ~Lifeline();
  Lifeline(const Lifeline&) = delete;
  Lifeline& operator=(const Lifeline&) = delete;

  // The process group rank `index` is to be started in (0 <= index < groups).
  pid_t group(int index) const { return groups_.at(static_cast<size_t>(index)); }
  pid_t watcher_pid() const { return watcher_; }

 private:
  int socket_ = -1;
  pid_t watcher_ = -1;
  std::vector<pid_t> groups_;
};

}  // namespace giant::launch
