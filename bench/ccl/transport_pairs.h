// Which transport carries each pair of ranks in a benchmark's communicator.
#pragma once

#include <string>
#include <utility>

namespace giant::ccl {
class Communicator;
}

namespace giant::bench {

// Gathered from every rank (a collective: every rank calls it): the pairs as
// "0-1:shm,0-2:tcp,..." ("-" for one rank) and the distinct transports as
// "shm+tcp".
std::pair<std::string, std::string> gather_transports(ccl::Communicator& comm);

}  // namespace giant::bench
