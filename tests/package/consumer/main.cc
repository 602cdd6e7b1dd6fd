// Allreduce over two threads through the installed Giant::ccl.
#include <cstdio>
#include <memory>
#include <thread>

#include "giant/ccl/collectives.h"

int main() {
  auto store = std::make_shared<giant::ccl::MemoryStore>();
  float results[2] = {0, 0};
  auto rank_main = [&](int rank) {
    auto comm = giant::ccl::Communicator::create(store, rank, 2);
    float value = static_cast<float>(rank + 1);
    giant::ccl::AllreduceOptions options;
    options.input = &value;
    options.output = &results[rank];
    options.count = 1;
    giant::ccl::allreduce(*comm, options).wait();
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  std::printf("consumer: allreduce gave %g and %g\n", results[0], results[1]);
  return results[0] == 3 && results[1] == 3 ? 0 : 1;
}
