#include "giant/planner/eval_runs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <tuple>

#include "giant/base/error.h"
#include "giant/planner/model_layout.h"
#include "giant/planner/search.h"

namespace giant::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// What published_run reads of each row.
constexpr const char* kColumns[] = {
    "source", "params_b", "hidden", "heads", "layers", "seq", "vocab", "global_batch", "micro_batch",
    "gpus", "gpus_per_node", "gpu", "gpu_mem_gb", "intra_GBps", "inter_Gbps_per_node", "rdma",
    "tp", "pp", "dp", "zero", "recompute", "iter_s", "tflops_per_gpu"};

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// A cell as CSV writes it: quoted when it holds a comma, a quote or a line break.
std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// Peak 16-bit FLOP/s and memory bandwidth from the vendors' data sheets.
DeviceSpec device_from_datasheet(const std::string& gpu, double memory_gb, const std::string& where) {
  DeviceSpec d;
  d.type = gpu;
  d.memory_bytes = memory_gb * kGiB;
  if (gpu == "A100") {
    d.peak_flops = 312e12;
    d.memory_bandwidth_bytes_per_s = memory_gb > 40 ? 2039e9 : 1555e9;
  } else if (gpu == "V100") {
    d.peak_flops = 125e12;
    d.memory_bandwidth_bytes_per_s = 900e9;
  } else if (gpu == "T4") {
    d.peak_flops = 65e12;
    d.memory_bandwidth_bytes_per_s = 320e9;
  } else {
    throw ConfigError(where + " gpu", "unknown GPU '" + gpu + "' (known: A100, V100, T4)");
  }
  return d;
}

const EfficiencyConstants& constants_for(const std::string& type, const ConstantsByType& constants,
                                         const EfficiencyConstants& fallback) {
  auto it = constants.find(type);
  if (it != constants.end()) return it->second;
  it = constants.find("*");
  return it != constants.end() ? it->second : fallback;
}

ClusterSpec with_constants(const ClusterSpec& cluster, const ConstantsByType& constants) {
  ClusterSpec c = cluster;
  const EfficiencyConstants defaults = default_efficiency_constants(c.device.type);
  const EfficiencyConstants& k = constants_for(c.device.type, constants, defaults);
  c.device.gemm_efficiency = k.gemm_efficiency;
  c.device.gemm_half_dim = k.gemm_half_dim;
  return c.resolved();
}

void attach_error(const PublishedRun& run, RunPrediction& p) {
  if (run.iter_s) p.relative_error = std::abs(p.iter_s - *run.iter_s) / *run.iter_s;
  else if (run.tflops_per_gpu) p.relative_error = std::abs(p.tflops_per_gpu - *run.tflops_per_gpu) / *run.tflops_per_gpu;
}

// Why no layout with the row's published parts can run its model: the
// reason of the published layout itself when it has one, else the rules.
std::string why_no_layout(const ModelSpec& model, const LayoutFilter& published, int devices) {
  Layout layout;
  layout.tp = published.tp.value_or(1), layout.pp = published.pp.value_or(1), layout.dp = published.dp.value_or(1);
  layout.micro_batch = published.micro_batch.value_or(1);
  layout.zero = published.zero.value_or(0);
  layout.sequence_parallel = published.sequence_parallel.value_or(false);
  const std::string why = why_invalid(layout, model, devices);
  return "no valid layout with tp=" + std::to_string(layout.tp) + " pp=" + std::to_string(layout.pp) +
         " dp=" + std::to_string(layout.dp) + ": " +
         (why.empty() ? "tp must divide heads and ffn, pp x v the layers, dp x mb the global batch" : why);
}

RunPrediction prediction_from(const PublishedRun& run, const Estimate& e) {
  RunPrediction p;
  p.estimate = e;
  p.iter_s = e.time.step_s;
  p.tflops_per_gpu = model_flops_per_iteration(run.model, true) / p.iter_s / e.layout.devices() / 1e12;
  p.memory_fits = e.fits;
  attach_error(run, p);
  return p;
}

}  // namespace

RunsTable parse_runs_csv(const std::string& text, const std::string& source) {
  RunsTable t;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (t.header.empty()) t.comments.push_back(line);
      continue;
    }
    if (t.header.empty()) t.header = split_csv_line(line);
    else t.rows.push_back(split_csv_line(line));
  }
  if (t.header.empty()) throw ConfigError(source, "has no header line");
  for (const char* column : kColumns)
    if (std::find(t.header.begin(), t.header.end(), column) == t.header.end())
      throw ConfigError(source, std::string("has no column '") + column + "' in its header");
  return t;
}

RunsTable load_runs_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path, "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_runs_csv(text.str(), path);
}

namespace {

// The cells of one row by column name, each error naming the row and cell.
class RowReader {
 public:
  RowReader(const RunsTable& t, size_t r) : table_(t), cells_(t.rows[r]), where_("row " + std::to_string(r + 1)) {
    if (cells_.size() != t.header.size())
      throw ConfigError(where_, "has " + std::to_string(cells_.size()) + " cells, the header " +
                                    std::to_string(t.header.size()));
  }
  const std::string& where() const { return where_; }
  const std::string& cell(const std::string& column) const {
    auto it = std::find(table_.header.begin(), table_.header.end(), column);
    if (it == table_.header.end()) throw ConfigError(column, "column missing from the csv header");
    return cells_[static_cast<size_t>(it - table_.header.begin())];
  }
  std::optional<double> number(const std::string& column) const {
    const std::string& text = cell(column);
    if (text.empty()) return std::nullopt;
    try {
      size_t used = 0;
      const double v = std::stod(text, &used);
      if (used == text.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
    throw ConfigError(where_ + " " + column, "expected a number, got '" + text + "'");
  }
  double required(const std::string& column) const {
    auto v = number(column);
    if (!v) throw ConfigError(where_ + " " + column, "must not be empty");
    return *v;
  }
  // A whole number of at least `least`, or nothing when the cell is empty.
  std::optional<int64_t> whole(const std::string& column, int64_t least) const {
    const auto v = number(column);
    if (!v) return std::nullopt;
    if (*v != std::floor(*v) || *v < static_cast<double>(least) || *v > 1e15)
      throw ConfigError(where_ + " " + column, "expected a whole number of at least " + std::to_string(least) +
                                                   ", got '" + cell(column) + "'");
    return static_cast<int64_t>(*v);
  }
  int64_t count(const std::string& column) const {
    const auto v = whole(column, 1);
    if (!v) throw ConfigError(where_ + " " + column, "must not be empty");
    return *v;
  }

 private:
  const RunsTable& table_;
  const std::vector<std::string>& cells_;
  std::string where_;
};

ClusterSpec published_cluster(const RowReader& row) {
  const int64_t gpus = row.count("gpus"), per_node = row.count("gpus_per_node");
  ClusterSpec c;
  c.name = row.where();
  c.devices_per_host = static_cast<int>(std::min(gpus, per_node));
  c.hosts = static_cast<int>((gpus + per_node - 1) / per_node);
  c.device = device_from_datasheet(row.cell("gpu"), row.required("gpu_mem_gb"), row.where());
  // No NVLink figure means PCIe 3.0 x16, 15.75 GB/s per direction.
  const auto intra = row.number("intra_GBps");
  c.intra_host = {intra ? Transport::nvlink : Transport::pcie, (intra ? *intra : 15.75) * 1e9, intra ? 3e-6 : 10e-6, 0};
  const bool rdma = row.cell("rdma") == "yes";
  const auto inter = row.number("inter_Gbps_per_node");
  c.inter_host = {rdma ? Transport::rdma : Transport::tcp, (inter ? *inter : 0) / 8 * 1e9, rdma ? 5e-6 : 30e-6, 0};
  return c;
}

LayoutFilter published_layout(const RowReader& row) {
  LayoutFilter l;
  l.tp = static_cast<int>(row.count("tp"));
  l.pp = static_cast<int>(row.count("pp"));
  l.dp = static_cast<int>(row.count("dp"));
  l.zero = static_cast<int>(row.whole("zero", 0).value_or(0));
  if (auto mb = row.whole("micro_batch", 1)) l.micro_batch = static_cast<int>(*mb);
  l.order = std::array<Axis, 3>{Axis::tp, Axis::dp, Axis::pp};  // Megatron's placement
  const std::string& recompute = row.cell("recompute");
  if (recompute == "full" || recompute == "none" || recompute == "selective") {
    l.recompute = parse_recompute(recompute);
    l.sequence_parallel = false;
  } else if (recompute == "selective+sp" || recompute == "full+sp") {
    l.recompute = parse_recompute(recompute.substr(0, recompute.find('+')));
    l.sequence_parallel = true;
  } else {
    throw ConfigError(row.where() + " recompute", "expected none, selective, full (+sp), got '" + recompute + "'");
  }
  return l;
}

}  // namespace

PublishedRun published_run(const RunsTable& t, size_t r) {
  const RowReader row(t, r);
  PublishedRun run;
  run.row = r + 1;
  run.source = row.cell("source");
  run.model.name = run.source + "/" + row.cell("params_b") + "B";
  run.model.hidden = row.count("hidden");
  run.model.heads = row.count("heads");
  run.model.layers = row.count("layers");
  run.model.seq_len = row.count("seq");
  run.model.vocab = row.count("vocab");
  run.model.global_batch = row.count("global_batch");
  try {
    run.model.validate();
  } catch (const ConfigError& e) {
    throw ConfigError(row.where(), e.what());
  }
  run.cluster = published_cluster(row);
  run.layout = published_layout(row);
  run.full_recompute = *run.layout.recompute == Recompute::full;
  run.engine.pipeline_sends_split_over_tp = true;  // published rows ran Megatron's pipelines unless marked giant
  if (std::find(t.header.begin(), t.header.end(), "engine") != t.header.end()) {
    const std::string& engine = row.cell("engine");
    if (engine != "" && engine != "giant" && engine != "deepspeed")
      throw ConfigError(row.where() + " engine", "expected deepspeed, giant or empty, got '" + engine + "'");
    run.engine.deepspeed = engine == "deepspeed";
    run.engine.pipeline_sends_split_over_tp = engine != "giant";  // Megatron's and DeepSpeed's pipelines
  }
  run.iter_s = row.number("iter_s");
  run.tflops_per_gpu = row.number("tflops_per_gpu");
  const int64_t gpus = row.count("gpus"), product = int64_t{*run.layout.tp} * *run.layout.pp * *run.layout.dp;
  if (product != gpus)
    throw ConfigError(row.where(), "tp x pp x dp = " + std::to_string(product) + " but gpus = " + std::to_string(gpus));
  return run;
}

std::vector<PublishedRun> published_runs(const RunsTable& t) {
  std::vector<PublishedRun> runs;
  for (size_t r = 0; r < t.rows.size(); ++r) runs.push_back(published_run(t, r));
  return runs;
}

RunPrediction predict_run(const PublishedRun& run, const ConstantsByType& constants) {
  ClusterSpec cluster = with_constants(run.cluster, constants);
  SearchOptions options;
  options.filter = run.layout;
  options.train_runs_only = false;  // the published system's layout, sequence parallelism and all
  options.top = 1;
  options.simulate_best = 8;
  options.engine = run.engine;
  SearchResult result = search_layouts(run.model, cluster, options);
  if (!result.best.empty()) return prediction_from(run, result.best.front());
  // Fits nowhere by the memory model: rank as if memory were unlimited, say so.
  ClusterSpec unlimited = cluster;
  unlimited.device.memory_bytes = 1e18;
  result = search_layouts(run.model, unlimited, options);
  if (result.best.empty())
    throw ConfigError("row " + std::to_string(run.row), why_no_layout(run.model, run.layout, cluster.devices()));
  RunPrediction p = prediction_from(run, result.best.front());
  p.memory_fits = false;
  return p;
}

RunPrediction predict_run_layout(const PublishedRun& run, const Layout& layout, const ConstantsByType& constants) {
  const ClusterSpec cluster = with_constants(run.cluster, constants);
  CostOptions options;
  options.engine = run.engine;
  return prediction_from(run, estimate_layout(run.model, cluster, layout, options));
}

namespace {

// Each run's error under one efficiency and half dimension of its device
// type, which is all a prediction reads of the constants: the fit's scans,
// its per-type and all-type medians and every leave-one-out fold ask for
// the same ones again, and each is a simulation.
class RunErrors {
 public:
  RunErrors(const std::vector<PublishedRun>& runs, const std::vector<Layout>& layouts)
      : runs_(runs), layouts_(layouts) {}

  double of(size_t r, double efficiency, double half_dim) {
    const auto key = std::make_tuple(r, std::llround(efficiency * 1e9), std::llround(half_dim * 1e9));
    const auto found = errors_.find(key);
    if (found != errors_.end()) return found->second;
    const ConstantsByType mine{{runs_[r].cluster.device.type, {efficiency, half_dim}}};
    return errors_[key] = predict_run_layout(runs_[r], layouts_[r], mine).relative_error.value_or(0);
  }

 private:
  const std::vector<PublishedRun>& runs_;
  const std::vector<Layout>& layouts_;
  std::map<std::tuple<size_t, long long, long long>, double> errors_;
};

// Fits the constants on `rows` with each row's layout held fixed: a shared
// half dimension, an efficiency per device type, and "*" for all types
// together (used for types with no rows).
ConstantsByType fit_constants(const std::vector<PublishedRun>& runs, RunErrors& run_errors,
                              const std::vector<size_t>& rows) {
  std::set<std::string> types;
  for (size_t r : rows) types.insert(runs[r].cluster.device.type);
  types.insert("*");
  auto error_of = [&](const std::string& type, double efficiency, double half_dim) {
    std::vector<double> errors;
    for (size_t r : rows) {
      if (type != "*" && runs[r].cluster.device.type != type) continue;
      errors.push_back(run_errors.of(r, efficiency, half_dim));
    }
    return median(errors);
  };
  // Scanned on a grid of whole hundredths, so that every fit asks for the
  // same efficiencies.
  auto best_efficiency = [&](const std::string& type, double half_dim) {
    int best = 50;
    double best_error = 1e300;
    auto scan = [&](int from, int to, int step) {
      for (int e = from; e <= to; e += step) {
        const double err = error_of(type, e / 100.0, half_dim);
        if (err < best_error) best_error = err, best = e;
      }
    };
    scan(30, 100, 5);
    const int coarse = best;
    scan(std::max(30, coarse - 5), std::min(100, coarse + 5), 1);
    return best / 100.0;
  };
  ConstantsByType best_fit;
  double best_score = 1e300;
  for (double half_dim : {8.0, 16.0, 32.0, 48.0, 64.0, 96.0, 128.0}) {
    ConstantsByType fit;
    for (const std::string& type : types) fit[type] = {best_efficiency(type, half_dim), half_dim};
    std::vector<double> errors;
    for (size_t r : rows) errors.push_back(run_errors.of(r, fit.at(runs[r].cluster.device.type).gemm_efficiency, half_dim));
    const double score = median(errors);
    if (score < best_score) best_score = score, best_fit = fit;
  }
  return best_fit;
}

}  // namespace

ErrorReport fit_and_cross_validate(const std::vector<PublishedRun>& runs) {
  ErrorReport report;
  // Layouts (micro-batch, schedule where unpublished) chosen under the
  // built-in constants, then held fixed while fitting.
  std::vector<Layout> layouts;
  std::vector<size_t> all;
  for (size_t r = 0; r < runs.size(); ++r) {
    layouts.push_back(predict_run(runs[r], {}).estimate.layout);
    all.push_back(r);
  }
  RunErrors run_errors(runs, layouts);
  report.fitted = fit_constants(runs, run_errors, all);
  for (size_t r = 0; r < runs.size(); ++r)
    report.in_sample_errors.push_back(predict_run(runs[r], report.fitted).relative_error.value_or(0));
  report.leave_one_out_errors.assign(runs.size(), 0);
  std::set<std::string> sources;
  for (const auto& run : runs) sources.insert(run.source);
  for (const std::string& source : sources) {
    std::vector<size_t> others;
    for (size_t r = 0; r < runs.size(); ++r)
      if (runs[r].source != source) others.push_back(r);
    if (others.empty()) continue;
    ConstantsByType fit = fit_constants(runs, run_errors, others);
    // Device types the other sources never ran use the all-type fit.
    for (auto it = fit.begin(); it != fit.end();) {
      bool seen = it->first == "*";
      for (size_t r : others) seen = seen || runs[r].cluster.device.type == it->first;
      it = seen ? std::next(it) : fit.erase(it);
    }
    report.fitted_without[source] = fit;
    for (size_t r = 0; r < runs.size(); ++r)
      if (runs[r].source == source)
        report.leave_one_out_errors[r] = predict_run(runs[r], fit).relative_error.value_or(0);
  }
  report.in_sample_median = median(report.in_sample_errors);
  report.leave_one_out_median = median(report.leave_one_out_errors);
  return report;
}

void print_error_report(const std::vector<PublishedRun>& runs, const ErrorReport& report, std::ostream& out) {
  auto show = [&](const ConstantsByType& k) {
    std::ostringstream s;
    for (const auto& [type, c] : k) s << " " << type << ":eff=" << c.gemm_efficiency << ",half_dim=" << c.gemm_half_dim;
    return s.str();
  };
  out << "# fitted on all rows:" << show(report.fitted) << "\n";
  for (const auto& [source, k] : report.fitted_without) out << "# fitted without " << source << ":" << show(k) << "\n";
  out << "# row  source                    gpu   tp pp dp   in-sample  leave-source-out\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const auto& l = runs[r].layout;
    out << "# " << std::setw(3) << runs[r].row << "  " << std::left << std::setw(25) << runs[r].source << " " << std::setw(5)
        << runs[r].cluster.device.type << std::right << std::setw(3) << *l.tp << std::setw(3) << *l.pp << std::setw(3)
        << *l.dp << std::fixed << std::setprecision(1) << std::setw(11) << 100 * report.in_sample_errors[r] << "%"
        << std::setw(17) << 100 * report.leave_one_out_errors[r] << "%\n"
        << std::defaultfloat;
  }
  out << std::fixed << std::setprecision(1);
  out << "median_abs_error_in_sample=" << 100 * report.in_sample_median << "%\n";
  out << "median_abs_error_leave_one_source_out=" << 100 * report.leave_one_out_median << "%\n";
  out << std::defaultfloat;
}

std::vector<RowEvaluation> evaluate_rows(const RunsTable& table) {
  std::vector<RowEvaluation> rows(table.rows.size());
  for (size_t r = 0; r < table.rows.size(); ++r) {
    RowEvaluation& row = rows[r];
    try {
      row.run = published_run(table, r);
      row.prediction = predict_run(*row.run, {});
      if (!row.prediction->memory_fits)
        row.note = "no layout fits in device memory by the memory model; predicted as if it were unlimited";
    } catch (const Error& e) {
      row.prediction.reset();
      row.note = e.what();
    }
  }
  return rows;
}

void write_predictions_csv(const RunsTable& t, const std::vector<RowEvaluation>& rows, std::ostream& out) {
  for (const auto& line : t.comments) out << line << "\n";
  out << "# pred_iter_s and pred_tflops_per_gpu: giant plan's prediction for the published layout; "
         "note: why a row has none, or a caveat.\n";
  for (const auto& h : t.header) out << h << ",";
  out << "pred_iter_s,pred_tflops_per_gpu,note\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    // As wide as the header, so the columns stay aligned (the note says
    // when a row had another width).
    for (size_t c = 0; c < t.header.size(); ++c) out << (c < t.rows[r].size() ? t.rows[r][c] : "") << ",";
    if (const auto& p = rows[r].prediction)
      out << std::setprecision(4) << p->iter_s << "," << std::setprecision(4) << p->tflops_per_gpu;
    else
      out << ",";
    out << "," << csv_cell(rows[r].note) << "\n";
  }
}

}  // namespace giant::planner
