// Ranks as threads of the test process over one MemoryStore, "hosts" told
// apart by their host ids: for collective start-up work (rate and cluster
// measurements) without processes.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"

namespace giant::train::test {

// Runs body(rank, world) on `hosts.size()` ranks as threads; rank r's host
// id is hosts[r]. Rethrows the first rank's error.
template <class Body>
void on_ranks(const std::vector<std::string>& hosts, Body body) {
  auto store = std::make_shared<ccl::MemoryStore>();
  const int size = static_cast<int>(hosts.size());
  std::vector<std::exception_ptr> errors(hosts.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ccl::CommConfig config;
        config.host_id = hosts[rank];
        body(rank, ccl::Communicator::create(store, rank, size, config, "world"));
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace giant::train::test
