#include "giant/train/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/shell.h"

namespace giant::train {
namespace {

constexpr const char* kKey = "train.fault";

[[noreturn]] void refuse(const std::string& text, const std::string& why) {
  throw ConfigError(kKey, why + " in '" + text + "' (expected " + fault_syntax() + ")");
}

int64_t whole_number(const std::string& text, const std::string& field, const std::string& value, int64_t least) {
  int64_t n = 0;
  const char* end = value.data() + value.size();
  auto [parsed_to, err] = std::from_chars(value.data(), end, n);
  if (value.empty() || err != std::errc() || parsed_to != end || n < least) {
    refuse(text, field + " must be a whole number of at least " + std::to_string(least) + ", got '" + value + "'");
  }
  return n;
}

FaultPhase parse_phase(const std::string& text, const std::string& word) {
  for (FaultPhase p : {FaultPhase::forward, FaultPhase::backward, FaultPhase::optimizer, FaultPhase::checkpoint,
                       FaultPhase::evaluation}) {
    if (word == phase_name(p)) return p;
  }
  refuse(text, "unknown phase '" + word + "' (forward, backward, optimizer, checkpoint or evaluation)");
}

FaultAction parse_action(const std::string& text, const std::string& word) {
  if (word == "kill") return FaultAction::kill;
  if (word == "stop") return FaultAction::stop;
  if (word == "exit") return FaultAction::exit;
  if (word == "hang") return FaultAction::hang;
  if (word == "link_down") return FaultAction::link_down;
  refuse(text, "unknown action '" + word + "' (kill, stop, exit, hang or link_down)");
}

// Sets the emulated host's link (veth0 in the rank's network namespace)
// down, and has a process of its own set it up again after `seconds`, so
// that a restart finds it back even when this rank is gone by then.
void take_link_down(int64_t seconds) {
  const ShellResult down = run_shell(
      "ip link set dev veth0 down && setsid -f sh -c 'sleep " + std::to_string(seconds) +
      "; ip link set dev veth0 up' > /dev/null 2>&1 < /dev/null");
  if (down.status != 0) {
    std::cerr << "giant train: train.fault: action=link_down needs an emulated host (giant launch --emulate, "
                 "as root): "
              << down.output << std::endl;
    std::_Exit(1);
  }
}

}  // namespace

const char* phase_name(FaultPhase phase) {
  switch (phase) {
    case FaultPhase::forward: return "forward";
    case FaultPhase::backward: return "backward";
    case FaultPhase::optimizer: return "optimizer";
    case FaultPhase::checkpoint: return "checkpoint";
    case FaultPhase::evaluation: return "evaluation";
  }
  return "unknown";
}

const char* fault_syntax() {
  return "PHASE@STEP[,rank=R][,action=kill|stop|exit|hang|link_down][,for=S][,restart=K]";
}

std::optional<FaultSpec> parse_fault(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  const size_t at = parts[0].find('@');
  if (at == std::string::npos) refuse(text, "no '@STEP' after the phase");
  FaultSpec spec;
  spec.phase = parse_phase(text, parts[0].substr(0, at));
  spec.step = whole_number(text, "STEP", parts[0].substr(at + 1), 1);
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    const std::string name = parts[i].substr(0, eq), value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (name == "rank") spec.rank = static_cast<int>(whole_number(text, "rank", value, 0));
    else if (name == "restart") spec.restart = whole_number(text, "restart", value, 0);
    else if (name == "action") spec.action = parse_action(text, value);
    else if (name == "for") spec.seconds = whole_number(text, "for", value, 1);
    else refuse(text, "unknown field '" + parts[i] + "'");
  }
  return spec;
}

FaultInjector::FaultInjector(const std::optional<FaultSpec>& spec, int rank, int64_t restart)
    : armed_(spec && spec->rank == rank && spec->restart == restart), spec_(spec.value_or(FaultSpec{})) {}

void FaultInjector::fire() const {
  static const char* const kHow[] = {"SIGKILL", "SIGSTOP", "exit status 1", "a hang", "its host's link down"};
  std::cerr << "giant train: train.fault: " << kHow[static_cast<int>(spec_.action)] << " at the "
            << phase_name(spec_.phase) << " of step " << spec_.step << " on rank " << spec_.rank << std::endl;
  switch (spec_.action) {
    case FaultAction::kill: ::kill(::getpid(), SIGKILL); break;
    case FaultAction::stop: ::kill(::getpid(), SIGSTOP); break;
    case FaultAction::exit: std::_Exit(1);
    case FaultAction::hang:
      // The training thread waits forever while the process lives on (its
      // engines answer their peers): only the hang watchdog ends it.
      for (;;) ::pause();
    case FaultAction::link_down: take_link_down(spec_.seconds); break;
  }
}

}  // namespace giant::train
