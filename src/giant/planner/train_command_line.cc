#include "giant/planner/train_command_line.h"

#include "giant/base/error.h"
#include "giant/base/precision.h"

namespace giant::planner {

std::string TrainCommandLine::text() const {
  std::string line = launcher.empty() ? "giant train" : launcher + " giant train";
  for (const std::string& setting : settings) line += " --set " + setting;
  return line;
}

TrainCommandLine train_command_line(const ModelSpec& m, const ClusterSpec& c, const Estimate& plan) {
  const Layout& l = plan.layout;
  const std::string unsupported = why_train_cannot_run(l);
  GIANT_CHECK(unsupported.empty(), "no giant train command runs ", l.describe(), ": ", unsupported);
  TrainCommandLine command;
  if (c.hosts > 1) {
    command.launcher = "srun -N " + std::to_string(c.hosts) + " --ntasks-per-node " +
                       std::to_string(c.devices_per_host);
  } else if (c.devices() > 1) {
    command.launcher = "giant launch --nproc " + std::to_string(c.devices()) + " --";
  }
  auto set = [&](const std::string& key, const std::string& value) { command.settings.push_back(key + "=" + value); };
  auto set_int = [&](const std::string& key, int64_t value) { set(key, std::to_string(value)); };
  set_int("model.layers", m.layers);
  set_int("model.hidden", m.hidden);
  set_int("model.heads", m.heads);
  if (m.ffn > 0) set_int("model.ffn", m.ffn);
  set_int("model.seq_len", m.seq_len);
  set_int("model.vocab", m.vocab);
  set_int("train.global_batch", m.global_batch);
  set_int("parallel.dp", l.dp);
  set_int("parallel.tp", l.tp);
  set_int("parallel.pp", l.pp);
  if (l.pp > 1) set("parallel.schedule", schedule_name(l.schedule));
  if (l.schedule == Schedule::interleaved) set_int("parallel.virtual_stages", l.virtual_stages);
  set_int("parallel.zero", l.zero);
  set_int("train.micro_batch", l.micro_batch);
  set("train.recompute", recompute_name(l.recompute));
  if (l.grad_wire != ccl::GradWire::none) set("parallel.grad_wire", ccl::grad_wire_name(l.grad_wire));
  set("train.precision", precision_name(plan.precision.compute));
  set("train.grad_dtype", precision_name(plan.precision.gradients));
  return command;
}

}  // namespace giant::planner
