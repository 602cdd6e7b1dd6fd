#include "launch/support/test_namespace.h"

#include <unistd.h>

#include "launch/support/launch_runner.h"

namespace giant::launch::test {

TestNamespace::TestNamespace() {
  const int pid = static_cast<int>(::getpid());
  name_ = "giant-launch-test-" + std::to_string(pid);
  veth_host_ = "glt" + std::to_string(pid % 1000000) + "h";
  const std::string veth_ns = "glt" + std::to_string(pid % 1000000) + "n";
  log_ = "/tmp/" + name_ + ".log";
  shell("for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^giant-launch-test-'); do "
        "kill -0 ${n#giant-launch-test-} 2>/dev/null || ip netns del $n; done");
  // Test binaries run at once (ctest -j): each takes a 10.77.N.0/24 no other
  // interface has, choosing and taking it under one lock.
  const std::string subnet_file = log_ + ".subnet";
  const std::string setup =
      "set -e; exec 9>/tmp/giant-launch-test-netns.lock; flock 9; n=1; "
      "while ip -4 -o addr show | grep -q \" 10\\.77\\.$n\\.\"; do n=$((n+1)); [ $n -lt 255 ]; done; "
      "echo $n > " + subnet_file + "; ip netns add " + name_ + "; ip link add " + veth_host_ +
      " type veth peer name " + veth_ns + "; ip link set " + veth_ns + " netns " + name_ +
      "; ip addr add 10.77.$n.1/24 dev " + veth_host_ + "; ip link set " + veth_host_ + " up; ip -n " + name_ +
      " addr add 10.77.$n.2/24 dev " + veth_ns + "; ip -n " + name_ + " link set " + veth_ns + " up; ip -n " +
      name_ + " link set lo up";
  if (shell("(" + setup + ") > " + log_ + " 2>&1") != 0) {
    error_ = "`" + setup + "` failed: " + read_file(log_);
    return;
  }
  std::string subnet = read_file(subnet_file);
  while (!subnet.empty() && subnet.back() == '\n') subnet.pop_back();
  host_address_ = "10.77." + subnet + ".1";
}

TestNamespace::~TestNamespace() {
  shell("ip netns del " + name_ + " 2>/dev/null; ip link del " + veth_host_ + " 2>/dev/null; rm -f " + log_ + " " +
        log_ + ".subnet");
}

}  // namespace giant::launch::test
