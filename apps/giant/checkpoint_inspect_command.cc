// giant checkpoint info DIR and giant checkpoint verify DIR: what a
// checkpoint holds, and whether its files are what its manifest says.
// Neither needs libtorch: they read only the manifest and the files' bytes.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/timer.h"
#include "giant/base/units.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/checkpoint/manifest.h"

namespace giant::app {
namespace {

namespace fs = std::filesystem;
using checkpoint::Manifest;

// The command line both subcommands share: DIR, --json for info.
struct InspectFlags {
  std::string dir;
  bool json = false;
  GlobalFlags global;
};

void add_dir_option(CLI::App& cli, InspectFlags& flags) {
  cli.add_option("DIR", flags.dir,
                 "a checkpoint folder (step_XXXXXXXX) or a checkpoint.dir (its latest checkpoint)")
      ->required()
      ->type_name("");
  add_global_flags(cli, flags.global);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i > 0 ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

int64_t tensor_bytes(const checkpoint::TensorEntry& tensor) {
  int64_t elements = 1;
  for (const int64_t d : tensor.shape) elements *= d;
  return elements * static_cast<int64_t>(checkpoint::dtype_size(tensor.dtype));
}

// Three decimals, or three significant digits below 0.1 (a small test
// checkpoint is not "0.000 GB").
std::string amount(double value) {
  if (value >= 0.1 || value == 0) return fixed(value, 3);
  std::ostringstream text;
  text << std::setprecision(3) << value;
  return text.str();
}

void print_header(std::ostream& out, const fs::path& dir, const Manifest& m) {
  const models::GptConfig& c = m.model;
  out << "checkpoint: " << dir.string() << "\n"
      << "step: " << m.step << "\n"
      << "consumed samples: " << m.consumed_samples << "\n"
      << "model: layers=" << c.layers << " hidden=" << c.hidden << " heads=" << c.heads << " ffn=" << c.ffn_size()
      << " seq_len=" << c.seq_len << " vocab=" << c.vocab << " vocab_pad=" << c.vocab_pad << " dropout=" << c.dropout
      << " init_std=" << c.init_std << " activation=" << models::activation_name(c.activation) << " ("
      << c.parameter_count() << " parameters)\n"
      << "tokenizer: " << m.tokenizer;
  // Where generation reads it: the copies the checkpoint carries, if any.
  for (size_t i = 0; i < m.tokenizer_files.size(); ++i) {
    out << (i == 0 ? " (carried: " : ", ") << m.tokenizer_files[i] << (i + 1 == m.tokenizer_files.size() ? ")" : "");
  }
  out << "\n";
  const checkpoint::SavedLayout& l = m.layout;
  out << "saved layout: dp=" << l.dp << " tp=" << l.tp << " pp=" << l.pp << " virtual_stages=" << l.virtual_stages
      << " zero=" << l.zero << " schedule=" << (l.schedule.empty() ? "-" : l.schedule)
      << " partition=" << (l.partition.empty() ? "-" : l.partition) << " precision=" << l.precision
      << " grad_dtype=" << l.grad_dtype << " world_size=" << l.world_size << "\n";
  const checkpoint::TrainState& t = m.train;
  out << "train state: optimizer_steps=" << t.optimizer_steps << " bad_steps_in_a_row=" << t.bad_steps_in_a_row
      << " skipped_steps=" << t.skipped_steps << " loss_scale_skips=" << t.loss_scale_skips;
  if (t.loss_scaling) {
    out << " loss_scale=" << t.loss_scale << " loss_scale_good_steps=" << t.loss_scale_good_steps
        << " loss_scale_hysteresis_left=" << t.loss_scale_hysteresis_left
        << " loss_scale_overflows=" << t.loss_scale_overflows;
  } else {
    out << " loss_scaling=off";
  }
  out << "\noptimizer state: "
      << (m.has_optimizer_state() ? "yes" : "no (model weights only: training starts a fresh optimizer)") << "\n";
}

void print_tensors(std::ostream& out, const Manifest& m) {
  size_t name_width = 6;
  size_t shape_width = 12;
  for (const auto& t : m.tensors) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, shape_text(t.shape).size());
  }
  out << "\n"
      << std::left << std::setw(static_cast<int>(name_width)) << "tensor" << "  " << std::setw(5) << "dtype" << "  "
      << std::setw(static_cast<int>(shape_width)) << "global shape" << std::right << "  " << std::setw(6)
      << "pieces" << "  " << std::setw(12) << "MB" << "\n";
  int64_t total_bytes = 0;
  size_t total_pieces = 0;
  for (const auto& t : m.tensors) {
    const int64_t bytes = tensor_bytes(t);
    total_bytes += bytes;
    total_pieces += t.pieces.size();
    out << std::left << std::setw(static_cast<int>(name_width)) << t.name << "  " << std::setw(5)
        << checkpoint::dtype_name(t.dtype) << "  " << std::setw(static_cast<int>(shape_width)) << shape_text(t.shape)
        << std::right << "  " << std::setw(6) << t.pieces.size() << "  " << std::setw(12) << fixed(bytes / 1e6, 3)
        << "\n";
  }
  uint64_t file_bytes = 0;
  for (const auto& f : m.files) file_bytes += f.bytes;
  out << std::left << std::setw(static_cast<int>(name_width + 2 + 5 + 2 + shape_width))
      << ("total: " + std::to_string(m.tensors.size()) + " tensors") << std::right << "  " << std::setw(6)
      << total_pieces << "  " << std::setw(12) << fixed(total_bytes / 1e6, 3) << "\n"
      << "files: " << m.files.size() << ", " << fixed(file_bytes / 1e6, 3) << " MB on disk\n";
}

// "1 file", "2 files".
std::string count(size_t n, const std::string& thing) {
  return std::to_string(n) + " " + thing + (n == 1 ? "" : "s");
}

// DIR as a checkpoint folder, or nullopt after saying why it is none (bad
// input: the user named the wrong folder).
std::optional<fs::path> checkpoint_folder(const std::string& command, const std::string& dir) {
  try {
    return checkpoint::resolve_checkpoint(dir);
  } catch (const std::exception& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return std::nullopt;
  }
}

}  // namespace

int checkpoint_info_command(const std::vector<std::string>& args) {
  const std::string command = "giant checkpoint info";
  CLI::App cli("Prints what a checkpoint holds: step, model, saved layout, train state and every tensor.", command);
  InspectFlags flags;
  add_dir_option(cli, flags);
  cli.add_flag("--json", flags.json, "print the manifest as JSON instead");
  cli.footer("Exit status: 0 done, 1 an unreadable or invalid manifest, 2 bad flags or a DIR that is no checkpoint.");
  if (const auto code = parse_command_line(cli, args)) return *code;
  apply_global_flags(flags.global);
  const auto dir = checkpoint_folder(command, flags.dir);
  if (!dir) return kExitBadInput;
  try {
    const Manifest manifest = checkpoint::read_manifest(*dir);
    if (flags.json) {
      std::cout << checkpoint::manifest_to_json(manifest) << "\n";
      return kExitOk;
    }
    print_header(std::cout, *dir, manifest);
    print_tensors(std::cout, manifest);
    return kExitOk;
  } catch (const std::exception& e) {
    return report_failure(command, e);  // an invalid manifest is a runtime failure
  }
}

int checkpoint_verify_command(const std::vector<std::string>& args) {
  const std::string command = "giant checkpoint verify";
  CLI::App cli("Checks every file's size and CRC-32C and every piece of every tensor against the manifest.",
               command);
  InspectFlags flags;
  add_dir_option(cli, flags);
  cli.footer("Exit status: 0 every file and piece as the manifest says, 1 a problem found (or the manifest "
             "unreadable), 2 bad flags or a DIR that is no checkpoint.");
  if (const auto code = parse_command_line(cli, args)) return *code;
  apply_global_flags(flags.global);
  const auto dir = checkpoint_folder(command, flags.dir);
  if (!dir) return kExitBadInput;
  try {
    const Stopwatch clock;
    const Manifest manifest = checkpoint::read_manifest(*dir);
    const std::vector<std::string> problems = checkpoint::verify_checkpoint(*dir, manifest);
    const double seconds = clock.seconds();
    if (!problems.empty()) {
      for (const auto& problem : problems) std::cout << problem << "\n";
      std::cout << "failed: " << count(problems.size(), "problem") << " in " << dir->string() << "\n";
      return kExitFailed;
    }
    double gigabytes = 0;
    for (const auto& f : manifest.files) gigabytes += static_cast<double>(f.bytes) / 1e9;
    std::cout << "ok: " << count(manifest.files.size(), "file") << ", " << count(manifest.tensors.size(), "tensor")
              << ", "
              << amount(gigabytes) << " GB checked in " << fixed(seconds, 3) << " s ("
              << amount(gigabytes / std::max(seconds, 1e-9)) << " GB/s)\n";
    return kExitOk;
  } catch (const std::exception& e) {
    return report_failure(command, e);
  }
}

}  // namespace giant::app
