#include "transport_pairs.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench_common.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"

namespace giant::bench {

std::pair<std::string, std::string> gather_transports(ccl::Communicator& comm) {
  const int n = comm.size();
  if (n == 1) return {"-", comm.transport_to(0)};
  std::string mine;
  for (int peer = comm.rank() + 1; peer < n; ++peer)
    mine += (mine.empty() ? "" : ",") + std::to_string(comm.rank()) + "-" + std::to_string(peer) + ":" +
            comm.transport_to(peer);
  // The lengths first, then every rank's text padded to the longest.
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(n);
  ccl::AllgatherOptions a;
  a.input = &length, a.output = lengths.data(), a.count = 1, a.dtype = ccl::DType::i64;
  ccl::allgather(comm, a).wait();
  const size_t longest = static_cast<size_t>(std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end())));
  std::vector<uint8_t> padded(longest, 0), all(longest * n, 0);
  std::copy(mine.begin(), mine.end(), padded.begin());
  a.input = padded.data(), a.output = all.data(), a.count = longest, a.dtype = ccl::DType::u8;
  ccl::allgather(comm, a).wait();
  std::string pairs, kinds;
  std::vector<std::string> seen;
  for (int r = 0; r < n; ++r) {
    std::string text(reinterpret_cast<const char*>(all.data()) + r * longest, static_cast<size_t>(lengths[r]));
    for (const std::string& pair : split_list(text)) {
      pairs += (pairs.empty() ? "" : ",") + pair;
      std::string kind = pair.substr(pair.find(':') + 1);
      if (std::find(seen.begin(), seen.end(), kind) == seen.end()) {
        seen.push_back(kind);
        kinds += (kinds.empty() ? "" : "+") + kind;
      }
    }
  }
  return {pairs, kinds};
}

}  // namespace giant::bench
