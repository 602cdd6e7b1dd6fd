#pragma once
// The process's host memory: how its heap hands freed memory back to the
// kernel, and the most it has held.
#include <climits>
#include <cstddef>
#include <cstdint>

namespace giant {

// Keeps up to `bytes` of freed heap memory for the next allocations instead
// of returning it to the kernel, and serves blocks up to 32 MiB from the heap
// instead of fresh mappings. A training step frees and reallocates the same
// tensors every step; with glibc's defaults each of them is unmapped and
// faulted back in page by page (about 5,000 page faults per step of the
// bench model, 30% of its step time). Process-wide; 0 leaves glibc's defaults.
// Returns false where the C library refused the setting, or for more than
// kMaxRetainedBytes.
bool retain_freed_memory(size_t bytes);

// The most retain_freed_memory accepts: glibc's trim threshold is an int.
constexpr size_t kMaxRetainedBytes = INT_MAX;

// The host's physical memory in bytes (sysconf); 0 where the system does not say.
int64_t physical_memory_bytes();

// The most resident memory the process has held so far, in bytes
// (getrusage's ru_maxrss); 0 where the system does not say.
int64_t max_resident_bytes();

}  // namespace giant
