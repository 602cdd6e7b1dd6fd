// Faults injected on purpose, so that the fault tests hit a phase of a step
// instead of counting on timing: `train.fault` names the phase and step, the
// rank that fails there, how, and in which restart of a `giant launch
// --max-restarts` run (`train.restart`, which the launcher sets). Off (the
// default) a phase costs one branch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace giant::train {

enum class FaultPhase { forward, backward, optimizer, checkpoint, evaluation };
// hang: the training thread waits forever; link_down: the rank's emulated
// host loses its link (veth0) for FaultSpec::seconds, and the rank goes on.
enum class FaultAction { kill, stop, exit, hang, link_down };

// "forward", "backward", ...
const char* phase_name(FaultPhase phase);

struct FaultSpec {
  FaultPhase phase = FaultPhase::forward;
  int64_t step = 1;  // 1-based: the step whose phase fails (a checkpoint's: the steps it holds)
  int rank = 0;      // world rank
  FaultAction action = FaultAction::kill;
  int64_t restart = 0;  // the train.restart it fires in
  int64_t seconds = 10;  // link_down: how long the link stays down
};

// What train.fault takes, for its help and errors.
const char* fault_syntax();
// "PHASE@STEP[,rank=R][,action=kill|stop|exit|hang|link_down][,for=S][,restart=K]"; empty: none.
// Anything else is a ConfigError naming train.fault.
std::optional<FaultSpec> parse_fault(const std::string& text);

class FaultInjector {
 public:
  FaultInjector() = default;  // off
  // Armed when the spec names this rank and this restart.
  FaultInjector(const std::optional<FaultSpec>& spec, int rank, int64_t restart);

  // Called as each phase of step `step` (1-based) begins: fails this process
  // there as the spec says (SIGKILL, SIGSTOP, exit status 1, a training
  // thread that never returns, or its host's link down for a while), after a
  // line on stderr saying so.
  void at(FaultPhase phase, int64_t step) const {
    if (armed_ && phase == spec_.phase && step == spec_.step) fire();
  }

 private:
  void fire() const;
  bool armed_ = false;
  FaultSpec spec_;
};

}  // namespace giant::train
