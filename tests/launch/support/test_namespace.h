// A network namespace for tests of `giant launch --hosts netns:NAME`, with a
// veth pair to this namespace so that ranks inside reach the launcher's store.
#pragma once

#include <string>

namespace giant::launch::test {

// HOST_ADDR (host_address()) here, .2 of the same /24 inside. Deleted at the
// end (which deletes the pair with it), also when the test fails; namespaces
// left by a test process that died are deleted first.
class TestNamespace {
 public:
  TestNamespace();
  ~TestNamespace();
  TestNamespace(const TestNamespace&) = delete;
  TestNamespace& operator=(const TestNamespace&) = delete;

  // Why it could not be made (needs root and iproute2); empty when it was.
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  const std::string& host_address() const { return host_address_; }

 private:
  std::string name_;
  std::string host_address_;
  std::string veth_host_;
  std::string log_;
  std::string error_;
};

}  // namespace giant::launch::test
