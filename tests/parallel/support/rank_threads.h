// Ranks as threads for the parallel layer's tests.
#pragma once

#include <functional>
#include <string>

#include "giant/ccl/communicator.h"

namespace giant::parallel::test {

// Runs body(comm) on `size` threads, each with its Communicator over one
// MemoryStore. A rank that throws aborts its communicator (so the others
// fail fast instead of waiting out the timeout) and becomes a test failure.
// transport: ccl.transport ("auto": shared memory between the threads).
void run_ranks(int size, const std::function<void(ccl::Communicator& comm)>& body,
               const std::string& transport = "auto");

}  // namespace giant::parallel::test
