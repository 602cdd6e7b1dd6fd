#include "giant/planner/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "giant/base/error.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/model_layout.h"
#include "giant/planner/plan_report.h"

namespace giant::planner {

namespace {

std::vector<int> divisors(int64_t n, int64_t limit) {
  std::vector<int> out;
  for (int64_t d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

// Placements that differ only in where size-1 axes sit are the same.
std::vector<std::array<Axis, 3>> distinct_orders(const Layout& l) {
  std::array<Axis, 3> order = {Axis::tp, Axis::dp, Axis::pp};
  std::sort(order.begin(), order.end());
  std::vector<std::array<Axis, 3>> out;
  std::set<std::vector<Axis>> seen;
  do {
    std::vector<Axis> key;
    for (Axis a : order)
      if (l.size_of(a) > 1) key.push_back(a);
    if (seen.insert(key).second) out.push_back(order);
  } while (std::next_permutation(order.begin(), order.end()));
  return out;
}

template <class Fn>
void for_each_layout(const ModelSpec& m, int devices, const SearchOptions& o, Fn&& fn) {
  const LayoutFilter& f = o.filter;
  for (int tp : divisors(devices, devices)) {
    if (f.tp && *f.tp != tp) continue;
    for (int pp : divisors(devices / tp, layer_list_length(m))) {  // stages_can_cut says which
      if (f.pp && *f.pp != pp) continue;
      const int dp = devices / tp / pp;
      if (f.dp && *f.dp != dp) continue;
      Layout base;
      base.tp = tp;
      base.pp = pp;
      base.dp = dp;
      if (m.heads % tp != 0 || m.ffn_size() % tp != 0 || !stages_can_cut(m, pp, 1) || m.global_batch % dp != 0)
        continue;
      for (int mb : divisors(m.global_batch / dp, o.max_micro_batch)) {
        base.micro_batch = mb;
        if (f.micro_batch && *f.micro_batch != mb) continue;
        std::vector<std::pair<Schedule, int>> schedules = {{Schedule::one_f_one_b, 1}};
        if (pp > 1) {
          schedules.push_back({Schedule::gpipe, 1});
          if (m.layers % pp == 0)
            for (int v : divisors(m.layers / pp, o.max_virtual_stages))
              if (v >= 2) schedules.push_back({Schedule::interleaved, v});
        }
        for (auto [schedule, v] : schedules) {
          base.schedule = schedule;
          base.virtual_stages = v;
          for (int zero = 0; zero <= 3; ++zero) {
            if (o.engine.deepspeed && pp > 1 && zero >= 2) continue;  // DeepSpeed forbids it
            base.zero = zero;
            for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full}) {
              base.recompute = r;
              for (bool sp : {false, true}) {
                if (sp && tp == 1) continue;
                base.sequence_parallel = sp;
                for (const auto& order : distinct_orders(base)) {
                  base.order = order;
                  base.grad_wire = f.grad_wire.value_or(ccl::GradWire::none);
                  if (!f.accepts(base) || !why_invalid(base, m, devices).empty()) continue;
                  if (o.train_runs_only && !why_train_cannot_run(base).empty()) continue;
                  fn(base);
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::vector<Layout> enumerate_layouts(const ModelSpec& m, int devices, const SearchOptions& o) {
  std::vector<Layout> out;
  for_each_layout(m, devices, o, [&](const Layout& l) { out.push_back(l); });
  return out;
}

SearchResult search_layouts(const ModelSpec& m, const ClusterSpec& c, const SearchOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  m.validate();
  SearchResult result;
  result.precision = resolve_precision(o.precision, c.device);
  const double usable = c.device.usable_memory();
  std::vector<Estimate> fitting;
  CostOptions simulated;
  simulated.precision = result.precision;
  simulated.engine = o.engine;
  CostOptions closed_form = simulated;
  closed_form.simulate_pipeline = false;
  auto consider = [&](const Layout& l) {
    ++result.valid_layouts;
    MemoryBreakdown memory = memory_per_device(m, l, result.precision, o.engine);
    memory.comm_buffers += grad_wire_memory_bytes(memory.parameters, c, l);
    if (memory.total() > usable) {
      if (!result.least_memory || memory.total() < result.least_memory->memory.total()) {
        Estimate e;
        e.layout = l;
        e.precision = result.precision;
        e.memory = memory;
        e.usable_memory_bytes = usable;
        result.least_memory = e;
      }
      return;
    }
    fitting.push_back(estimate_layout(m, c, l, closed_form));
    if (!result.least_memory || memory.total() < result.least_memory->memory.total())
      result.least_memory = fitting.back();
  };
  for_each_layout(m, c.devices(), o, [&](const Layout& base) {
    // The wires compress f32 gradients (train.grad_dtype = fp32).
    const bool wire_matters = base.dp > 1 && base.zero < 3 && !o.filter.grad_wire &&
                              result.precision.gradients == Precision::fp32 &&
                              group_link(c, base, Axis::dp).crosses_hosts;
    if (!wire_matters) return consider(base);
    for (ccl::GradWire wire : o.grad_wires) {
      Layout l = base;
      l.grad_wire = wire;
      if (!why_invalid(l, m, c.devices()).empty()) continue;  // a low-rank wire at ZeRO 2
      consider(l);
    }
  });
  result.fitting_layouts = static_cast<int64_t>(fitting.size());
  auto faster = [](const Estimate& a, const Estimate& b) { return ranked_step_seconds(a) < ranked_step_seconds(b); };
  std::sort(fitting.begin(), fitting.end(), faster);
  const size_t simulate =
      o.simulate_best > 0 ? std::min(fitting.size(), static_cast<size_t>(o.simulate_best)) : fitting.size();
  fitting.resize(simulate);
  for (Estimate& e : fitting) e = estimate_layout(m, c, e.layout, simulated);
  result.simulated_layouts = static_cast<int64_t>(simulate);
  std::stable_sort(fitting.begin(), fitting.end(), faster);
  // Placements that change nothing (the axes stay inside a host either way)
  // tie exactly; show the first (canonical) one only.
  std::vector<Estimate> distinct;
  for (Estimate& e : fitting) {
    Layout same = e.layout;
    bool duplicate = false;
    for (const Estimate& kept : distinct) {
      same.order = kept.layout.order;
      duplicate = duplicate || (same.describe() == kept.layout.describe() &&
                                std::abs(kept.time.step_s - e.time.step_s) <= 1e-9 * e.time.step_s);
    }
    if (!duplicate) distinct.push_back(std::move(e));
  }
  fitting = std::move(distinct);
  for (const Estimate& e : fitting) {
    const Layout& w = fitting.front().layout;
    if (e.layout.tp != w.tp || e.layout.pp != w.pp || e.layout.dp != w.dp) {
      result.best_other_split = e;
      break;
    }
  }
  if (fitting.size() > static_cast<size_t>(std::max(o.top, 1))) fitting.resize(static_cast<size_t>(std::max(o.top, 1)));
  result.best = std::move(fitting);
  result.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<Estimate> best_layouts(const ModelSpec& model, const ClusterSpec& unresolved, const SearchOptions& options) {
  const ClusterSpec cluster = unresolved.resolved();
  const SearchResult result = search_layouts(model, cluster, options);
  if (result.best.empty()) throw Error(explain_fits_nowhere(model, cluster, result));
  return result.best;
}

Estimate best_layout(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options) {
  SearchOptions o = options;
  o.top = 1;
  return best_layouts(model, cluster, o).front();
}

double wire_rank_factor(ccl::GradWire wire) { return wire == ccl::GradWire::int4 ? 1.2 : 1.0; }

double ranked_step_seconds(const Estimate& e) { return e.time.step_s * wire_rank_factor(e.layout.grad_wire); }

std::string ranking_note(const std::vector<Estimate>& ranked) {
  for (size_t i = 1; i < ranked.size(); ++i) {
    if (ranked[i].time.step_s >= ranked.front().time.step_s) continue;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s layouts rank %.2fx slower than predicted, for the loss their wire adds",
                  ccl::grad_wire_name(ranked[i].layout.grad_wire),
                  wire_rank_factor(ranked[i].layout.grad_wire));
    return line;
  }
  return "";
}

}  // namespace giant::planner
