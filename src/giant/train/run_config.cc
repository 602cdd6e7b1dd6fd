#include "giant/train/run_config.h"

#include <filesystem>
#include <optional>
#include <sstream>

#include <toml++/toml.h>

#include "giant/base/edit_distance.h"
#include "giant/base/error.h"
#include "giant/base/utf8.h"
#include "giant/ccl/config.h"
#include "giant/train/run_keys.h"

namespace giant::train {
namespace {

std::string kind_name(TunableKind kind) {
  switch (kind) {
    case TunableKind::integer: return "an integer";
    case TunableKind::real: return "a number";
    case TunableKind::boolean: return "true or false";
    case TunableKind::string: return "a string";
    case TunableKind::bytes: return "a size (e.g. 25 or \"25MiB\")";
    case TunableKind::seconds: return "a duration (e.g. 30 or \"30s\")";
    case TunableKind::list: return "an array of strings";
  }
  return "a value";
}

std::string node_type_name(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  return out.str();
}

// How config.toml holds a string that is not valid UTF-8 (a POSIX path may
// be any bytes; a TOML string must be UTF-8): { percent_encoded = "..." }.
constexpr const char* kPercentEncoded = "percent_encoded";

// A string key's bytes from a TOML string, or from a { percent_encoded = "..." }
// table; nullopt for any other node.
std::optional<std::string> text_of(const std::string& key, const toml::node& node) {
  if (auto v = node.as_string()) return v->get();
  const toml::table* table = node.as_table();
  if (table == nullptr || table->size() != 1) return std::nullopt;
  const auto encoded = (*table)[kPercentEncoded].value<std::string>();
  if (!encoded) return std::nullopt;
  try {
    return percent_decode(*encoded);
  } catch (const Error& e) {
    throw ConfigError(key, std::string(kPercentEncoded) + ": " + e.what());
  }
}

toml::table percent_encoded_table(const std::string& bytes) {
  toml::table table{{kPercentEncoded, percent_encode_ill_formed(bytes)}};
  table.is_inline(true);
  return table;
}

// A string into config.toml: itself when it is valid UTF-8, else the table
// text_of reads back into the same bytes.
void insert_text(toml::table& table, const std::string& name, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    table.insert(name, bytes);
  } else {
    table.insert(name, percent_encoded_table(bytes));
  }
}

void push_text(toml::array& array, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    array.push_back(bytes);
  } else {
    array.push_back(percent_encoded_table(bytes));
  }
}

// The text Tunables::set parses, after checking the TOML type fits the key.
std::string value_text(const Tunables& keys, const std::string& key, const toml::node& node) {
  const TunableKind kind = keys.kind(key);
  auto wrong_type = [&] {
    return ConfigError(key, "expects " + kind_name(kind) + ", got a TOML " + node_type_name(node));
  };
  switch (kind) {
    case TunableKind::integer:
      if (auto v = node.as_integer()) return std::to_string(v->get());
      throw wrong_type();
    case TunableKind::real:
      if (auto v = node.as_integer()) return std::to_string(v->get());
      if (auto v = node.as_floating_point()) {
        std::ostringstream out;
        out.precision(17);
        out << v->get();
        return out.str();
      }
      throw wrong_type();
    case TunableKind::boolean:
      if (auto v = node.as_boolean()) return v->get() ? "true" : "false";
      throw wrong_type();
    case TunableKind::string:
      if (auto text = text_of(key, node)) return *text;
      throw wrong_type();
    case TunableKind::bytes:
    case TunableKind::seconds:
      if (auto v = node.as_string()) return v->get();
      if (auto v = node.as_integer()) return std::to_string(v->get());
      if (auto v = node.as_floating_point()) return std::to_string(v->get());
      throw wrong_type();
    case TunableKind::list:
      throw wrong_type();  // arrays go through set_value; a lone string is not a list
  }
  throw wrong_type();
}

std::string value_text_of_number(const toml::node& node) {
  if (auto v = node.as_integer()) return std::to_string(v->get());
  std::ostringstream out;
  out << node.as_floating_point()->get();  // 0.7 -> "0.7"
  return out.str();
}

// A TOML value into the key: arrays of strings for lists, value_text otherwise.
void set_value(Tunables& keys, const std::string& key, const toml::node& node, TunableSource source) {
  if (keys.kind(key) != TunableKind::list) {
    keys.set(key, value_text(keys, key, node), source);
    return;
  }
  const toml::array* array = node.as_array();
  if (array == nullptr) throw ConfigError(key, "expects an array of strings, got a TOML " + node_type_name(node));
  std::vector<std::string> items;
  for (const toml::node& item : *array) {
    if (auto text = text_of(key, item)) {
      items.push_back(*text);
    } else if (item.is_number()) {  // ["0.7", "books"] written as [0.7, "books"]
      items.push_back(value_text_of_number(item));
    } else {
      throw ConfigError(key, "expects an array of strings, got an item that is a TOML " + node_type_name(item));
    }
  }
  keys.set_list(key, items, source);
}

void require_known(const Tunables& keys, const std::string& key, const std::string& where) {
  if (!keys.has(key)) {
    throw ConfigError(key, "unknown key" + where + did_you_mean(key, keys.names()) +
                               "; giant train --print-config lists every key");
  }
}

void apply_table(Tunables& keys, const toml::table& table, const std::string& prefix,
                 const std::string& path) {
  for (const auto& [name, node] : table) {
    const std::string key = prefix.empty() ? std::string(name.str())
                                           : prefix + "." + std::string(name.str());
    const toml::table* section = node.as_table();
    if (section != nullptr && !keys.has(key)) {  // a section (a key's own table, { percent_encoded = ... }, is its value)
      apply_table(keys, *section, key, path);
      continue;
    }
    require_known(keys, key, " in " + path);
    set_value(keys, key, node, TunableSource::config);
  }
}

}  // namespace

void check_grad_dtype(const TrainSettings& t) {
  if (t.grad_dtype != Precision::fp32 && t.grad_dtype != t.precision) {
    throw ConfigError("train.grad_dtype", std::string("must be fp32 or the compute precision (train.precision = ") +
                                              precision_name(t.precision) + "), got " + precision_name(t.grad_dtype));
  }
}

void define_run_keys(Tunables& keys) {
  const RunConfig defaults;
  for (const RunKey& key : run_keys()) key.define(keys, defaults);
}

void apply_config_file(Tunables& keys, const std::string& path) {
  // toml++ reads a directory (or a FIFO, a device) as an empty document.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (std::filesystem::is_directory(status)) {
    throw ConfigError("", "config file '" + path + "' is a directory; giant train takes a TOML file, e.g. " +
                              "examples/configs/gpt-small.toml");
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw ConfigError("", "config file '" + path + "' is not a regular file; giant train takes a TOML file");
  }
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    throw ConfigError("", "config file '" + path + "': " + std::string(e.description()) +
                              " (at " + where.str() + ")");
  }
  apply_table(keys, table, "", path);
}

void apply_override(Tunables& keys, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("", "--set expects key=value, got '" + assignment + "'");
  }
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  require_known(keys, key, " in --set");
  try {
    toml::table parsed = toml::parse("value = " + text);
    set_value(keys, key, *parsed.get("value"), TunableSource::command_line);
  } catch (const toml::parse_error&) {
    // A bare word the shell stripped of its quotes (--set data.tokenizer="byte"),
    // or a size or duration with its unit (--set ccl.timeout=30s).
    const TunableKind kind = keys.kind(key);
    if (kind != TunableKind::string && kind != TunableKind::bytes && kind != TunableKind::seconds &&
        kind != TunableKind::list) {
      throw ConfigError(key, "expects " + kind_name(keys.kind(key)) + ", got '" + text + "'");
    }
    keys.set(key, text, TunableSource::command_line);
  }
}

RunConfig run_config_from(const Tunables& keys) {
  RunConfig config;
  for (const RunKey& key : run_keys()) {
    key.read(keys, config);
    if (key.then) key.then(config);
  }
  // ccl's link model set by hand outranks a known cluster's links.
  for (const auto& key : ccl::ccl_keys()) {
    const bool model = key.name.rfind("ccl.model.", 0) == 0;
    if (model && keys.has(key.name) && !keys.at_default(key.name)) config.parallel.ccl_model_set = true;
  }
  return config;
}

std::string run_config_toml(const Tunables& keys) {
  toml::table root;
  for (const std::string& key : keys.names()) {
    const auto dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    if (!root.contains(section)) {
      root.insert(section, toml::table{});
    }
    toml::table& table = *root.get_as<toml::table>(section);
    switch (keys.kind(key)) {
      case TunableKind::integer:
      case TunableKind::bytes: table.insert(name, keys.get_int(key)); break;
      case TunableKind::real:
      case TunableKind::seconds: table.insert(name, keys.get_real(key)); break;
      case TunableKind::boolean: table.insert(name, keys.get_bool(key)); break;
      case TunableKind::string: insert_text(table, name, keys.get_string(key)); break;
      case TunableKind::list: {
        toml::array items;
        for (const std::string& item : keys.get_list(key)) push_text(items, item);
        table.insert(name, std::move(items));
        break;
      }
    }
  }
  std::ostringstream out;
  out << "# The effective config of a giant train run, every key: giant train FILE reads it back.\n"
      << "# A string that is not UTF-8 is written { " << kPercentEncoded
      << " = \"...\" }: '%' and each ill-formed byte as %XX.\n"
      << root << '\n';
  return out.str();
}

}  // namespace giant::train
