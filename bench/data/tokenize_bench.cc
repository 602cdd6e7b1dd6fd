// giant-tokenize-bench --tokenizer SPEC --input FILE [--ids-out PATH]
//
// Loads the tokenizer (not timed), then times one encode of the whole file
// on this thread, with the tokenizer's cache empty as a fresh process has
// it. Prints `bench=tokenize impl=giant bytes=.. tokens=.. seconds=.. mb_per_s=..`
// (MB = 10^6 bytes); with --ids-out, writes the ids there space-separated
// on one line, as tests/data/support/gpt2_reference_ids.js prints them.
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
    const std::vector<int32_t> ids = tokenizer->encode(bytes);
    const double seconds = clock.seconds();
    std::printf("bench=tokenize impl=giant bytes=%zu tokens=%zu seconds=%.4f mb_per_s=%.2f\n", bytes.size(), ids.size(),
                seconds, static_cast<double>(bytes.size()) / 1e6 / seconds);
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
