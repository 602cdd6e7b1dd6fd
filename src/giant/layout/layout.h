// A parallel layout: how many ways each axis splits, the micro-batch, the
// pipeline schedule, ZeRO stage, recomputation, placement (which axis
// varies fastest across device ids, so stays inside a host first) and the
// gradient wire between hosts. The one
// statement of a run's layout: the planner searches over it, the trainer's
// config converts to it (train/memory_check.h), the mesh and the pipeline
// take their shapes from it. No libtorch; base and ccl's wire names only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "giant/ccl/grad_wire.h"

namespace giant {

enum class Schedule { gpipe, one_f_one_b, interleaved };
enum class Recompute { none, selective, full };
enum class Axis { tp, dp, pp };

// ZeRO stages 0 (replicated) to 3: 1 shards the optimizer state, 2 the
// gradients too, 3 the parameters too.
constexpr int kMaxZeroStage = 3;

const char* schedule_name(Schedule schedule);
const char* recompute_name(Recompute recompute);
const char* axis_name(Axis axis);

// How `giant train` places ranks, fastest-varying axis first: its mesh's
// rank = (pp_rank x dp + dp_rank) x tp + tp_rank.
constexpr std::array<Axis, 3> kTrainPlacement = {Axis::tp, Axis::dp, Axis::pp};

struct Layout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int micro_batch = 1;      // sequences per micro-batch per dp rank
  Schedule schedule = Schedule::one_f_one_b;
  int virtual_stages = 1;   // model chunks per device (interleaved only)
  int zero = 0;             // ZeRO stage, 0..kMaxZeroStage
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  std::array<Axis, 3> order = kTrainPlacement;  // fastest first
  // What data-parallel gradients travel in between hosts (ZeRO 0-2).
  ccl::GradWire grad_wire = ccl::GradWire::none;

  int devices() const { return dp * tp * pp; }
  // Micro-batches per step for a global batch of `global_batch` sequences.
  int64_t micro_batches(int64_t global_batch) const { return global_batch / (int64_t{dp} * micro_batch); }
  int size_of(Axis axis) const { return axis == Axis::tp ? tp : axis == Axis::dp ? dp : pp; }
  // Distance between consecutive members of the axis in device ids.
  int stride_of(Axis axis) const;
  std::string placement() const;  // "tp<dp<pp"
  // "tp=4 pp=4 dp=2 mb=1 1f1b zero=0 recompute=full sp placement=tp<dp<pp"
  std::string describe() const;
};

// The one statement of which layouts `giant train` runs (the planner's
// search keeps to them unless asked for other systems' layouts; the
// trainer's view of its own run uses kTrainPlacement): no sequence
// parallelism, and ranks placed as kTrainPlacement (where an axis of size 1
// sits changes nothing). Empty when it runs `layout`, else why not.
std::string why_train_cannot_run(const Layout& layout);

// A partial layout: what `--layout` fixes; the search fills in the rest.
struct LayoutFilter {
  std::optional<int> dp, tp, pp, micro_batch, virtual_stages, zero;
  std::optional<Schedule> schedule;
  std::optional<Recompute> recompute;
  std::optional<bool> sequence_parallel;
  std::optional<std::array<Axis, 3>> order;
  std::optional<ccl::GradWire> grad_wire;

  bool accepts(const Layout& layout) const;
};

// "tp=4,pp=4,dp=2,mb=1,schedule=interleaved,v=2,zero=1,recompute=full,sp=1,
// placement=tp<dp<pp,wire=int8" (any subset, any order; `micro_batch` and
// `virtual_stages` also accepted). Throws ConfigError naming the bad item.
LayoutFilter parse_layout_filter(const std::string& text);
Schedule parse_schedule(const std::string& text);
Recompute parse_recompute(const std::string& text);
std::array<Axis, 3> parse_placement(const std::string& text);

}  // namespace giant
