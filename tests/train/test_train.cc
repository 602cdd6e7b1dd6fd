// The config contract (errors name the key before any work), the trainer on
// tiny models (overfitting, the non-finite guard, its outputs), and the docs
// documenting every key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/utf8.h"
#include "giant/train/metrics_log.h"
#include "giant/train/run_config.h"
#include "giant/train/step_guard.h"
#include "giant/train/trainer.h"
#include "support/rounding.h"
#include "support/tensor_error.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

namespace fs = std::filesystem;

using test::error_key;
using test::keys_with;
using test::read_file;
using test::TempDir;


TEST(RunConfig, DefaultsAreValid) {
  Tunables keys = keys_with({});
  const RunConfig c = run_config_from(keys);
  EXPECT_EQ(c.layout.micro_batches(c.train.global_batch), c.train.global_batch / c.layout.micro_batch);
  EXPECT_EQ(c.data.tokenizer, "byte");
  EXPECT_EQ(c.model.activation, models::Activation::gelu);
  EXPECT_EQ(run_config_from(keys_with({"model.activation=\"gelu_tanh\""})).model.activation,
            models::Activation::gelu_tanh);
  try {
    run_config_from(keys_with({"model.activation=\"gelu_new\""}));
    ADD_FAILURE() << "gelu_new was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gelu or gelu_tanh"), std::string::npos) << e.what();
  }
}

TEST(RunConfig, BadInputNamesTheKey) {
  auto set = [](std::vector<std::string> o) { return [o] { run_config_from(keys_with(o)); }; };
  EXPECT_EQ(error_key(set({"model.nonsense=1"})), "model.nonsense");
  EXPECT_EQ(error_key(set({"model.layers=\"four\""})), "model.layers");
  EXPECT_EQ(error_key(set({"model.layers=4.5"})), "model.layers");
  EXPECT_EQ(error_key(set({"model.layers=four"})), "model.layers");
  EXPECT_EQ(error_key(set({"train.lr=true"})), "train.lr");
  EXPECT_EQ(error_key(set({"train.trace=1"})), "train.trace");
  EXPECT_EQ(error_key(set({"model.heads=3"})), "model.heads");
  EXPECT_EQ(error_key(set({"train.global_batch=10", "train.micro_batch=4"})), "train.global_batch");
  EXPECT_EQ(error_key(set({"train.micro_batch=0"})), "train.micro_batch");
  EXPECT_EQ(error_key(set({"train.retain_memory_mb=-1"})), "train.retain_memory_mb");
  EXPECT_EQ(error_key(set({"train.retain_memory_mb=4096"})), "train.retain_memory_mb");
  EXPECT_EQ(error_key(set({"parallel.schedule=zigzag"})), "parallel.schedule");
  EXPECT_EQ(error_key(set({"parallel.zero=4"})), "parallel.zero");
  EXPECT_EQ(error_key(set({"parallel.zero3_prefetch=-1"})), "parallel.zero3_prefetch");
  EXPECT_EQ(error_key(set({"train.memory_limit_gb=-1"})), "train.memory_limit_gb");
  EXPECT_EQ(error_key(set({"parallel.zero=-1"})), "parallel.zero");
  EXPECT_EQ(error_key(set({"model.activation=relu"})), "model.activation");
  EXPECT_EQ(error_key(set({"train.min_lr=1.0", "train.lr=0.1"})), "train.min_lr");
  EXPECT_EQ(error_key([] { Tunables k; define_run_keys(k); apply_override(k, "novalue"); }), "");
}

TEST(RunConfig, FileThenEnvironmentThenSet) {
  TempDir dir;
  const std::string path = dir.file("run.toml",
                                    "[model]\nlayers = 3\nhidden = 64\n[train]\nlr = 1e-3\n"
                                    "out_dir = \"somewhere\"\n[data]\nval_fraction = 0.1\n");
  Tunables keys;
  define_run_keys(keys);
  apply_config_file(keys, path);
  keys.apply_environment({{"GIANT_MODEL_HIDDEN", "128"}, {"GIANT_TRAIN_LR", "2e-3"}});
  apply_override(keys, "train.lr=5e-4");
  apply_override(keys, "data.tokenizer=byte");  // a bare word, as the shell leaves "byte"
  const RunConfig c = run_config_from(keys);
  EXPECT_EQ(c.model.layers, 3);
  EXPECT_EQ(c.model.hidden, 128);
  EXPECT_DOUBLE_EQ(c.train.lr, 5e-4);
  EXPECT_DOUBLE_EQ(c.data.val_fraction, 0.1);
  EXPECT_EQ(c.train.out_dir, "somewhere");

  // The saved effective config reads back to the same values.
  const std::string saved = dir.file("saved.toml", run_config_toml(keys));
  Tunables again;
  define_run_keys(again);
  apply_config_file(again, saved);
  for (const auto& name : keys.names()) EXPECT_EQ(again.value_text(name), keys.value_text(name)) << name;
}

TEST(RunConfig, BadFilesNameTheKeyOrTheFile) {
  TempDir dir;
  Tunables keys;
  define_run_keys(keys);
  EXPECT_EQ(error_key([&] { apply_config_file(keys, dir.file("a.toml", "[model]\nlayerz = 3\n")); }),
            "model.layerz");
  EXPECT_EQ(error_key([&] { apply_config_file(keys, dir.file("b.toml", "[train]\nsteps = \"many\"\n")); }),
            "train.steps");
  try {
    apply_config_file(keys, dir.file("c.toml", "[model\nlayers = 3\n"));
    FAIL() << "no error for a broken file";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.toml"), std::string::npos) << e.what();
  }
  try {
    apply_config_file(keys, dir.path() + "/missing.toml");
    FAIL() << "no error for a missing file";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.toml"), std::string::npos) << e.what();
  }
  // toml++ reads a directory, a FIFO or a device as an empty document: the
  // defaults would train. Each is refused.
  for (const std::string& path : {dir.path(), std::string("/dev/null")}) {
    try {
      apply_config_file(keys, path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("config file '" + path + "' is "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("giant train takes a TOML file"), std::string::npos) << e.what();
    }
  }
}

// A POSIX path is any bytes; a TOML string must be UTF-8. config.toml keeps
// such a path byte for byte, so a run can be repeated from its own config.
TEST(RunConfig, PathsThatAreNotUtf8RoundTripThroughTheSavedConfig) {
  TempDir dir;
  const std::string latin1 = dir.path() + "/caf\xE9 100%/text.txt";  // é in Latin-1: not UTF-8
  const std::string utf8 = dir.path() + "/caf\xC3\xA9/\"quoted\"\\x.txt";
  Tunables keys;
  define_run_keys(keys);
  keys.set("data.path", latin1, TunableSource::command_line);
  keys.set("train.out_dir", utf8, TunableSource::command_line);
  keys.set_list("data.paths", {"0.5", latin1, "0.5", utf8 + "\xFF"}, TunableSource::command_line);
  const std::string toml = run_config_toml(keys);
  EXPECT_TRUE(is_valid_utf8(toml)) << toml;
  EXPECT_NE(toml.find("path = { percent_encoded = '" + dir.path() + "/caf%E9 100%25/text.txt' }"), std::string::npos)
      << toml;
  Tunables again;
  define_run_keys(again);
  apply_config_file(again, dir.file("saved.toml", toml));
  EXPECT_EQ(again.get_string("data.path"), latin1);
  EXPECT_EQ(again.get_string("train.out_dir"), utf8);
  EXPECT_EQ(again.get_list("data.paths"), keys.get_list("data.paths"));
  // A malformed escape names the key.
  Tunables bad;
  define_run_keys(bad);
  EXPECT_EQ(error_key([&] { apply_override(bad, "data.path={ percent_encoded = \"x%G\" }"); }), "data.path");
}

// A tiny model on a tiny text, quick enough for a unit test.
std::vector<std::string> tiny_run(const TempDir& dir, const std::string& data) {
  return {"model.layers=1",        "model.hidden=32",       "model.heads=2",
          "model.seq_len=16",      "train.global_batch=4",  "train.micro_batch=2",
          "train.threads=1",       "train.eval_every=0",    "train.eval_batches=1",
          "train.sample_tokens=0", "train.warmup_steps=5",  "data.val_fraction=0.5",
          "data.path=\"" + data + "\"", "train.out_dir=\"" + dir.path() + "/out\""};
}

TEST(Trainer, BadDataIsRefusedBeforeAnyWork) {
  TempDir dir;
  auto run = [&](std::vector<std::string> extra) {
    auto o = tiny_run(dir, dir.path() + "/text.txt");
    o.insert(o.end(), extra.begin(), extra.end());
    Tunables keys = keys_with(o);
    std::ostringstream out;
    return error_key([&] { Trainer(run_config_from(keys), "", out, false); });
  };
  EXPECT_EQ(run({}), "data.path");  // missing file
  EXPECT_FALSE(fs::exists(dir.path() + "/out"));
  dir.file("text.txt", std::string(30, 'a'));  // 15 tokens per split, seq_len 16 needs 17
  EXPECT_EQ(run({}), "model.seq_len");
  EXPECT_EQ(run({"model.seq_len=8"}), "none");
  EXPECT_EQ(run({"model.seq_len=8", "data.tokenizer=\"words\""}), "data.tokenizer");
  EXPECT_EQ(run({"model.seq_len=8", "model.vocab=100"}), "model.vocab");
  EXPECT_EQ(run({"model.seq_len=8", "parallel.dp=2", "train.global_batch=4"}), "parallel.dp");
}

std::string text_of(size_t n) {
  std::string text;
  for (size_t i = 0; text.size() < n; ++i) text += "In the beginning " + std::to_string(i * 7 % 13) + ". ";
  return text.substr(0, n);
}

TEST(Trainer, TinyModelOverfitsATinyText) {
  TempDir dir;
  auto o = tiny_run(dir, dir.file("text.txt", text_of(96)));  // 48 training tokens
  o.insert(o.end(), {"train.steps=150", "train.lr=1e-2", "train.min_lr=1e-3"});
  std::ostringstream out;
  Trainer trainer(run_config_from(keys_with(o)), "x = 1\n", out, false);
  const TrainSummary s = trainer.run();
  EXPECT_GT(s.first_loss, 4.0);  // about ln 256 at the start
  EXPECT_LT(s.last_loss, 0.3) << out.str();
  EXPECT_EQ(s.skipped_steps, 0);
  // What the run leaves behind.
  std::ifstream metrics(dir.path() + "/out/metrics.jsonl");
  std::string line;
  int lines = 0;
  bool val_line = false;
  while (std::getline(metrics, line)) {
    ++lines;
    val_line = val_line || line.find("\"val_loss\"") != std::string::npos;
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
  }
  EXPECT_EQ(lines, 150 + 1 + 1);  // steps, the final evaluation, the summary
  EXPECT_TRUE(val_line);
  EXPECT_TRUE(fs::exists(dir.path() + "/out/config.toml"));
  EXPECT_NE(out.str().find("step 150/150"), std::string::npos);
}

TEST(Trainer, GuardSkipsANonFiniteStepAndStopsAfterSeveral) {
  TempDir dir;
  auto o = tiny_run(dir, dir.file("text.txt", text_of(200)));
  o.push_back("train.steps=6");
  std::vector<torch::Tensor> before, after;
  TrainHooks hooks;
  const Trainer* running = nullptr;
  hooks.after_backward = [&](int64_t step, const std::vector<at::Tensor>& grads) {
    if (step == 2) {
      for (const auto& p : running->parameters()) before.push_back(p.detach().clone());
      grads.back().view(-1)[0] = NAN;
    }
    if (step == 3) {
      for (const auto& p : running->parameters()) after.push_back(p.detach().clone());
    }
  };
  std::ostringstream out;
  Trainer trainer(run_config_from(keys_with(o)), "", out, false, hooks);
  running = &trainer;
  const TrainSummary s = trainer.run();
  EXPECT_EQ(s.skipped_steps, 1);
  EXPECT_NE(out.str().find("step 3 skipped"), std::string::npos) << out.str();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i])) << i;
  EXPECT_TRUE(std::isfinite(s.last_loss));

  // Non-finite every step: the run stops after train.max_bad_steps.
  o.push_back("train.max_bad_steps=3");
  TrainHooks always;
  always.after_backward = [](int64_t, const std::vector<at::Tensor>& grads) { grads.front().view(-1)[0] = INFINITY; };
  Trainer diverging(run_config_from(keys_with(o)), "", out, false, always);
  try {
    diverging.run();
    FAIL() << "a diverged run did not stop";
  } catch (const ConfigError&) {
    FAIL() << "not a config error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 steps in a row"), std::string::npos) << e.what();
  }
}

// Gradients accumulated over micro-batches equal those of one whole batch,
// but for rounding (support/rounding.h's norm-wise model): each weight's
// gradient reduces over the T = 4 x 16 tokens in one product, or in M = 4
// products summed in fp32, in another order: 2 (T + M) fp32 roundings.
TEST(Trainer, AccumulationMatchesOneWholeBatch) {
  TempDir dir;
  const std::string data = dir.file("text.txt", text_of(400));
  auto first_gradients = [&](const std::string& micro_batch) {
    auto o = tiny_run(dir, data);
    o.insert(o.end(), {"train.steps=1", "train.micro_batch=" + micro_batch});
    std::vector<torch::Tensor> grads;
    TrainHooks hooks;
    hooks.after_backward = [&](int64_t, const std::vector<at::Tensor>& gradients) {
      for (const auto& g : gradients) grads.push_back(g.clone());
    };
    std::ostringstream out;
    Trainer(run_config_from(keys_with(o)), "", out, false, hooks).run();
    return grads;
  };
  const auto whole = first_gradients("4"), accumulated = first_gradients("1");
  ASSERT_EQ(whole.size(), accumulated.size());
  const double bound = giant::test::RoundingBudget().add(2 * (4 * 16 + 4), Precision::fp32).bound();
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_LT(giant::test::relative_error(accumulated[i], whole[i]), bound) << i;
  }
}

TEST(StepGuard, CountsRunsOfBadSteps) {
  StepGuard guard(2);
  EXPECT_TRUE(guard.accept(1, true, 1.0, 1.0));
  EXPECT_FALSE(guard.accept(2, false, NAN, 1.0));
  EXPECT_TRUE(guard.accept(3, true, 1.0, 1.0));
  EXPECT_FALSE(guard.accept(4, false, 1.0, INFINITY));
  EXPECT_THROW(guard.accept(5, false, NAN, NAN), Error);
  EXPECT_EQ(guard.skipped_total(), 3);
}

TEST(Trainer, WritesAChromeTraceWhenAsked) {
  TempDir dir;
  auto o = tiny_run(dir, dir.file("text.txt", text_of(200)));
  o.insert(o.end(), {"train.steps=3", "train.trace=true", "train.trace_steps=2", "train.sample_tokens=20"});
  std::ostringstream out;
  Trainer trainer(run_config_from(keys_with(o)), "", out, false);
  const TrainSummary s = trainer.run();
  const std::string trace = read_file(dir.path() + "/out/trace.json");
  EXPECT_EQ(trace.front(), '[');
  EXPECT_NE(trace.find("giant::forward"), std::string::npos);
  EXPECT_NE(trace.find("giant::backward"), std::string::npos);
  EXPECT_EQ(s.sample.rfind("And God said", 0), 0u);
  EXPECT_GT(s.sample.size(), std::string("And God said").size());
  EXPECT_TRUE(fs::exists(dir.path() + "/out/sample.txt"));
}

// Every line of a file parsed by a strict JSON parser (ill-formed UTF-8 and
// raw control characters are errors), naming the line that fails.
std::vector<nlohmann::json> parse_json_lines(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    try {
      records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::parse_error& e) {
      ADD_FAILURE() << path << " line " << number << " is not JSON: " << e.what();
    }
  }
  return records;
}

// A barely trained byte-level model sampled hot emits arbitrary bytes.
std::vector<std::string> hot_sample_run(const TempDir& dir) {
  auto o = tiny_run(dir, dir.file("text.txt", text_of(200)));
  o.insert(o.end(), {"train.steps=3", "train.sample_tokens=200", "train.sample_temperature=4"});
  return o;
}

const std::string kReplacementCharacter = "\xEF\xBF\xBD";

TEST(Trainer, MetricsParseStrictlyWhateverBytesTheSampleHolds) {
  TempDir dir;
  std::ostringstream out;
  const TrainSummary s = Trainer(run_config_from(keys_with(hot_sample_run(dir))), "", out, false).run();
  EXPECT_NE(s.sample.find(kReplacementCharacter), std::string::npos) << "no ill-formed bytes to replace";
  EXPECT_EQ(printable_utf8(s.sample), s.sample);
  EXPECT_EQ(read_file(dir.path() + "/out/sample.txt"), s.sample + "\n");

  const std::vector<nlohmann::json> records = parse_json_lines(dir.path() + "/out/metrics.jsonl");
  ASSERT_EQ(records.size(), 3u + 1 + 1);  // steps, the final evaluation, the summary
  const std::regex iso8601(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  for (int step = 1; step <= 3; ++step) {
    const nlohmann::json& r = records[step - 1];
    EXPECT_EQ(r.at("step"), step);
    EXPECT_TRUE(r.at("loss").is_number()) << r;
    EXPECT_TRUE(std::regex_match(r.at("time").get<std::string>(), iso8601)) << r;
    EXPECT_TRUE(r.at("max_rss_bytes").is_number_integer()) << r;
    EXPECT_GT(r.at("max_rss_bytes").get<int64_t>(), 1 << 20) << r;
  }
  EXPECT_DOUBLE_EQ(records[3].at("val_loss").get<double>(), s.val_loss);
  EXPECT_EQ(records[4].at("summary"), true);
  EXPECT_EQ(records[4].at("sample").get<std::string>(), s.sample);
}

TEST(MetricsLog, NonFiniteValuesStayStrictJson) {
  TempDir dir;
  const std::string path = dir.path() + "/metrics.jsonl";
  {
    MetricsLog log(path);
    StepReport report;
    report.step = 7;
    report.loss = NAN;
    report.grad_norm = INFINITY;
    report.mfu = -INFINITY;
    report.skipped = true;
    log.step(report, 0.5);
  }
  const std::vector<nlohmann::json> records = parse_json_lines(path);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].at("loss"), "nan");
  EXPECT_EQ(records[0].at("grad_norm"), "inf");
  EXPECT_EQ(records[0].at("mfu"), "-inf");
  EXPECT_EQ(records[0].at("comm_wait_s"), 0.5);
  EXPECT_EQ(records[0].at("skipped"), true);
  EXPECT_THROW(MetricsLog(dir.path() + "/no/such/dir/metrics.jsonl"), Error);
}

// What `giant train` prints is the same printable text as sample.txt.
TEST(Trainer, ConsoleShowsThePrintableSample) {
  TempDir dir;
  std::string command = std::string(GIANT_BINARY_DIR) + "/giant train";
  for (const std::string& o : hot_sample_run(dir)) command += " --set '" + o + "'";
  command += " > " + dir.path() + "/console.txt 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_file(dir.path() + "/console.txt");
  const std::string console = read_file(dir.path() + "/console.txt");
  const std::string sample = read_file(dir.path() + "/out/sample.txt");
  EXPECT_NE(sample.find(kReplacementCharacter), std::string::npos) << "no ill-formed bytes to replace";
  EXPECT_NE(console.find("--- sample ---\n" + sample), std::string::npos) << console;
  EXPECT_EQ(printable_utf8(console), console);
}

// The docs are README.md and docs/*.md (the configuration reference among them).
TEST(Docs, DocumentEveryKey) {
  std::string docs = read_file(std::string(GIANT_SOURCE_DIR) + "/README.md");
  for (const auto& page : std::filesystem::directory_iterator(std::string(GIANT_SOURCE_DIR) + "/docs")) {
    if (page.path().extension() == ".md") docs += read_file(page.path().string());
  }
  for (const auto& name : keys_with({}).names()) {
    EXPECT_NE(docs.find("`" + name + "`"), std::string::npos) << name << " is in neither README.md nor docs/*.md";
  }
}

}  // namespace
}  // namespace giant::train
