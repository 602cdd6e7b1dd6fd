#include "giant/base/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace giant {

bool retain_freed_memory(size_t bytes) {
  if (bytes == 0) return true;
#if defined(__GLIBC__)
  // glibc's largest mmap threshold: larger blocks are still mapped apart.
  constexpr int kLargestHeapBlock = 32 << 20;
  if (bytes > kMaxRetainedBytes) return false;
  const int trim = static_cast<int>(bytes);
  return mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock) == 1 && mallopt(M_TRIM_THRESHOLD, trim) == 1;
#else
  return false;
#endif
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * page_size;
}

int64_t max_resident_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
#if defined(__APPLE__)
  return static_cast<int64_t>(usage.ru_maxrss);  // bytes there
#else
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
#endif
}

}  // namespace giant
