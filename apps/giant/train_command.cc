// giant train [CONFIG.toml] [--set key=value ...]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include "cli_support.h"
#include "commands.h"
#include "stop_signals.h"
#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/communicator.h"
#include "giant/launch/rank_process.h"
#include "giant/train/auto_layout.h"
#include "giant/train/config_reference.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/precision_choice.h"
#include "giant/train/run_config.h"
#include "giant/train/run_device.h"
#include "giant/train/trainer.h"

namespace giant::app {
namespace {

// The start-up dump: the keys not at their default, each with its source
// (config.toml in the out dir holds every key).
void print_changed_keys(const Tunables& keys, const std::string& out_dir) {
  const std::string saved = (std::filesystem::path(out_dir) / "config.toml").string();
  const std::string changed = keys.describe_changed();
  if (changed.empty()) {
    std::cout << "giant train: effective config: every key at its default (all keys in " << saved << ")\n";
    return;
  }
  std::cout << "giant train: effective config, keys not at their default (value, source; all keys in " << saved
            << "):\n";
  std::istringstream described(changed);
  for (std::string line; std::getline(described, line);) std::cout << "  " << line << '\n';
}

// What is chosen from the measured rates, the same on every rank since the
// rates are: train.precision = auto, then parallel.auto (the planner
// predicts in the run's precision), and the layout checked against the
// world. An exit status when the config cannot run (every rank fails alike).
std::optional<int> resolve_measured_choices(train::RunConfig& config, const train::MatrixRates& rates,
                                            const ccl::BootstrapInfo& launch, ccl::Communicator* world) {
  try {
    const std::string precision = train::resolve_precision(config, rates);
    const bool leader_informs = launch.rank == 0 && log_enabled(LogLevel::info);
    if (leader_informs) std::cout << "giant train: " << precision << '\n';
    if (config.parallel.automatic) {
      const std::string chosen = config.parallel.cluster.empty() ? train::measure_and_choose_layout(config, world)
                                                                 : train::choose_layout(config, launch.world_size);
      std::istringstream lines(chosen);
      for (std::string line; leader_informs && std::getline(lines, line);) std::cout << "giant train: " << line << '\n';
    } else if (!config.parallel.cluster.empty()) {
      train::read_cluster_file(config, launch.world_size);
    }
    train::check_layout(config, launch.world_size);
  } catch (const std::exception& e) {
    report_failure("giant train", e);
    return kExitBadInput;
  }
  return std::nullopt;
}

// The end of a run a signal stopped: where it can resume from, and the
// shell's status for that signal (130 for SIGINT, 143 for SIGTERM).
int report_stop(const train::TrainSummary& s, const train::RunConfig& config, int rank) {
  if (rank == 0) {
    std::printf("\ngiant train: stopped by %s after step %lld of %lld; checkpoint saved in %s; the same "
                "command resumes it; metrics in %s/metrics.jsonl\n",
                launch::signal_name(s.stop_signal).c_str(), static_cast<long long>(s.last_step),
                static_cast<long long>(config.train.steps), config.checkpoint.dir.c_str(),
                config.train.out_dir.c_str());
    std::fflush(stdout);
  }
  return 128 + s.stop_signal;
}

// The end of a finished run (rank 0): its figures and the sample.
void report_done(const train::TrainSummary& s, const train::RunConfig& config) {
  std::printf("\ngiant train: done: %lld steps in %.1f s, final val loss %.4f nats/token, median %.0f "
              "tokens/s, MFU %.1f%%, %lld skipped steps; metrics in %s/metrics.jsonl\n",
              static_cast<long long>(s.steps), s.seconds, s.val_loss, s.tokens_per_s_median,
              100.0 * s.mfu_median, static_cast<long long>(s.skipped_steps), config.train.out_dir.c_str());
  if (!s.sample.empty()) std::printf("\n--- sample ---\n%s\n--------------\n", s.sample.c_str());
  std::fflush(stdout);
}

// Connects the ranks, measures the matrix rates, settles what they decide
// and trains: the exit status of the run.
int train_on_ranks(train::RunConfig& config, const std::string& config_toml, const Tunables& keys,
                   const ccl::Environment& env, const ccl::BootstrapInfo& launch) {
  try {
    std::shared_ptr<ccl::Communicator> world;
    ccl::Bootstrap bootstrap;
    if (launch.world_size > 1) {
      bootstrap = ccl::bootstrap_from_environment(env, keys);
      world = bootstrap.world;
    }
    const train::MatrixRates rates = train::measure_matrix_rates(
        train::precisions_to_measure(config.train), static_cast<int>(config.train.threads), world.get(),
        train::reference_products_on(train::run_device(config.train)));
    if (const auto code = resolve_measured_choices(config, rates, launch, world.get())) return *code;
    train::TrainHooks hooks;
    hooks.stop_signal = &StopSignals::received;
    train::Trainer trainer(config, config_toml, std::cout, isatty(STDOUT_FILENO) != 0, hooks, world, rates);
    const train::TrainSummary s = trainer.run();
    if (s.stop_signal != 0) return report_stop(s, config, launch.rank);
    if (launch.rank == 0 && log_enabled(LogLevel::info)) report_done(s, config);
    return kExitOk;
  } catch (const c10::Error& e) {
    return report_failure("giant train", Error(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return report_failure("giant train", e);  // a ConfigError found only now (the data) is still bad input
  }
}

}  // namespace

int train_command(const std::vector<std::string>& args) {
  CLI::App cli("Train a GPT. Keys: built-in defaults < CONFIG.toml < GIANT_<KEY> environment < --set.",
               "giant train");
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false, print_reference = false;
  GlobalFlags global;
  cli.add_option("config", config_path, "TOML file of model.*, parallel.*, train.*, data.* keys");
  cli.add_option("--set", overrides, "key=value, the value read as TOML (repeatable)")->take_all();
  cli.add_flag("--print-config", print_config, "print every key with its value and source, then exit");
  cli.add_flag("--print-config-reference", print_reference,
               "print the reference of every key (docs/config.md, in Markdown), then exit");
  add_global_flags(cli, global);
  cli.footer("SIGINT or SIGTERM stops the run after the step in flight, with a checkpoint saved there (the same "
             "command resumes it); a second one ends it at once.\n"
             "Exit status: 0 done, 1 failed, 2 bad flags, config or environment, 130 or 143 stopped by SIGINT or "
             "SIGTERM.");
  if (const auto code = parse_command_line(cli, args)) return *code;

  // One registry for the run's keys and ccl's (ccl.* may be set the same ways).
  Tunables keys;
  std::string config_toml;
  train::RunConfig config;
  const ccl::Environment env = ccl::Environment::from_process();
  ccl::BootstrapInfo launch;
  std::string device_line;  // what train.device = auto chose, when a GPU
  try {
    apply_global_flags(global);
    if (print_reference) {
      std::cout << train::config_reference();
      return kExitOk;
    }
    train::define_train_keys(keys);
    if (!config_path.empty()) train::apply_config_file(keys, config_path);
    keys.apply_environment(env.vars());
    for (const auto& assignment : overrides) train::apply_override(keys, assignment);
    if (print_config) {
      std::cout << keys.describe();
      return kExitOk;
    }
    config = train::run_config_from(keys);
    config_toml = train::run_config_toml(keys);
    // Rank and world size from giant launch, torchrun, srun or mpirun,
    // checked against the layout before any rank connects or works.
    launch = ccl::resolve_bootstrap(env);
    device_line = train::resolve_device(config.train, launch.local_rank);
    train::check_precision_runs(config.train);
    if (!config.parallel.automatic) train::check_layout(config, launch.world_size);
  } catch (const std::exception& e) {
    // Nothing has run yet: whatever went wrong is in the input.
    report_failure("giant train", e);
    return kExitBadInput;
  }

  if (launch.rank == 0 && log_enabled(LogLevel::info)) {
    print_changed_keys(keys, config.train.out_dir);
    if (!device_line.empty()) std::cout << "giant train: " << device_line << '\n';
    if (launch.world_size > 1) {
      std::cout << "giant train: " << launch.world_size << " ranks started by " << launch.source << '\n';
    }
  }
  const StopSignals stop_signals;  // from here on a signal stops the run after its step
  return train_on_ranks(config, config_toml, keys, env, launch);
}

#ifndef GIANT_WITH_PLANNER
int plan_command(const std::vector<std::string>&) {
  std::cerr << "giant plan: this build has no planner\n";
  return kExitFailed;
}
#endif

}  // namespace giant::app
