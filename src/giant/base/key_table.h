// A table of configuration keys, each declared once: its name, the field
// of a Config struct it binds to, the values it accepts and its help. The
// default is the field's initial value in Config. Defining the keys in a
// Tunables registry, reading them into a Config (a ConfigError naming the
// key for a value not accepted), --print-config, "did you mean" and the
// generated configuration reference all come from the rows.
//
// The factories below make rows of each kind; a table is a vector of rows,
// defined and read in order (define_keys, read_keys).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/tunables.h"

namespace giant::keys {

template <class Config>
struct KeyRow {
  std::string name;
  TunableKind kind = TunableKind::string;
  std::string allowed;  // the values it accepts, as the reference says it; empty: any of its kind
  std::string help;     // one line: --print-config and the reference
  std::string detail;   // said in the reference only, after the help; often empty
  // Defines the key in the registry, its default the field's value in `defaults`.
  std::function<void(Tunables&, const Config& defaults)> define;
  // Reads the key into its field; a ConfigError naming the key when the value is not allowed.
  std::function<void(const Tunables&, Config&)> read;
  // Once read: checks (or resolves) it against the keys read before it;
  // empty for most keys.
  using Then = std::function<void(Config&)>;
  Then then;
};

template <class Config>
void define_keys(const std::vector<KeyRow<Config>>& rows, Tunables& registry, const Config& defaults = Config()) {
  for (const KeyRow<Config>& row : rows) row.define(registry, defaults);
}

template <class Config>
Config read_keys(const std::vector<KeyRow<Config>>& rows, const Tunables& registry) {
  Config config;
  for (const KeyRow<Config>& row : rows) {
    row.read(registry, config);
    if (row.then) row.then(config);
  }
  return config;
}

// The field a row binds to.
template <class Config, class T>
struct Field {
  std::function<T&(Config&)> get;
  T& of(Config& c) const { return get(c); }
  const T& of(const Config& c) const { return get(const_cast<Config&>(c)); }
};

// A member of Config, or a member of one of its members.
template <class Config, class T>
Field<Config, T> member(T Config::*m) {
  return {[m](Config& c) -> T& { return c.*m; }};
}
template <class Config, class Section, class T>
Field<Config, T> member(Section Config::*section, T Section::*m) {
  return {[section, m](Config& c) -> T& { return (c.*section).*m; }};
}

// "a", "a or b", "a, b or c".
std::string join_or(const std::vector<std::string>& words);

// The integers a key accepts.
struct IntRule {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string note;     // what 0 means, said when a value is negative
  bool listed = false;  // said as its values ("0, 1, 2 or 3")
};
IntRule any_int();
IntRule at_least(int64_t min);
IntRule not_negative(std::string note = "");
IntRule between(int64_t min, int64_t max);
IntRule one_of_range(int64_t min, int64_t max);
std::string allowed_text(const IntRule& rule);
// ConfigError naming the key when v breaks the rule.
void check_int(const std::string& key, int64_t v, const IntRule& rule);

// The numbers a key accepts, and what the error says otherwise.
struct RealRule {
  std::function<bool(double)> ok = [](double) { return true; };
  std::string must;         // "must be positive"
  bool says_value = false;  // the error ends ", got VALUE"
  std::string allowed;
};
RealRule any_real();
RealRule positive();
RealRule not_negative_real(const std::string& note = "", bool says_value = false);
RealRule below_one();
RealRule finite_at_least_one();
// Accepted as any number here, checked against another key once that is read (followed_by).
RealRule checked_together(std::string allowed);
void check_real(const std::string& key, double v, const RealRule& rule);

// A row with no binding yet: the kind's factory below binds it.
template <class Config>
KeyRow<Config> described(const std::string& name, TunableKind kind, const std::string& allowed,
                         const std::string& help) {
  KeyRow<Config> row;
  row.name = name;
  row.kind = kind;
  row.allowed = allowed;
  row.help = help;
  return row;
}

// An integer field of any width: a value its type cannot hold is refused
// like one above the rule's maximum. `kind` integer or bytes (which
// accepts units: "4 MiB").
template <class Config, class I>
KeyRow<Config> integer(const std::string& name, Field<Config, I> f, IntRule rule, const std::string& help,
                       TunableKind kind = TunableKind::integer) {
  KeyRow<Config> row = described<Config>(name, kind, allowed_text(rule), help);
  IntRule held = rule;
  held.max = std::min<int64_t>(rule.max, static_cast<int64_t>(std::min<uint64_t>(
                                             std::numeric_limits<I>::max(), std::numeric_limits<int64_t>::max())));
  row.define = [=](Tunables& k, const Config& d) {
    if (kind == TunableKind::bytes) return k.define_bytes(name, static_cast<int64_t>(f.of(d)), help);
    k.define_int(name, static_cast<int64_t>(f.of(d)), help);
  };
  row.read = [=](const Tunables& k, Config& c) {
    check_int(name, k.get_int(name), held);
    f.of(c) = static_cast<I>(k.get_int(name));
  };
  return row;
}

template <class Config, class I>
KeyRow<Config> bytes(const std::string& name, Field<Config, I> f, IntRule rule, const std::string& help) {
  return integer(name, f, std::move(rule), help, TunableKind::bytes);
}

template <class Config>
KeyRow<Config> real(const std::string& name, Field<Config, double> f, RealRule rule, const std::string& help) {
  KeyRow<Config> row = described<Config>(name, TunableKind::real, rule.allowed, help);
  row.define = [=](Tunables& k, const Config& d) { k.define_real(name, f.of(d), help); };
  row.read = [=](const Tunables& k, Config& c) {
    check_real(name, k.get_real(name), rule);
    f.of(c) = k.get_real(name);
  };
  return row;
}

// A duration in whole milliseconds, written in seconds or with a unit ("30 s", "2 m").
template <class Config>
KeyRow<Config> duration(const std::string& name, Field<Config, std::chrono::milliseconds> f, RealRule rule,
                        const std::string& help) {
  KeyRow<Config> row = described<Config>(name, TunableKind::seconds, rule.allowed, help);
  row.define = [=](Tunables& k, const Config& d) { k.define_seconds(name, f.of(d).count() / 1000.0, help); };
  row.read = [=](const Tunables& k, Config& c) {
    const double seconds = k.get_real(name);
    check_real(name, seconds, rule);
    f.of(c) = std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
  };
  return row;
}

template <class Config>
KeyRow<Config> boolean(const std::string& name, Field<Config, bool> f, const std::string& help) {
  KeyRow<Config> row = described<Config>(name, TunableKind::boolean, "", help);
  row.define = [=](Tunables& k, const Config& d) { k.define_bool(name, f.of(d), help); };
  row.read = [=](const Tunables& k, Config& c) { f.of(c) = k.get_bool(name); };
  return row;
}

enum class Empty { allowed, refused };

template <class Config>
KeyRow<Config> text(const std::string& name, Field<Config, std::string> f, Empty empty, const std::string& help) {
  KeyRow<Config> row = described<Config>(name, TunableKind::string, empty == Empty::refused ? "not empty" : "", help);
  row.define = [=](Tunables& k, const Config& d) { k.define_string(name, f.of(d), help); };
  row.read = [=](const Tunables& k, Config& c) {
    f.of(c) = k.get_string(name);
    if (empty == Empty::refused && f.of(c).empty()) throw ConfigError(name, "must not be empty");
  };
  return row;
}

template <class Config>
KeyRow<Config> texts(const std::string& name, Field<Config, std::vector<std::string>> f, const std::string& help) {
  KeyRow<Config> row = described<Config>(name, TunableKind::list, "", help);
  row.define = [=](Tunables& k, const Config& d) { k.define_list(name, f.of(d), help); };
  row.read = [=](const Tunables& k, Config& c) { f.of(c) = k.get_list(name); };
  return row;
}

// A key whose value is one of a few names, each standing for a value of the field.
template <class T>
using Names = std::vector<std::pair<std::string, T>>;

template <class Config, class T>
KeyRow<Config> choice(const std::string& name, Field<Config, T> f, const Names<T>& names, const std::string& help) {
  std::vector<std::string> words;
  for (const auto& named : names) words.push_back(named.first);
  KeyRow<Config> row = described<Config>(name, TunableKind::string, join_or(words), help);
  row.define = [=](Tunables& k, const Config& d) {
    for (const auto& [word, value] : names) {
      if (value == f.of(d)) return k.define_string(name, word, help);
    }
    throw Error("the default of " + name + " has no name");  // an initial value missing from the table
  };
  row.read = [=](const Tunables& k, Config& c) {
    const std::string& word = k.get_string(name);
    for (const auto& [candidate, value] : names) {
      if (candidate == word) {
        f.of(c) = value;
        return;
      }
    }
    throw ConfigError(name, "must be " + join_or(words) + ", got '" + word + "'");
  };
  return row;
}

template <class Config>
KeyRow<Config> detailed(KeyRow<Config> row, const std::string& detail) {
  row.detail = detail;
  return row;
}

// The check's type names Config without deducing it (a lambda or a function converts).
template <class Config>
KeyRow<Config> followed_by(KeyRow<Config> row, typename KeyRow<Config>::Then check) {
  row.then = std::move(check);
  return row;
}

// The reference's "accepts" said otherwise than the rule says it (a rule
// checked by followed_by).
template <class Config>
KeyRow<Config> accepting(KeyRow<Config> row, const std::string& allowed) {
  row.allowed = allowed;
  return row;
}

}  // namespace giant::keys
