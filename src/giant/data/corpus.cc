#include "giant/data/corpus.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "giant/base/error.h"

namespace giant::data {
void check_val_fraction(double val_fraction) {
  // Written so that NaN fails too.
  if (!(val_fraction > 0.0 && val_fraction <= 0.5)) {
    throw ConfigError("data.val_fraction", detail::concat("must be in (0, 0.5], got ", val_fraction));
  }
}

namespace {

[[noreturn]] void throw_unreadable(const std::string& path, int error_number) {
  throw ConfigError("data.path", "cannot read '" + path + "': " + std::strerror(error_number));
}

std::string read_file(const std::string& path) {
  errno = 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw_unreadable(path, errno);
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    size_t n = std::fread(buffer, 1, sizeof(buffer), file.get());
    contents.append(buffer, n);
    if (n < sizeof(buffer)) break;
  }
  // A directory opens fine on Linux and fails here with EISDIR.
  if (std::ferror(file.get())) throw_unreadable(path, errno != 0 ? errno : EIO);
  return contents;
}

}  // namespace

TokenCorpus TokenCorpus::split(std::vector<int32_t> tokens, double val_fraction) {
  check_val_fraction(val_fraction);
  auto total = static_cast<int64_t>(tokens.size());
  // Nearest count, a tie going to train: so val never outgrows train at 0.5.
  auto val_count = static_cast<int64_t>(std::ceil(static_cast<double>(total) * val_fraction - 0.5));
  TokenCorpus corpus;
  corpus.val.assign(tokens.end() - val_count, tokens.end());
  tokens.resize(static_cast<size_t>(total - val_count));
  corpus.train = std::move(tokens);
  return corpus;
}

TokenCorpus TokenCorpus::load(const std::string& path, const Tokenizer& tokenizer,
                              double val_fraction) {
  // Checked before reading, so a bad value fails fast even on a large file.
  check_val_fraction(val_fraction);
  std::string text = read_file(path);
  if (text.empty()) throw ConfigError("data.path", "'" + path + "' is empty");
  std::vector<int32_t> tokens = tokenizer.encode(text);
  if (tokens.empty()) {
    throw ConfigError("data.path", "'" + path + "' yields no tokens with tokenizer '" +
                                       tokenizer.name() + "'");
  }
  return split(std::move(tokens), val_fraction);
}

}  // namespace giant::data
