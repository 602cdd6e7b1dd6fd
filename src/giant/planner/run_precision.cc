#include "giant/planner/run_precision.h"

namespace giant::planner {

RunPrecision default_run_precision(const DeviceSpec& device) {
  const Precision p = device.default_precision();
  return RunPrecision{p, p};
}

RunPrecision resolve_precision(const std::optional<RunPrecision>& asked, const DeviceSpec& device) {
  return asked ? *asked : default_run_precision(device);
}

std::string missing_rates_note(const DeviceSpec& device, Precision compute) {
  if (device.has_rates_for(compute)) return "";
  return std::string("the cluster file has no ") + precision_name(compute) + " rates: its " +
         precision_name(device.default_precision()) + " ([device]) rates are used; `giant plan --calibrate` measures " +
         precision_name(compute) + " where the device runs it";
}

}  // namespace giant::planner
