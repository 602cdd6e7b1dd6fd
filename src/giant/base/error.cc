#include "giant/base/error.h"

namespace giant::detail {

void check_failed(const char* condition, const char* file, int line,
                  const std::string& message) {
  std::string base = file;
  auto slash = base.rfind("src/giant/");
  if (slash != std::string::npos) base = base.substr(slash + 4);
  throw Error(message.empty() ? concat("check failed: ", condition, " (", base, ":", line, ")")
                              : concat(message, " [", condition, " at ", base, ":", line, "]"));
}

}  // namespace giant::detail
