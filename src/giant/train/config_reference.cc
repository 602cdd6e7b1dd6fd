#include "giant/train/config_reference.h"

#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "giant/base/error.h"
#include "giant/ccl/config.h"
#include "giant/train/run_config.h"
#include "giant/train/run_keys.h"

namespace giant::train {
namespace {

// The sections in the order the reference gives them, each with its title.
const std::vector<std::pair<std::string, std::string>>& sections() {
  static const std::vector<std::pair<std::string, std::string>> titles = {
      {"model", "the GPT's shape"},
      {"parallel", "how the ranks share the work"},
      {"train", "the optimizer, precision, memory and what a run writes"},
      {"data", "what the run trains on"},
      {"checkpoint", "saving and resuming"},
      {"ccl", "communication between ranks (ccl's tunables)"},
  };
  return titles;
}

const char* kind_word(TunableKind kind) {
  switch (kind) {
    case TunableKind::integer: return "integer";
    case TunableKind::real: return "number";
    case TunableKind::boolean: return "boolean";
    case TunableKind::string: return "string";
    case TunableKind::bytes: return "size";
    case TunableKind::seconds: return "duration";
    case TunableKind::list: return "array of strings";
  }
  return "value";
}

// Text inside a Markdown table cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string code_cell(const std::string& text) { return text.empty() ? "" : "`" + cell(text) + "`"; }

constexpr const char* kPreamble = R"(# Configuration reference

<!-- Generated from the key table (src/giant/train/run_keys.cc and src/giant/ccl/config.cc): do not edit by hand.
     Regenerate: build/bin/giant train --print-config-reference > docs/config.md -->

Every key `giant train` reads. Values come from built-in defaults <
`CONFIG.toml` < environment (`GIANT_<KEY>`, upper-cased with `.` as `_`,
e.g. `GIANT_TRAIN_LR=1e-3`) < `--set key=value`. A `--set` value is read as
a TOML value (`--set train.lr=3e-4`, `--set parallel.schedule="1f1b"`; a
bare word is taken as a string). An unknown key, a value of the wrong kind
or one it does not accept is an error naming the key, before any work
starts; an unknown key says the nearest known one. `giant train
--print-config` prints every key with its value and where the value came
from; every run saves them all in `train.out_dir/config.toml`, which `giant
train` reads back.

A config file has one table per section:

```toml
[model]
layers = 4
hidden = 256
[train]
steps = 1000
lr = 2e-3
```

Sizes accept `B`, `KiB`, `MiB`, `GiB`, `KB`, `MB`, `GB`; durations `ms`, `s`, `m`.
)";

}  // namespace

void define_train_keys(Tunables& keys) {
  define_run_keys(keys);
  ccl::CommConfig::define_tunables(keys);
}

std::string config_reference() {
  Tunables keys;
  define_train_keys(keys);
  struct Said {
    std::string allowed, detail;
  };
  std::map<std::string, Said> table;  // what the key tables say beyond the registry
  for (const RunKey& key : run_keys()) table[key.name] = {key.allowed, key.detail};
  for (const auto& key : ccl::ccl_keys()) table[key.name] = {key.allowed, key.detail};
  std::map<std::string, std::vector<std::string>> by_section;
  for (const std::string& name : keys.names()) by_section[name.substr(0, name.find('.'))].push_back(name);

  std::ostringstream out;
  out << kPreamble;
  for (const auto& [section, title] : sections()) {
    out << "\n## `" << section << ".*`: " << title << "\n\n"
        << "| key | kind | default | accepts | meaning |\n|---|---|---|---|---|\n";
    for (const std::string& name : by_section[section]) {
      const Said& said = table.at(name);  // every key defined is in a table
      std::string meaning = keys.help(name);
      if (!said.detail.empty()) meaning += ". " + said.detail;
      out << "| `" << name << "` | " << kind_word(keys.kind(name)) << " | " << code_cell(keys.value_text(name))
          << " | " << cell(said.allowed) << " | " << cell(meaning) << " |\n";
    }
    by_section.erase(section);
  }
  if (!by_section.empty()) throw Error("config reference: no title for the keys " + by_section.begin()->first + ".*");
  return out.str();
}

}  // namespace giant::train
