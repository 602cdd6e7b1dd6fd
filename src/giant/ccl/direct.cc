// Algorithms where every message goes straight to its destination.
#include <cstring>

#include "giant/ccl/algorithms.h"

namespace giant::ccl::detail {

void alltoallv_pairwise(OpContext& ctx, const char* in, const std::vector<size_t>& send_bytes, char* out,
                        const std::vector<size_t>& recv_bytes) {
  const int n = ctx.size(), r = ctx.rank();
  std::vector<size_t> send_off(n, 0), recv_off(n, 0);
  for (int i = 1; i < n; ++i) {
    send_off[i] = send_off[i - 1] + send_bytes[i - 1];
    recv_off[i] = recv_off[i - 1] + recv_bytes[i - 1];
  }
  size_t in_total = send_off[n - 1] + send_bytes[n - 1];
  size_t out_total = recv_off[n - 1] + recv_bytes[n - 1];
  // In place, the blocks we send would be overwritten by those we receive.
  if (in < out + out_total && out < in + in_total) {
    char* copy = ctx.scratch(0, in_total);
    move_bytes(copy, in, in_total);
    in = copy;
  }
  // Step i pairs r with r+i and r-i, so every link carries one message at a time.
  for (int i = 1; i < n; ++i) {
    int from = (r - i + n) % n;
    ctx.recv(from, 0, out + recv_off[from], recv_bytes[from]);
  }
  for (int i = 1; i < n; ++i) {
    int to = (r + i) % n;
    ctx.send(to, 0, in + send_off[to], send_bytes[to]);
  }
  move_bytes(out + recv_off[r], in + send_off[r], recv_bytes[r]);
  ctx.wait_all();
}

void gather_direct(OpContext& ctx, const char* in, char* out, size_t nbytes, int root) {
  const int n = ctx.size(), r = ctx.rank();
  if (r != root) {
    ctx.send(root, 0, in, nbytes);
    return;
  }
  // Own block first: in place, the input sits where other blocks will land.
  move_bytes(out + r * nbytes, in, nbytes);
  for (int i = 0; i < n; ++i) {
    if (i != r) ctx.recv(i, 0, out + i * nbytes, nbytes);
  }
  ctx.wait_all();
}

void scatter_direct(OpContext& ctx, const char* in, char* out, size_t nbytes, int root) {
  const int n = ctx.size(), r = ctx.rank();
  if (r != root) {
    ctx.wait(ctx.recv(root, 0, out, nbytes));
    return;
  }
  for (int i = 0; i < n; ++i) {
    if (i != r) ctx.send(i, 0, in + i * nbytes, nbytes);
  }
  ctx.wait_all();  // in place, our block may land on blocks being sent
  move_bytes(out, in + r * nbytes, nbytes);
}

void barrier_dissemination(OpContext& ctx) {
  const int n = ctx.size(), r = ctx.rank();
  uint64_t round = 0;
  for (int d = 1; d < n; d *= 2, ++round) {
    ctx.send((r + d) % n, round, nullptr, 0);
    ctx.wait(ctx.recv((r - d + n) % n, round, nullptr, 0));
  }
  ctx.wait_all();
}

}  // namespace giant::ccl::detail
