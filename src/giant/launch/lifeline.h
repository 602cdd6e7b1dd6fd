// Ranks must not outlive a launcher that dies without stopping them (SIGKILL,
// a crash, the OOM killer): a quiet rank would otherwise live on, holding its
// ports and cores, until it next writes to its output and takes SIGPIPE.
//
// The lifeline is a socket between the launcher and a small watcher process
// it forks at the start. The launcher tells the watcher each rank's process
// group as the rank starts, and again once it has reaped the rank. When the
// launcher's end closes without a clean goodbye (it died: the kernel closes
// its sockets), the watcher kills every group it still knows (SIGKILL),
// removes the run's secret file and says so on stderr.
//
// Why not PR_SET_PDEATHSIG on each rank: it fires on the death of the parent
// *thread*, and it is not inherited across fork, so it would end
// `sh -c 'sleep 100'` but not the sleep the shell started; whatever a rank
// starts lives in the rank's process group, and only a group kill reaches it
// (the launcher's normal stop path signals groups for the same reason). A
// lifeline fd inherited by the ranks would need every program to watch it.
// The watcher needs no cooperation from the ranks and works the same through
// `ip netns exec` (a network namespace does not change pids or groups).
//
// Not covered: a process that left its rank's group (setsid, setpgid), as on
// the normal stop path; and a rank whose launcher dies in the instant between
// starting it and telling the watcher (posix_spawn returning), which no
// registration after the fact can close.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace giant::launch {

class Lifeline {
 public:
  // Forks the watcher; it can remember up to max_groups groups at once and
  // removes remove_on_death (if not empty) when the launcher dies. Throws
  // giant::Error when the socket or the process cannot be made.
  Lifeline(int max_groups, const std::string& remove_on_death);
  // Says goodbye (the watcher then exits without killing anything) and reaps
  // the watcher. The launcher must have reaped its ranks first.
  ~Lifeline();
  Lifeline(const Lifeline&) = delete;
  Lifeline& operator=(const Lifeline&) = delete;

  // A rank started, leading process group `group`.
  void hold(pid_t group);
  // The launcher reaped the rank leading `group` and killed the group: the
  // watcher must forget it, since its id may be reused.
  void release(pid_t group);

  pid_t watcher_pid() const { return watcher_; }

 private:
  void send(int value);

  int socket_ = -1;
  pid_t watcher_ = -1;
};

}  // namespace giant::launch
