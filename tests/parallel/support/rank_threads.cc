#include "parallel/support/rank_threads.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>

#include "giant/ccl/store.h"

namespace giant::parallel::test {

void run_ranks(int size, const std::function<void(ccl::Communicator& comm)>& body, const std::string& transport) {
  using namespace std::chrono_literals;
  auto store = std::make_shared<ccl::MemoryStore>();
  ccl::CommConfig config;
  config.timeout = 20s;
  config.connect_timeout = 20s;
  config.transport = transport;
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      std::shared_ptr<ccl::Communicator> comm;
      try {
        at::init_num_threads();
        comm = ccl::Communicator::create(store, rank, size, config);
        body(*comm);
      } catch (const std::exception& e) {
        if (comm) comm->abort(e.what());
        std::lock_guard<std::mutex> lock(mutex);
        errors.push_back("rank " + std::to_string(rank) + " of " + std::to_string(size) + " threw: " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace giant::parallel::test
