// SIGINT and SIGTERM as a request to stop cleanly: the first is remembered
// for the work to poll (giant train finishes its step and saves a
// checkpoint); a second one ends the process at once, by that signal.
#pragma once

namespace giant::app {

class StopSignals {
 public:
  // Installs the handlers (SIGINT and SIGTERM, each unless ignored on
  // entry, as under nohup). Only one may exist at a time.
  StopSignals();
  // Puts the dispositions back.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first signal received, or 0. Safe from any thread.
  static int received();
};

}  // namespace giant::app
