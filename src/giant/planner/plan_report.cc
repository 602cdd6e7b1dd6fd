#include "giant/planner/plan_report.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "giant/planner/memory_model.h"
#include "giant/planner/schedule_simulate.h"
#include "giant/planner/train_command_line.h"

namespace giant::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fmt(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

struct Component {
  const char* name;
  double StepBreakdown::*field;
};
constexpr Component kComponents[] = {{"compute", &StepBreakdown::compute_s},
                                     {"tensor-parallel communication", &StepBreakdown::tp_comm_s},
                                     {"pipeline bubble", &StepBreakdown::bubble_s},
                                     {"pipeline transfers", &StepBreakdown::pp_comm_s},
                                     {"data-parallel communication", &StepBreakdown::dp_comm_s},
                                     {"optimizer", &StepBreakdown::optimizer_s}};

using Json = nlohmann::ordered_json;  // fields keep the order they are added in

Json estimate_json(const Estimate& e) {
  const auto& l = e.layout;
  const auto& t = e.time;
  Json layout;
  layout["tp"] = l.tp;
  layout["pp"] = l.pp;
  layout["dp"] = l.dp;
  layout["micro_batch"] = l.micro_batch;
  layout["schedule"] = schedule_name(l.schedule);
  layout["virtual_stages"] = l.virtual_stages;
  layout["zero"] = l.zero;
  layout["recompute"] = recompute_name(l.recompute);
  layout["sequence_parallel"] = l.sequence_parallel;
  layout["placement"] = l.placement();
  Json components;
  components["compute"] = t.compute_s;
  components["tp_comm"] = t.tp_comm_s;
  components["bubble"] = t.bubble_s;
  components["pp_comm"] = t.pp_comm_s;
  components["dp_comm"] = t.dp_comm_s;
  components["optimizer"] = t.optimizer_s;
  Json out;
  out["layout"] = std::move(layout);
  out["step_s"] = t.step_s;
  out["samples_per_s"] = e.samples_per_s;
  out["tflops_per_device"] = e.model_tflops_per_device;
  out["mfu"] = e.mfu;
  out["memory_bytes"] = e.memory.total();
  out["usable_memory_bytes"] = e.usable_memory_bytes;
  out["components_s"] = std::move(components);
  return out;
}

ClusterSpec with_transport(const ClusterSpec& c, Transport transport) {
  ClusterSpec out = c;
  if (out.inter_host.transport == transport) return out;
  out.inter_host.transport = transport;
  out.inter_host.latency_s = transport == Transport::tcp ? 30e-6 : 5e-6;
  out.inter_host.efficiency = default_link_efficiency(transport);
  out.name = c.name + "(" + transport_name(transport) + ")";
  return out;
}

}  // namespace

void print_plan_header(const ModelSpec& m, const ClusterSpec& c, const RunPrecision& precision, std::ostream& out) {
  const DeviceSpec device = c.device.in_precision(precision.compute);
  out << "model " << m.name << ": " << fmt("%.2f", total_parameters(m) / 1e9) << "B parameters, layers=" << m.layers
      << " hidden=" << m.hidden << " heads=" << m.heads << " seq=" << m.seq_len << " vocab=" << m.vocab
      << " global_batch=" << m.global_batch << "\n";
  out << "cluster " << c.name << ": " << c.hosts << " hosts x " << c.devices_per_host << " " << c.device.type << " ("
      << fmt("%.3g", device.peak_flops / 1e12) << " " << precision_name(precision.compute) << " TFLOP/s, "
      << fmt("%.0f", c.device.memory_bytes / kGiB)
      << " GiB), intra " << transport_name(c.intra_host.transport) << " "
      << fmt("%.1f", c.intra_host.bandwidth_bytes_per_s / 1e9) << " GB/s, inter "
      << transport_name(c.inter_host.transport) << " " << fmt("%.0f", c.inter_host.bandwidth_bytes_per_s * 8 / 1e9)
      << " Gb/s per host (efficiency " << fmt("%.3f", c.inter_host.efficiency) << ")\n";
  out << "precision " << precision.describe() << ": activations, weights and tp/pp traffic "
      << precision.compute_bytes() << " bytes an element, gradients " << precision.gradient_bytes() << " bytes"
      << (precision.keeps_master_weights() ? ", fp32 master weights" : "") << "\n";
  const std::string note = missing_rates_note(c.device, precision.compute);
  if (!note.empty()) out << "note: " << note << "\n";
}

void print_plan_table(const std::vector<Estimate>& plans, std::ostream& out) {
  char line[512];
  std::snprintf(line, sizeof line, "%-3s %-66s %8s %9s %7s %5s %13s | %8s %8s %8s %8s %8s %8s\n", "#", "layout",
                "step_s", "samples/s", "TFLOP/s", "MFU", "mem GiB", "compute", "tp", "bubble", "pp", "dp", "optim");
  out << line;
  int rank = 1;
  for (const Estimate& e : plans) {
    const auto& t = e.time;
    const std::string memory =
        fmt("%.1f", e.memory.total() / kGiB) + "/" + fmt("%.1f", e.usable_memory_bytes / kGiB);
    std::snprintf(line, sizeof line,
                  "%-3d %-66s %8.3f %9.1f %7.1f %4.0f%% %13s | %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f\n", rank++,
                  e.layout.describe().c_str(), t.step_s, e.samples_per_s, e.model_tflops_per_device, 100 * e.mfu,
                  memory.c_str(), t.compute_s, t.tp_comm_s, t.bubble_s, t.pp_comm_s, t.dp_comm_s, t.optimizer_s);
    out << line;
  }
  out << "(TFLOP/s and MFU count model FLOPs without recomputation; components are seconds per step)\n";
}

void print_plans_json(const ModelSpec& m, const ClusterSpec& c, const SearchResult& r, std::ostream& out) {
  Json plan;
  plan["model"] = m.name;
  plan["cluster"] = c.name;
  plan["devices"] = c.devices();
  plan["precision"] = precision_name(r.precision.compute);
  plan["grad_dtype"] = precision_name(r.precision.gradients);
  const std::string note = missing_rates_note(c.device, r.precision.compute);
  if (!note.empty()) plan["precision_note"] = note;
  plan["valid_layouts"] = r.valid_layouts;
  plan["fitting_layouts"] = r.fitting_layouts;
  plan["search_s"] = r.search_seconds;
  plan["plans"] = Json::array();
  for (const Estimate& e : r.best) plan["plans"].push_back(estimate_json(e));
  if (!r.best.empty()) plan["command"] = train_command_line(m, c, r.best.front()).text();
  if (r.best.size() >= 2) plan["why"] = explain_choice(r.best[0], r.best[1]);
  if (r.best.empty()) plan["fits_nowhere"] = explain_fits_nowhere(m, c, r);
  // Names come from the user's files and flags: ill-formed UTF-8 in them is
  // replaced rather than failing the command.
  out << plan.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
}

void print_plan_schedule(const ModelSpec& m, const ClusterSpec& c, const Estimate& plan, std::ostream& out) {
  const Layout& l = plan.layout;
  const PipelineShape shape = pipeline_shape(l, l.micro_batches(m.global_batch));
  const PipelineSchedule schedule = lower_communication(generate_schedule(shape));
  CostOptions options;
  options.precision = plan.precision;
  const SimulationResult simulated = simulate_schedule(schedule, pipeline_action_costs(m, c, l, options));
  out << "\nschedule of " << l.describe() << ", with the cost model's time for each stage's forward, backward "
      << "and transfer (the pipeline alone: no gradient sync or optimizer)\n"
      << render_schedule_grid(schedule, simulated) << "peak micro-batches in flight per stage:";
  for (int64_t peak : simulated.peak_in_flight) out << " " << peak;
  out << "\n";
}

std::string explain_choice(const Estimate& winner, const Estimate& runner_up) {
  std::ostringstream why;
  const double gain = runner_up.time.step_s - winner.time.step_s;
  if (gain < 0) {
    why << "#1 (" << winner.layout.describe() << ") ranks above #2 (" << runner_up.layout.describe()
        << ") though #2 is predicted " << fmt("%.3f", -gain) << " s per step faster: " << ranking_note({winner, runner_up});
    return why.str() + ".";
  }
  why << "#1 (" << winner.layout.describe() << ") beats #2 (" << runner_up.layout.describe() << ") by "
      << fmt("%.3f", gain) << " s per step (" << fmt("%.1f", 100 * gain / runner_up.time.step_s) << "%)";
  std::vector<std::pair<double, std::string>> reasons;
  for (const Component& c : kComponents) {
    const double a = winner.time.*c.field, b = runner_up.time.*c.field;
    if (std::abs(b - a) < 0.005 * winner.time.step_s) continue;
    std::ostringstream r;
    r << (b > a ? "it spends " : "it spends more: ") << fmt("%.3f", std::abs(b - a)) << " s " << (b > a ? "less " : "")
      << "on " << c.name << " (" << fmt("%.3f", a) << " s against " << fmt("%.3f", b) << " s)";
    reasons.emplace_back(b - a, r.str());
  }
  std::sort(reasons.begin(), reasons.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  if (reasons.empty()) why << "; the two differ by less than 0.5% in every component";
  for (const auto& r : reasons) why << "; " << r.second;
  if (winner.memory.total() < runner_up.memory.total())
    why << "; it also needs less memory (" << fmt("%.1f", winner.memory.total() / kGiB) << " GiB against "
        << fmt("%.1f", runner_up.memory.total() / kGiB) << " GiB)";
  return why.str() + ".";
}

std::string explain_fits_nowhere(const ModelSpec& m, const ClusterSpec& c, const SearchResult& r) {
  std::ostringstream why;
  const double usable = c.device.usable_memory();
  why << "model " << m.name << " fits no layout on " << c.devices() << " x " << c.device.type << " ("
      << fmt("%.1f", usable / kGiB) << " GiB usable per device, after " << fmt("%.1f", (c.device.memory_bytes - usable) / kGiB)
      << " GiB reserved).";
  if (!r.least_memory) return why.str() + " No valid layout exists for these sizes (check heads, layers, global_batch).";
  const Estimate& least = *r.least_memory;
  const MemoryBreakdown& mem = least.memory;
  why << " The least memory per device any layout reaches is " << fmt("%.1f", mem.total() / kGiB) << " GiB ("
      << least.layout.describe() << "): model states " << fmt("%.1f", mem.model_states / kGiB) << " GiB, activations "
      << fmt("%.1f", mem.activations / kGiB) << " GiB, logits " << fmt("%.1f", mem.logits / kGiB) << " GiB.";
  // More devices shard the model states further: find the host count that fits.
  for (int factor = 2; factor <= 64; factor *= 2) {
    SearchOptions memory_only;
    memory_only.max_micro_batch = 1;
    double best = 1e300;
    for (const Layout& l : enumerate_layouts(m, c.devices() * factor, memory_only))
      best = std::min(best, memory_per_device(m, l, r.precision).total());
    if (best <= usable) {
      why << " It would fit on " << c.hosts * factor << " hosts (" << fmt("%.1f", best / kGiB) << " GiB per device).";
      break;
    }
  }
  why << " Devices with at least " << fmt("%.0f", (mem.total() + (c.device.memory_bytes - usable)) / kGiB)
      << " GiB would hold it as is.";
  if (mem.activations + mem.logits > mem.model_states)
    why << " Activations dominate: a shorter sequence (seq_len) or a smaller global batch over more dp ranks helps most.";
  return why.str();
}

void print_baseline_comparison(const ModelSpec& m, const ClusterSpec& cluster, const RunPrecision& precision,
                               std::ostream& out) {
  struct Candidate {
    const char* name;
    std::string layout;
    bool deepspeed = false;  // ZeroEngine::deepspeed: how DeepSpeed's ZeRO-3 is known to behave
  };
  const Candidate candidates[] = {
      {"giant (searched)", "", false},
      {"megatron tp=4 pp=4", "tp=4,pp=4,zero=0,schedule=1f1b,recompute=full,sp=0,placement=tp<dp<pp", false},
      {"giant zero-3 data parallel", "tp=1,pp=1,zero=3,recompute=full", false},
      {"deepspeed zero-3 data parallel", "tp=1,pp=1,zero=3,recompute=full", true},
  };
  double chosen[2] = {0, 0};
  int index = 0;
  for (Transport transport : {Transport::rdma, Transport::tcp}) {
    const ClusterSpec c = with_transport(cluster, transport).resolved();
    out << "\n== " << c.name << ": inter-host " << transport_name(transport) << " "
        << fmt("%.0f", c.inter_host.bandwidth_bytes_per_s * 8 / 1e9) << " Gb/s per host ==\n";
    std::vector<Estimate> rows;
    std::vector<std::string> names;
    for (const Candidate& candidate : candidates) {
      SearchOptions o;
      o.top = 1;
      o.precision = precision;
      o.engine.deepspeed = candidate.deepspeed;
      o.train_runs_only = candidate.layout.empty();  // a baseline is costed as its system runs it
      if (!candidate.layout.empty()) o.filter = parse_layout_filter(candidate.layout);
      SearchResult r = search_layouts(m, c, o);
      if (r.best.empty()) {
        out << candidate.name << ": does not fit";
        if (r.least_memory)
          out << " (needs " << fmt("%.1f", r.least_memory->memory.total() / kGiB) << " GiB per device at best, "
              << fmt("%.1f", c.device.usable_memory() / kGiB) << " GiB usable)";
        out << "\n";
        continue;
      }
      rows.push_back(r.best.front());
      names.push_back(candidate.name);
    }
    print_plan_table(rows, out);
    for (size_t i = 0; i < rows.size(); ++i) out << "  #" << i + 1 << " = " << names[i] << "\n";
    if (!rows.empty() && names[0] == candidates[0].name) {
      chosen[index] = rows[0].time.step_s;
      for (size_t i = 1; i < rows.size(); ++i) {
        out << "  giant is " << fmt("%.2f", rows[i].time.step_s / rows[0].time.step_s) << "x faster than " << names[i]
            << "; " << explain_choice(rows[0], rows[i]) << "\n";
      }
    }
    ++index;
  }
  if (chosen[0] > 0 && chosen[1] > 0)
    out << "\nchosen plan: RDMA -> TCP throughput loss " << fmt("%.1f", 100 * (1 - chosen[0] / chosen[1])) << "%\n";
}

}  // namespace giant::planner
