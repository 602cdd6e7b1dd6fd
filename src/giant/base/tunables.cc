#include "giant/base/tunables.h"

#include <charconv>

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "giant/base/error.h"
#include "giant/base/units.h"

namespace giant {

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
  define(name, TunableKind::integer, help).integer = value;
}
void Tunables::define_real(const std::string& name, double value, const std::string& help) {
  define(name, TunableKind::real, help).real = value;
}
void Tunables::define_bool(const std::string& name, bool value, const std::string& help) {
  define(name, TunableKind::boolean, help).boolean = value;
}
void Tunables::define_string(const std::string& name, const std::string& value, const std::string& help) {
  define(name, TunableKind::string, help).text = value;
}
void Tunables::define_bytes(const std::string& name, int64_t value, const std::string& help) {
  define(name, TunableKind::bytes, help).integer = value;
}
void Tunables::define_seconds(const std::string& name, double value, const std::string& help) {
  define(name, TunableKind::seconds, help).real = value;
}

void Tunables::set(const std::string& name, const std::string& text, TunableSource source) {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw ConfigError(name, "unknown tunable");
  Entry& e = it->second;
  if (source < e.source) return;
  Entry parsed = e;
  try {
    switch (e.kind) {
      case TunableKind::integer: {
        char* end = nullptr;
        long long v = std::strtoll(text.c_str(), &end, 10);
        GIANT_CHECK(!text.empty() && *end == '\0', "expected an integer, got '", text, "'");
        parsed.integer = v;
        break;
      }
      case TunableKind::real: {
        char* end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        GIANT_CHECK(!text.empty() && *end == '\0', "expected a number, got '", text, "'");
        parsed.real = v;
        break;
      }
      case TunableKind::boolean:
        if (text == "1" || text == "true" || text == "yes" || text == "on") parsed.boolean = true;
        else if (text == "0" || text == "false" || text == "no" || text == "off") parsed.boolean = false;
        else throw Error("expected true or false, got '" + text + "'");
        break;
      case TunableKind::string: parsed.text = text; break;
      case TunableKind::bytes: parsed.integer = parse_bytes(text); break;
      case TunableKind::seconds: parsed.real = parse_seconds(text); break;
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& err) {
    throw ConfigError(name, std::string(err.what()) + " (from " + tunable_source_name(source) + ")");
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
  }
  return out.str();
}

std::string Tunables::describe() const {
  std::ostringstream out;
  for (const auto& kv : entries_) {
    out << kv.first << " = " << render(kv.second) << " (" << tunable_source_name(kv.second.source)
        << ")  # " << kv.second.help << '\n';
  }
  return out.str();
}

}  // namespace giant
