// One typed registry of tunables (chunk sizes, socket counts, timeouts).
//
// Each layer defines its tunables with a default and a help line; values are
// layered default < config < environment (GIANT_<NAME>) < command line, and a
// value set from a lower layer never overrides a higher one. Unknown names and
// values of the wrong type are ConfigErrors naming the key. The registry is a
// plain object passed to whoever needs it: no global state. An unknown name
// says which known one is nearest ("did you mean ccl.timeout?").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace giant {

// list: strings (data.paths); as text (environment, bare --set) items are
// separated by commas.
enum class TunableKind { integer, real, boolean, string, bytes, seconds, list };
enum class TunableSource { defaults = 0, config = 1, environment = 2, command_line = 3 };

const char* tunable_source_name(TunableSource source);
// Where a value of name came from, as errors say it: "environment variable
// GIANT_TRAIN_LR" (what the user set), "config", "command line".
std::string tunable_origin(const std::string& name, TunableSource source);

class Tunables {
 public:
  void define_int(const std::string& name, int64_t value, const std::string& help);
  void define_real(const std::string& name, double value, const std::string& help);
  void define_bool(const std::string& name, bool value, const std::string& help);
  void define_string(const std::string& name, const std::string& value, const std::string& help);
  void define_bytes(const std::string& name, int64_t value, const std::string& help);
  void define_seconds(const std::string& name, double value, const std::string& help);
  void define_list(const std::string& name, const std::vector<std::string>& value, const std::string& help);

  // Parses text by the tunable's kind; ignored when a higher source already set it.
  void set(const std::string& name, const std::string& text, TunableSource source);
  // Applies every GIANT_<NAME> present in env (names upper-cased, '.' -> '_').
  // A GIANT_* variable that names no tunable but is one typo from one is
  // logged as a warning naming the one it probably meant.
  // A list's items as given (a TOML array), commas and all.
  void set_list(const std::string& name, const std::vector<std::string>& items, TunableSource source);
  void apply_environment(const std::map<std::string, std::string>& env);

  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  int64_t get_int(const std::string& name) const;   // integer and bytes
  double get_real(const std::string& name) const;   // real and seconds
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<std::string>& get_list(const std::string& name) const;
  TunableSource source(const std::string& name) const;
  TunableKind kind(const std::string& name) const;
  const std::string& help(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  // The value as describe() shows it (strings quoted, bytes and seconds with units).
  std::string value_text(const std::string& name) const;

  // Whether the value is the one the tunable was defined with (whatever
  // source set it).
  bool at_default(const std::string& name) const;
  // "name = value (source)  # help", one line each, sorted by name.
  std::string describe() const;
  // The same lines for the tunables not at their default only.
  std::string describe_changed() const;
  static std::string environment_name(const std::string& name);

 private:
  struct Value {
    int64_t integer = 0;
    double real = 0;
    bool boolean = false;
    std::string text;
    std::vector<std::string> items;
    bool operator==(const Value& o) const {
      return integer == o.integer && real == o.real && boolean == o.boolean && text == o.text && items == o.items;
    }
  };
  struct Entry : Value {
    TunableKind kind;
    std::string help;
    TunableSource source = TunableSource::defaults;
    Value initial;  // the defined default
  };
  Entry& define(const std::string& name, TunableKind kind, const std::string& help);
  void warn_about_near_misses(const std::map<std::string, std::string>& env) const;
  const Entry& entry(const std::string& name, TunableKind a, TunableKind b) const;
  static std::string render(const Entry& e);
  static std::string describe_line(const std::string& name, const Entry& e);

  std::map<std::string, Entry> entries_;
};

}  // namespace giant
