#pragma once
// How the process's heap hands freed memory back to the kernel.
#include <climits>
#include <cstddef>

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

}  // namespace giant
