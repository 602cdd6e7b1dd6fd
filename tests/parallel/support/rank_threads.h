// Ranks as threads for the parallel layer's tests.
#pragma once

#include <functional>

#include "giant/ccl/communicator.h"

namespace giant::parallel::test {

// Runs body(comm) on `size` threads, each with its Communicator over one
// MemoryStore. A rank that throws aborts its communicator (so the others
// fail fast instead of waiting out the timeout) and becomes a test failure.
void run_ranks(int size, const std::function<void(ccl::Communicator& comm)>& body);

}  // namespace giant::parallel::test
