#include "giant/layout/layout.h"

#include <algorithm>
#include <sstream>

#include "giant/base/error.h"

namespace giant {

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "gpipe";
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved: return "interleaved";
  }
  return "?";
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

const char* axis_name(Axis a) { return a == Axis::tp ? "tp" : a == Axis::dp ? "dp" : "pp"; }

Schedule parse_schedule(const std::string& t) {
  if (t == "gpipe") return Schedule::gpipe;
  if (t == "1f1b") return Schedule::one_f_one_b;
  if (t == "interleaved") return Schedule::interleaved;
  throw ConfigError("schedule", "expected gpipe, 1f1b or interleaved, got '" + t + "'");
}

Recompute parse_recompute(const std::string& t) {
  if (t == "none") return Recompute::none;
  if (t == "selective") return Recompute::selective;
  if (t == "full") return Recompute::full;
  throw ConfigError("recompute", "expected none, selective or full, got '" + t + "'");
}

std::array<Axis, 3> parse_placement(const std::string& t) {
  std::array<Axis, 3> order{};
  std::istringstream in(t);
  std::string item;
  int n = 0;
  bool seen[3] = {false, false, false};
  while (std::getline(in, item, '<')) {
    Axis a;
    if (item == "tp") a = Axis::tp;
    else if (item == "dp") a = Axis::dp;
    else if (item == "pp") a = Axis::pp;
    else throw ConfigError("placement", "expected tp, dp and pp joined by '<' (fastest first), got '" + t + "'");
    if (n >= 3 || seen[static_cast<int>(a)])
      throw ConfigError("placement", "each of tp, dp, pp must appear once, got '" + t + "'");
    seen[static_cast<int>(a)] = true;
    order[n++] = a;
  }
  if (n != 3) throw ConfigError("placement", "each of tp, dp, pp must appear once, got '" + t + "'");
  return order;
}

int Layout::stride_of(Axis axis) const {
  int stride = 1;
  for (Axis a : order) {
    if (a == axis) return stride;
    stride *= size_of(a);
  }
  return stride;
}

std::string Layout::placement() const {
  return std::string(axis_name(order[0])) + "<" + axis_name(order[1]) + "<" + axis_name(order[2]);
}

std::string Layout::describe() const {
  std::ostringstream out;
  out << "tp=" << tp << " pp=" << pp << " dp=" << dp << " mb=" << micro_batch << " " << schedule_name(schedule);
  if (schedule == Schedule::interleaved) out << " v=" << virtual_stages;
  out << " zero=" << zero << " recompute=" << recompute_name(recompute);
  if (sequence_parallel) out << " sp";
  out << " placement=" << placement();
  if (grad_wire != ccl::GradWire::none) out << " wire=" << ccl::grad_wire_name(grad_wire);
  return out.str();
}

std::string why_train_cannot_run(const Layout& l) {
  if (l.sequence_parallel) return "giant train has no sequence parallelism (sp)";
  Layout trained = l;
  trained.order = kTrainPlacement;
  for (Axis axis : kTrainPlacement) {
    if (l.size_of(axis) > 1 && l.stride_of(axis) != trained.stride_of(axis)) {
      return "giant train places ranks " + trained.placement() + " (tp fastest, pp slowest), not " + l.placement();
    }
  }
  return "";
}

bool LayoutFilter::accepts(const Layout& l) const {
  return (!dp || *dp == l.dp) && (!tp || *tp == l.tp) && (!pp || *pp == l.pp) &&
         (!micro_batch || *micro_batch == l.micro_batch) &&
         (!virtual_stages || *virtual_stages == l.virtual_stages) && (!zero || *zero == l.zero) &&
         (!schedule || *schedule == l.schedule) && (!recompute || *recompute == l.recompute) &&
         (!sequence_parallel || *sequence_parallel == l.sequence_parallel) && (!order || *order == l.order) &&
         (!grad_wire || *grad_wire == l.grad_wire);
}

LayoutFilter parse_layout_filter(const std::string& text) {
  LayoutFilter f;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw ConfigError("--layout", "expected key=value, got '" + item + "'");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto integer = [&]() {
      try {
        size_t used = 0;
        const int v = std::stoi(value, &used);
        if (used == value.size() && v >= 0) return v;
      } catch (const std::exception&) {
      }
      throw ConfigError("--layout " + key, "expected a non-negative integer, got '" + value + "'");
    };
    try {
      if (key == "dp") f.dp = integer();
      else if (key == "tp") f.tp = integer();
      else if (key == "pp") f.pp = integer();
      else if (key == "mb" || key == "micro_batch") f.micro_batch = integer();
      else if (key == "v" || key == "virtual_stages") f.virtual_stages = integer();
      else if (key == "zero") f.zero = integer();
      else if (key == "schedule") f.schedule = parse_schedule(value);
      else if (key == "recompute") f.recompute = parse_recompute(value);
      else if (key == "sp") f.sequence_parallel = integer() != 0;
      else if (key == "placement") f.order = parse_placement(value);
      else if (key == "wire" || key == "grad_wire") f.grad_wire = ccl::parse_grad_wire(value);
      else
        throw ConfigError("--layout " + key,
                          "unknown key (known: tp, pp, dp, mb, schedule, v, zero, recompute, sp, placement, wire)");
    } catch (const ConfigError& e) {
      if (e.key().rfind("--layout", 0) == 0) throw;
      throw ConfigError("--layout " + key, e.what());
    } catch (const Error& e) {
      throw ConfigError("--layout " + key, e.what());
    }
  }
  return f;
}

}  // namespace giant
