// giant-tokenize-bench --tokenizer SPEC --input FILE [--ids-out PATH]
//
// Loads the tokenizer (not timed), then times one encode of the whole file
// on this thread, with the tokenizer's cache empty as a fresh process has
// it. Prints `bench=tokenize impl=giant bytes=.. tokens=.. seconds=..
// cpu_seconds=.. mb_per_s=.. wall_mb_per_s=..` (MB = 10^6 bytes): mb_per_s
// per core, from the process's CPU time, which other work on a shared
// machine does not inflate as it does the wall time. With --ids-out, writes
// the ids there space-separated on one line, as
// tests/data/support/gpt2_reference_ids.js prints them.
#include <time.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/data/tokenizer.h"

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int usage(const char* why) {
  std::cerr << "giant-tokenize-bench: " << why << "\nusage: giant-tokenize-bench --tokenizer SPEC --input FILE [--ids-out PATH]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec, input, ids_out;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + flag).c_str());
    if (flag == "--tokenizer") spec = argv[++i];
    else if (flag == "--input") input = argv[++i];
    else if (flag == "--ids-out") ids_out = argv[++i];
    else return usage(("unknown flag " + flag).c_str());
  }
  if (spec.empty() || input.empty()) return usage("--tokenizer and --input are required");
  try {
    std::ifstream in(input, std::ios::binary);
    if (!in) return usage(("cannot read " + input).c_str());
    std::ostringstream text;
    text << in.rdbuf();
    const std::string bytes = text.str();
    const auto tokenizer = giant::data::make_tokenizer(spec);
    const giant::Stopwatch clock;
    const double cpu_start = process_cpu_seconds();
    const std::vector<int32_t> ids = tokenizer->encode(bytes);
    const double cpu_seconds = process_cpu_seconds() - cpu_start;
    const double seconds = clock.seconds();
    const double mb = static_cast<double>(bytes.size()) / 1e6;
    std::printf("bench=tokenize impl=giant bytes=%zu tokens=%zu seconds=%.4f cpu_seconds=%.4f mb_per_s=%.2f "
                "wall_mb_per_s=%.2f\n",
                bytes.size(), ids.size(), seconds, cpu_seconds, mb / cpu_seconds, mb / seconds);
    if (!ids_out.empty()) {
      std::ofstream out(ids_out);
      for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
      out << "\n";
      if (!out) return usage(("cannot write " + ids_out).c_str());
    }
  } catch (const std::exception& e) {
    std::cerr << "giant-tokenize-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
