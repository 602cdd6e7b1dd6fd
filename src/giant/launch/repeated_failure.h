// Whether restarting can help: a run that fails the same way at the same
// step in two attempts in a row would fail so again. The ranks tell the
// launcher the step they reached through a file (giant train's
// train.progress_file, which GIANT_TRAIN_PROGRESS_FILE sets): rank 0
// rewrites it with each step it begins.
#pragma once

#include <optional>
#include <string>

namespace giant::launch {

class RepeatedFailure {
 public:
  // The step file, made empty in `temp_dir` and removed with this object.
  explicit RepeatedFailure(const std::string& temp_dir);
  ~RepeatedFailure();
  RepeatedFailure(const RepeatedFailure&) = delete;
  RepeatedFailure& operator=(const RepeatedFailure&) = delete;

  const std::string& step_file() const { return step_file_; }
  // Records an attempt's failure (the launcher's words for it) with the step
  // the file holds, and empties the file for the next attempt. True when the
  // attempt before failed the same way (the same words, whichever rank they
  // name first) at the same step; never for failures before the first step.
  bool repeats(const std::string& failure);
  // "step 6", or "start-up" when no step had begun.
  std::string where() const;

 private:
  std::string step_file_;
  std::optional<std::string> last_failure_;
  long long last_step_ = -1;
};

}  // namespace giant::launch
