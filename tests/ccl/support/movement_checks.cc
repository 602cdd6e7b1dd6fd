// Checks of the collectives that move data without reducing it, of the
// barrier and of send/recv.
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>

#include "ccl/support/collective_checks.h"
#include "ccl/support/ranks.h"

namespace giant::ccl::test {
namespace {

constexpr uint8_t kSentinel = 0x5A;

uint32_t salt_of(DType dtype, size_t count, int extra = 0) {
  return static_cast<uint32_t>(count * 113 + static_cast<int>(dtype) * 7 + extra);
}

// Whether a dtype gets the big count: the dtypes of the plan's big cases.
bool is_big_dtype(const CollectivePlan& plan, DType dtype) {
  for (const auto& c : plan.big_cases)
    if (c.first == dtype) return true;
  return false;
}

// Every dtype, count and placement of the plan; then the big count, for the
// first dtype of the plan's big cases only (moving data does not depend on
// the dtype beyond its size), and only when `with_big` is set (rooted
// collectives: for one root).
template <class Case>
void for_each_case(const CollectivePlan& plan, Case&& one_case, bool with_big = true) {
  for (size_t count : plan.counts)
    for (DType dtype : plan.dtypes)
      for (bool in_place : {false, true}) one_case(dtype, count, in_place);
  if (!with_big) return;
  for (DType dtype : plan.dtypes) {
    if (!is_big_dtype(plan, dtype)) continue;
    one_case(dtype, kBigCount, false);
    one_case(dtype, kBigCount, true);
    return;
  }
}

// Elements rank r contributes to allgatherv for a case of `count`: some
// ranks more, some fewer, some (for small counts) none.
size_t varied_count(size_t count, int r) {
  switch (r % 3) {
    case 0: return count;
    case 1: return count / 2;
    default: return count == 0 ? 0 : count + r;
  }
}

// Elements rank `from` sends to rank `to` in alltoallv: 0, count/2 or count.
size_t pair_count(size_t count, int from, int to) { return count * ((from + 2 * to) % 3) / 2; }

std::vector<size_t> offsets_of(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

}  // namespace

void check_allgather(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
    const uint32_t salt = salt_of(dtype, count);
    Buffer input(dtype, count);
    Buffer output(dtype, count * n);
    input.fill([&](size_t i) { return movement_input(rank, i, salt); });
    output.fill_bytes(kSentinel);
    AllgatherOptions options;
    options.memory = plan.memory;
    if (in_place) {  // this rank's block of the output already holds its input
      for (size_t i = 0; i < count; ++i) output.set(rank * count + i, input.get(i));
      options.input = output.at(rank * count);
    } else {
      options.input = input.data();
    }
    options.output = output.data();
    options.count = count;
    options.dtype = dtype;
    const std::string name = case_name("allgather", comm, dtype, count, in_place);
    if (!run_op(name, findings, [&] { return allgather(comm, options); })) return;
    compare(output, 0, count * n, [&](size_t j) { return movement_input(static_cast<int>(j / count), j % count, salt); },
            false, name, findings);
  });
}

void check_allgatherv(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
    const uint32_t salt = salt_of(dtype, count, 1);
    std::vector<size_t> counts(n);
    for (int r = 0; r < n; ++r) counts[r] = varied_count(count, r);
    const std::vector<size_t> offsets = offsets_of(counts);
    Buffer input(dtype, counts[rank]);
    Buffer output(dtype, offsets[n]);
    input.fill([&](size_t i) { return movement_input(rank, i, salt); });
    output.fill_bytes(kSentinel);
    AllgathervOptions options;
    options.memory = plan.memory;
    if (in_place) {
      for (size_t i = 0; i < counts[rank]; ++i) output.set(offsets[rank] + i, input.get(i));
      options.input = output.at(offsets[rank]);
    } else {
      options.input = input.data();
    }
    options.output = output.data();
    options.counts = counts;
    options.dtype = dtype;
    const std::string name = case_name("allgatherv", comm, dtype, count, in_place);
    if (!run_op(name, findings, [&] { return allgatherv(comm, options); })) return;
    for (int r = 0; r < n; ++r) {
      compare(output, offsets[r], counts[r], [&](size_t i) { return movement_input(r, i, salt); }, false,
              name + " block of rank " + std::to_string(r), findings);
    }
  });
}

void check_alltoall(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
    const uint32_t salt = salt_of(dtype, count, 2);
    Buffer input(dtype, count * n);
    Buffer output(dtype, in_place ? 0 : count * n);
    input.fill([&](size_t j) { return movement_input(rank, j, salt); });
    output.fill_bytes(kSentinel);
    AlltoallOptions options;
    options.memory = plan.memory;
    options.input = input.data();
    options.output = in_place ? input.data() : output.data();
    options.count = count;
    options.dtype = dtype;
    const std::string name = case_name("alltoall", comm, dtype, count, in_place);
    if (!run_op(name, findings, [&] { return alltoall(comm, options); })) return;
    // Block i comes from rank i, which sent its block `rank`.
    compare(in_place ? input : output, 0, count * n,
            [&](size_t j) { return movement_input(static_cast<int>(j / count), rank * count + j % count, salt); },
            false, name, findings);
  });
}

void check_alltoallv(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
    if (in_place) return;  // the send and receive layouts differ
    const uint32_t salt = salt_of(dtype, count, 3);
    std::vector<size_t> send_counts(n), recv_counts(n);
    for (int peer = 0; peer < n; ++peer) {
      send_counts[peer] = pair_count(count, rank, peer);
      recv_counts[peer] = pair_count(count, peer, rank);
    }
    const std::vector<size_t> recv_offsets = offsets_of(recv_counts);
    Buffer input(dtype, offsets_of(send_counts)[n]);
    Buffer output(dtype, recv_offsets[n]);
    input.fill([&](size_t j) { return movement_input(rank, j, salt); });
    output.fill_bytes(kSentinel);
    AlltoallvOptions options;
    options.memory = plan.memory;
    options.input = input.data();
    options.output = output.data();
    options.send_counts = send_counts;
    options.recv_counts = recv_counts;
    options.dtype = dtype;
    const std::string name = case_name("alltoallv", comm, dtype, count, false);
    if (!run_op(name, findings, [&] { return alltoallv(comm, options); })) return;
    for (int from = 0; from < n; ++from) {
      // Where rank `from` kept the block it sent to this rank.
      size_t sender_offset = 0;
      for (int to = 0; to < rank; ++to) sender_offset += pair_count(count, from, to);
      compare(output, recv_offsets[from], recv_counts[from],
              [&](size_t i) { return movement_input(from, sender_offset + i, salt); }, false,
              name + " block from rank " + std::to_string(from), findings);
    }
  });
}

void check_broadcast(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int rank = comm.rank();
  for (int root = 0; root < comm.size(); ++root) {
    for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
      const uint32_t salt = salt_of(dtype, count, 4 + root);
      Buffer input(dtype, count);
      Buffer output(dtype, count);
      if (rank == root) input.fill([&](size_t i) { return movement_input(root, i, salt); });
      output.fill_bytes(kSentinel);
      BroadcastOptions options;
      options.memory = plan.memory;
      options.input = rank == root ? input.data() : nullptr;  // read on the root only
      options.output = output.data();
      if (in_place) {
        if (rank == root && input.nbytes() > 0) std::memcpy(output.data(), input.data(), input.nbytes());
        options.input = output.data();
      }
      options.count = count;
      options.dtype = dtype;
      options.root = root;
      const std::string name = case_name("broadcast", comm, dtype, count, in_place, "root=" + std::to_string(root));
      if (!run_op(name, findings, [&] { return broadcast(comm, options); })) return;
      compare(output, 0, count, [&](size_t i) { return movement_input(root, i, salt); }, false, name, findings);
    }, root == comm.size() - 1);
  }
}

void check_gather(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for (int root = 0; root < n; ++root) {
    for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
      const uint32_t salt = salt_of(dtype, count, 10 + root);
      Buffer input(dtype, count);
      Buffer output(dtype, rank == root ? count * n : 0);
      input.fill([&](size_t i) { return movement_input(rank, i, salt); });
      output.fill_bytes(kSentinel);
      GatherOptions options;
      options.memory = plan.memory;
      options.input = input.data();
      options.output = rank == root ? output.data() : nullptr;  // written on the root only
      if (in_place && rank == root) {
        if (input.nbytes() > 0) std::memcpy(output.at(root * count), input.data(), input.nbytes());
        options.input = output.at(root * count);
      }
      options.count = count;
      options.dtype = dtype;
      options.root = root;
      const std::string name = case_name("gather", comm, dtype, count, in_place, "root=" + std::to_string(root));
      if (!run_op(name, findings, [&] { return gather(comm, options); })) return;
      if (rank == root) {
        compare(output, 0, count * n,
                [&](size_t j) { return movement_input(static_cast<int>(j / count), j % count, salt); }, false, name,
                findings);
      }
    }, root == n - 1);
  }
}

void check_scatter(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for (int root = 0; root < n; ++root) {
    for_each_case(plan, [&](DType dtype, size_t count, bool in_place) {
      const uint32_t salt = salt_of(dtype, count, 20 + root);
      Buffer input(dtype, rank == root ? count * n : 0);
      Buffer output(dtype, count);
      input.fill([&](size_t j) { return movement_input(root, j, salt); });
      output.fill_bytes(kSentinel);
      ScatterOptions options;
      options.memory = plan.memory;
      options.input = rank == root ? input.data() : nullptr;  // read on the root only
      options.output = output.data();
      const bool root_in_place = in_place && rank == root;
      if (root_in_place) options.output = input.at(root * count);  // the root's block stays where it is
      options.count = count;
      options.dtype = dtype;
      options.root = root;
      const std::string name = case_name("scatter", comm, dtype, count, in_place, "root=" + std::to_string(root));
      if (!run_op(name, findings, [&] { return scatter(comm, options); })) return;
      if (root_in_place) {
        compare(input, 0, count * n, [&](size_t j) { return movement_input(root, j, salt); }, false,
                name + " (the root's input must be unchanged)", findings);
      } else {
        compare(output, 0, count, [&](size_t i) { return movement_input(root, rank * count + i, salt); }, false,
                name, findings);
      }
    }, root == n - 1);
  }
}

void check_barrier(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  for (int round = 0; round < 4; ++round) {
    const std::string name = case_name("barrier", comm, "round=" + std::to_string(round));
    const std::string key = plan.store_prefix + "/barrier/n" + std::to_string(n) + "/" + std::to_string(round);
    // One rank arrives late; nobody may leave before it arrived.
    if (rank == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (plan.store) plan.store->add(key, 1);
    BarrierOptions options;
    options.memory = plan.memory;
    if (!run_op(name, findings, [&] { return barrier(comm, options); })) return;
    if (plan.store) {
      const int64_t arrived = plan.store->add(key, 0);
      if (arrived != n) {
        findings.add(name + ": left the barrier when " + std::to_string(arrived) + " of " + std::to_string(n) +
                     " ranks had arrived");
      }
    }
  }
}

void check_send_recv(Communicator& comm, const CollectivePlan& plan, Findings& findings) {
  const int n = comm.size();
  const int rank = comm.rank();
  if (n == 1) return;  // no peer
  std::vector<int> shifts = {1};
  if (n > 2) shifts.push_back(2);
  std::vector<size_t> sizes;
  for (size_t count : plan.counts) sizes.push_back(count * 3);  // 0, 3, 21, 3000 bytes
  sizes.push_back(kBigCount * 4);
  for (int shift : shifts) {
    for (size_t size_index = 0; size_index < sizes.size(); ++size_index) {
      const size_t nbytes = sizes[size_index];
      const int to = (rank + shift) % n;
      const int from = (rank - shift + n) % n;
      const uint32_t tag = static_cast<uint32_t>(shift * 100 + size_index);
      Buffer outgoing(DType::u8, nbytes);
      Buffer incoming(DType::u8, nbytes);
      outgoing.fill([&](size_t i) { return static_cast<double>((pattern(rank, i, tag) + 41 * rank) & 0xff); });
      incoming.fill_bytes(kSentinel);
      const std::string name = case_name("send/recv", comm,
                                         "nbytes=" + std::to_string(nbytes) + " to=" + std::to_string(to) +
                                             " from=" + std::to_string(from) + " tag=" + std::to_string(tag));
      RecvOptions recv_options;
      recv_options.memory = plan.memory;
      recv_options.buffer = incoming.data();
      recv_options.nbytes = nbytes;
      recv_options.peer = from;
      recv_options.tag = tag;
      SendOptions send_options;
      send_options.memory = plan.memory;
      send_options.buffer = outgoing.data();
      send_options.nbytes = nbytes;
      send_options.peer = to;
      send_options.tag = tag;
      Work received;
      bool ok = run_op(name + " (send)", findings, [&] {
        received = recv(comm, recv_options);  // the receive is posted before the send
        return send(comm, send_options);
      });
      ok = run_op(name + " (recv)", findings, [&] { return received; }) && ok;
      if (!ok) return;
      compare(incoming, 0, nbytes,
              [&](size_t i) { return static_cast<double>((pattern(from, i, tag) + 41 * from) & 0xff); }, false, name,
              findings);
    }
  }
}

}  // namespace giant::ccl::test
