#include "giant/base/tunables.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "giant/base/edit_distance.h"
#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/base/units.h"

namespace giant {
namespace {

constexpr const char* kEnvironmentPrefix = "GIANT_";

// The whole text as a number, or an error saying what was expected.
int64_t parse_integer(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') throw Error("expected an integer, got '" + text + "'");
  if (errno == ERANGE) throw Error("integer out of range, got '" + text + "'");
  return v;
}

double parse_real(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw Error("expected a number, got '" + text + "'");
  if (errno == ERANGE) throw Error("number out of range, got '" + text + "'");
  return v;
}

}  // namespace

std::string tunable_origin(const std::string& name, TunableSource source) {
  if (source == TunableSource::environment) return "environment variable " + Tunables::environment_name(name);
  return tunable_source_name(source);
}

const char* tunable_source_name(TunableSource source) {
  switch (source) {
    case TunableSource::defaults: return "default";
    case TunableSource::config: return "config";
    case TunableSource::environment: return "environment";
    case TunableSource::command_line: return "command line";
  }
  return "?";
}

Tunables::Entry& Tunables::define(const std::string& name, TunableKind kind, const std::string& help) {
  GIANT_CHECK(!name.empty(), "tunable name must not be empty");
  GIANT_CHECK(entries_.count(name) == 0, "tunable '", name, "' defined twice");
  Entry& e = entries_[name];
  e.kind = kind;
  e.help = help;
  return e;
}

void Tunables::define_int(const std::string& name, int64_t value, const std::string& help) {
  Entry& e = define(name, TunableKind::integer, help);
  e.integer = value;
  e.initial = e;
}
void Tunables::define_real(const std::string& name, double value, const std::string& help) {
  Entry& e = define(name, TunableKind::real, help);
  e.real = value;
  e.initial = e;
}
void Tunables::define_bool(const std::string& name, bool value, const std::string& help) {
  Entry& e = define(name, TunableKind::boolean, help);
  e.boolean = value;
  e.initial = e;
}
void Tunables::define_string(const std::string& name, const std::string& value, const std::string& help) {
  Entry& e = define(name, TunableKind::string, help);
  e.text = value;
  e.initial = e;
}
void Tunables::define_bytes(const std::string& name, int64_t value, const std::string& help) {
  Entry& e = define(name, TunableKind::bytes, help);
  e.integer = value;
  e.initial = e;
}
void Tunables::define_seconds(const std::string& name, double value, const std::string& help) {
  Entry& e = define(name, TunableKind::seconds, help);
  e.real = value;
  e.initial = e;
}

void Tunables::define_list(const std::string& name, const std::vector<std::string>& value, const std::string& help) {
  Entry& e = define(name, TunableKind::list, help);
  e.items = value;
  e.initial = e;
}

namespace {

// "a, b,c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string> split_items(const std::string& text) {
  std::vector<std::string> items;
  if (text.find_first_not_of(" \t") == std::string::npos) return items;
  size_t begin = 0;
  for (;;) {
    const size_t comma = text.find(',', begin);
    std::string item = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty()) throw Error("expected comma-separated items, got an empty one in '" + text + "'");
    items.push_back(item);
    if (comma == std::string::npos) return items;
    begin = comma + 1;
  }
}

}  // namespace

void Tunables::set_list(const std::string& name, const std::vector<std::string>& items, TunableSource source) {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable" + did_you_mean(name, names()));
  GIANT_CHECK(it->second.kind == TunableKind::list, "tunable '", name, "' is not a list");
  if (source < it->second.source) return;
  it->second.items = items;
  it->second.source = source;
}

void Tunables::set(const std::string& name, const std::string& text, TunableSource source) {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable" + did_you_mean(name, names()));
  Entry& e = it->second;
  if (source < e.source) return;
  Entry parsed = e;
  try {
    switch (e.kind) {
      case TunableKind::integer: parsed.integer = parse_integer(text); break;
      case TunableKind::real: parsed.real = parse_real(text); break;
      case TunableKind::boolean:
        if (text == "1" || text == "true" || text == "yes" || text == "on") parsed.boolean = true;
        else if (text == "0" || text == "false" || text == "no" || text == "off") parsed.boolean = false;
        else throw Error("expected true or false, got '" + text + "'");
        break;
      case TunableKind::string: parsed.text = text; break;
      case TunableKind::bytes: parsed.integer = parse_bytes(text); break;
      case TunableKind::seconds: parsed.real = parse_seconds(text); break;
      case TunableKind::list: parsed.items = split_items(text); break;
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& err) {
    throw ConfigError(name, std::string(err.what()) + " (from " + tunable_origin(name, source) + ")");
  }
  parsed.source = source;
  e = parsed;
}

std::string Tunables::environment_name(const std::string& name) {
  std::string out = "GIANT_";
  for (char c : name) out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

void Tunables::apply_environment(const std::map<std::string, std::string>& env) {
  for (const auto& kv : entries_) {
    auto it = env.find(environment_name(kv.first));
    if (it != env.end()) set(kv.first, it->second, TunableSource::environment);
  }
  warn_about_near_misses(env);
}

// A GIANT_* variable one typo away from a tunable's is most likely that
// tunable misspelt, silently ignored otherwise. Others (GIANT_RANK, and the
// tunables of layers this registry lacks) are not this registry's business.
void Tunables::warn_about_near_misses(const std::map<std::string, std::string>& env) const {
  const size_t prefix = std::char_traits<char>::length(kEnvironmentPrefix);
  std::vector<std::string> known;
  for (const auto& kv : entries_) known.push_back(environment_name(kv.first).substr(prefix));
  for (const auto& kv : env) {
    if (kv.first.rfind(kEnvironmentPrefix, 0) != 0) continue;
    const std::string suffix = kv.first.substr(prefix);
    if (std::find(known.begin(), known.end(), suffix) != known.end()) continue;
    const std::string nearest = nearest_name(suffix, known);
    if (nearest.empty()) continue;
    GIANT_LOG(warn) << "ignoring " << kv.first << ", which names no setting (did you mean " << kEnvironmentPrefix
                    << nearest << "?)";
  }
}

const Tunables::Entry& Tunables::entry(const std::string& name, TunableKind a, TunableKind b) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  GIANT_CHECK(it->second.kind == a || it->second.kind == b, "tunable '", name, "' read with the wrong type");
  return it->second;
}

int64_t Tunables::get_int(const std::string& name) const {
  return entry(name, TunableKind::integer, TunableKind::bytes).integer;
}
double Tunables::get_real(const std::string& name) const {
  return entry(name, TunableKind::real, TunableKind::seconds).real;
}
bool Tunables::get_bool(const std::string& name) const {
  return entry(name, TunableKind::boolean, TunableKind::boolean).boolean;
}
const std::string& Tunables::get_string(const std::string& name) const {
  return entry(name, TunableKind::string, TunableKind::string).text;
}
const std::vector<std::string>& Tunables::get_list(const std::string& name) const {
  return entry(name, TunableKind::list, TunableKind::list).items;
}
TunableSource Tunables::source(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  return it->second.source;
}

TunableKind Tunables::kind(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  return it->second.kind;
}
const std::string& Tunables::help(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  return it->second.help;
}
std::vector<std::string> Tunables::names() const {
  std::vector<std::string> out;
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}
std::string Tunables::value_text(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  return render(it->second);
}

std::string Tunables::render(const Entry& e) {
  std::ostringstream out;
  switch (e.kind) {
    case TunableKind::integer: out << e.integer; break;
    case TunableKind::real: {
      // Shortest text that reads back as the same double.
      char buffer[32];
      auto end = std::to_chars(buffer, buffer + sizeof buffer, e.real).ptr;
      out << std::string(buffer, end);
      break;
    }
    case TunableKind::boolean: out << (e.boolean ? "true" : "false"); break;
    case TunableKind::string: out << '"' << e.text << '"'; break;
    case TunableKind::bytes: out << format_bytes(static_cast<double>(e.integer)); break;
    case TunableKind::seconds: out << format_seconds(e.real); break;
    case TunableKind::list:
      out << '[';
      for (size_t i = 0; i < e.items.size(); ++i) out << (i ? ", \"" : "\"") << e.items[i] << '"';
      out << ']';
      break;
  }
  return out.str();
}

bool Tunables::at_default(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  return static_cast<const Value&>(it->second) == it->second.initial;
}

std::string Tunables::describe_line(const std::string& name, const Entry& e) {
  return name + " = " + render(e) + " (" + tunable_source_name(e.source) + ")  # " + e.help + '\n';
}

std::string Tunables::describe() const {
  std::string out;
  for (const auto& kv : entries_) out += describe_line(kv.first, kv.second);
  return out;
}

std::string Tunables::describe_changed() const {
  std::string out;
  for (const auto& kv : entries_) {
    if (!at_default(kv.first)) out += describe_line(kv.first, kv.second);
  }
  return out;
}

}  // namespace giant
