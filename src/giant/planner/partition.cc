#include "giant/planner/partition.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <regex>
#include <sstream>

#include "giant/base/error.h"

namespace giant::planner {

namespace {

constexpr const char* kMethods = "uniform, parameters, type:REGEX, manual:N0,N1,...";
constexpr const char* kLayersCounted = "(embedding, blocks, final norm and head count as layers)";

// One per-layer quantity a method balances, kept as prefix sums so that a
// stage's total is one subtraction.
class Quantity {
 public:
  explicit Quantity(const std::vector<int64_t>& per_layer) : sums_(per_layer.size() + 1, 0) {
    for (size_t i = 0; i < per_layer.size(); ++i) sums_[i + 1] = sums_[i] + per_layer[i];
  }
  int64_t stage(size_t begin, size_t end) const { return sums_[end] - sums_[begin]; }

 private:
  std::vector<int64_t> sums_;
};

// Sums of squares of stage totals: exact (a stage of 10^12 parameters squares
// to 10^24, far inside 128 bits), so ties are ties and nothing else is.
using Wide = __int128;
constexpr size_t kMaxEvenness = 3;
using Score = std::array<Wide, kMaxEvenness>;  // compared lexicographically

// What a method minimises, in order: first the largest stage of each
// `bottleneck` quantity (each minimum then holds as a cap on every stage
// for what follows), then the sums of squares of the `evenness` quantities
// compared lexicographically (the more even split wins), and last the
// split whose earlier stages take more layers.
struct Objective {
  std::vector<Quantity> bottleneck;
  std::vector<Quantity> evenness;
};

class Balancer {
 public:
  Balancer(size_t layers, size_t stages, Objective objective)
      : layers_(layers), stages_(stages), objective_(std::move(objective)) {
    GIANT_CHECK(objective_.evenness.size() <= kMaxEvenness, "at most ", kMaxEvenness, " evenness quantities");
  }

  StageBounds solve() {
    for (const Quantity& q : objective_.bottleneck) caps_.push_back(min_largest_stage(q));
    return most_even_split();
  }

 private:
  // A stage [begin, end) respects the caps found so far.
  bool allowed(size_t begin, size_t end) const {
    for (size_t i = 0; i < caps_.size(); ++i) {
      if (objective_.bottleneck[i].stage(begin, end) > caps_[i]) return false;
    }
    return true;
  }

  // The smallest largest stage of `q` over every split into allowed,
  // non-empty stages: best[j] is that for layers [0, j) on s stages.
  int64_t min_largest_stage(const Quantity& q) const {
    constexpr int64_t kInfeasible = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> best(layers_ + 1, kInfeasible);
    best[0] = std::numeric_limits<int64_t>::min();
    for (size_t s = 1; s <= stages_; ++s) {
      std::vector<int64_t> next(layers_ + 1, kInfeasible);
      // Stage s ends at j; the stages after it need one layer each.
      for (size_t j = s; j + (stages_ - s) <= layers_; ++j) {
        for (size_t i = s - 1; i < j; ++i) {
          if (best[i] == kInfeasible || !allowed(i, j)) continue;
          next[j] = std::min(next[j], std::max(best[i], q.stage(i, j)));
        }
      }
      best = std::move(next);
    }
    GIANT_CHECK(best[layers_] != kInfeasible, "no split of ", layers_, " layers into ", stages_, " stages");
    return best[layers_];
  }

  Score stage_score(size_t begin, size_t end) const {
    Score score{};
    for (size_t k = 0; k < objective_.evenness.size(); ++k) {
      const Wide total = objective_.evenness[k].stage(begin, end);
      score[k] = total * total;
    }
    return score;
  }

  static Score add(Score a, const Score& b) {
    for (size_t k = 0; k < kMaxEvenness; ++k) a[k] += b[k];
    return a;
  }

  // Suffix scores: best[s][i] is the least score of layers [i, n) on s
  // allowed stages. Then from the front, each stage ends as late as an
  // optimal split allows, so earlier stages take more layers on ties.
  StageBounds most_even_split() const {
    const size_t n = layers_;
    std::vector<std::vector<Score>> best(stages_ + 1, std::vector<Score>(n + 1));
    std::vector<std::vector<char>> feasible(stages_ + 1, std::vector<char>(n + 1, 0));
    feasible[0][n] = 1;
    for (size_t s = 1; s <= stages_; ++s) {
      // The s stages start at i; the stages before it need one layer each.
      for (size_t i = stages_ - s; i + s <= n; ++i) {
        for (size_t j = i + 1; j + (s - 1) <= n; ++j) {
          if (!feasible[s - 1][j] || !allowed(i, j)) continue;
          const Score score = add(stage_score(i, j), best[s - 1][j]);
          if (!feasible[s][i] || score < best[s][i]) best[s][i] = score;
          feasible[s][i] = 1;
        }
      }
    }
    GIANT_CHECK(feasible[stages_][0], "no split of ", n, " layers into ", stages_, " stages");
    StageBounds bounds{0};
    size_t begin = 0;
    for (size_t s = stages_; s >= 1; --s) {
      size_t end = n - (s - 1);
      auto optimal = [&](size_t e) {
        return feasible[s - 1][e] && allowed(begin, e) && add(stage_score(begin, e), best[s - 1][e]) == best[s][begin];
      };
      while (!optimal(end)) {
        --end;
        GIANT_CHECK(end > begin, "stage ", stages_ - s, " has no optimal end");
      }
      bounds.push_back(end);
      begin = end;
    }
    return bounds;
  }

  size_t layers_;
  size_t stages_;
  Objective objective_;
  std::vector<int64_t> caps_;
};

Quantity layer_counts(size_t layers) { return Quantity(std::vector<int64_t>(layers, 1)); }

Quantity parameter_counts(const std::vector<PartitionLayer>& layers) {
  std::vector<int64_t> parameters;
  for (const PartitionLayer& layer : layers) parameters.push_back(layer.parameters);
  return Quantity(parameters);
}

StageBounds uniform_bounds(size_t layers, size_t stages) {
  StageBounds bounds{0};
  for (size_t s = 0; s < stages; ++s) bounds.push_back(bounds.back() + layers / stages + (s < layers % stages));
  return bounds;
}

std::string distinct_types(const std::vector<PartitionLayer>& layers) {
  std::vector<std::string> seen;
  for (const PartitionLayer& layer : layers) {
    if (std::find(seen.begin(), seen.end(), layer.type_name) == seen.end()) seen.push_back(layer.type_name);
  }
  std::string out;
  for (const std::string& type : seen) out += (out.empty() ? "" : ", ") + type;
  return out;
}

StageBounds type_bounds(const std::vector<PartitionLayer>& layers, size_t stages, const std::string& pattern,
                        const std::string& key) {
  if (pattern.empty()) {
    throw ConfigError(key, "type: needs a regular expression of layer type names after the colon, e.g. type:GptBlock");
  }
  std::regex regex;
  try {
    regex = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ConfigError(key, "type:" + pattern + " is not a valid regular expression: " + e.what());
  }
  std::vector<int64_t> matches;
  for (const PartitionLayer& layer : layers) matches.push_back(std::regex_match(layer.type_name, regex) ? 1 : 0);
  if (std::count(matches.begin(), matches.end(), 1) == 0) {
    throw ConfigError(key, "type:" + pattern + " matches no layer's whole type name (the model's layer types: " +
                               distinct_types(layers) + ")");
  }
  const Quantity matching(matches), parameters = parameter_counts(layers), counts = layer_counts(layers.size());
  return Balancer(layers.size(), stages, {{matching, parameters}, {matching, parameters, counts}}).solve();
}

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

StageBounds manual_bounds(size_t layers, size_t stages, const std::string& list, const std::string& key) {
  std::vector<uint64_t> counts;
  std::istringstream tokens(list);
  std::string token;
  // getline drops a trailing empty field; "manual:" and "manual:2," are refused below all the same.
  while (std::getline(tokens, token, ',')) {
    const std::string digits = trimmed(token);
    uint64_t count = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    const bool is_number = !digits.empty() && end == digits.data() + digits.size() &&
                           digits.find_first_not_of("0123456789") == std::string::npos;
    if (!is_number || error == std::errc::invalid_argument || (error == std::errc() && count == 0)) {
      throw ConfigError(key, "manual: takes positive whole layer counts separated by commas, got '" + token +
                                 "' in manual:" + list);
    }
    if (error == std::errc::result_out_of_range || count > layers) {
      throw ConfigError(key, "manual:" + list + " puts " + digits + " layers on one stage but the model has only " +
                                 std::to_string(layers) + " layers " + kLayersCounted);
    }
    counts.push_back(count);
  }
  if (counts.empty() || list.back() == ',') {
    throw ConfigError(key, "manual: takes positive whole layer counts separated by commas, got manual:" + list);
  }
  if (counts.size() != stages) {
    throw ConfigError(key, "manual:" + list + " gives " + std::to_string(counts.size()) + " counts but there are " +
                               std::to_string(stages) + " pipeline stages (parallel.pp): give one count per stage");
  }
  StageBounds bounds{0};
  for (uint64_t count : counts) bounds.push_back(bounds.back() + count);
  if (bounds.back() != layers) {
    throw ConfigError(key, "manual:" + list + " counts sum to " + std::to_string(bounds.back()) +
                               " but the model has " + std::to_string(layers) + " layers " + kLayersCounted);
  }
  return bounds;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

StageBounds partition_layers(const std::vector<PartitionLayer>& layers, int stages, const std::string& method,
                             const std::string& key) {
  GIANT_CHECK(stages >= 1, "a pipeline has at least one stage, got ", stages);
  for (const PartitionLayer& layer : layers) {
    GIANT_CHECK(layer.parameters >= 0, "layer ", layer.type_name, " has ", layer.parameters, " parameters");
  }
  const size_t n = layers.size(), s = static_cast<size_t>(stages);
  if (s > n) {
    throw ConfigError("parallel.pp", std::to_string(stages) + (stages == 1 ? " stage" : " stages") +
                                         " but the model has only " + std::to_string(n) + " layers " +
                                         kLayersCounted);
  }
  if (method == "uniform") return uniform_bounds(n, s);
  if (method == "parameters") {
    const Quantity parameters = parameter_counts(layers);
    return Balancer(n, s, {{parameters}, {parameters, layer_counts(n)}}).solve();
  }
  if (starts_with(method, "type:")) return type_bounds(layers, s, method.substr(5), key);
  if (starts_with(method, "manual:")) return manual_bounds(n, s, method.substr(7), key);
  throw ConfigError(key, "unknown partition method '" + method + "' (valid: " + kMethods + ")");
}

}  // namespace giant::planner
