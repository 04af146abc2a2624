// The calibration run behind `xferctl calibrate`: it turns cores (cpu/) and
// reads energy (energy/), so it sits above both (control/).
#pragma once

#include <string>

namespace xfer {

// The calibration run: idle, then CPU load at each core count (hotplug,
// journalled and restored) and duty level, memory, disk and loopback network
// load, sampling RAPL and utilisation every second; fits and writes the
// coefficient file. Needs RAPL. Returns false (and logs why) on failure.
// kernel_state: the kernel layer's journal (cores are changed and restored).
bool run_calibration(const std::string& out_path, const std::string& kernel_state, double seconds_per_level = 4);

}  // namespace xfer
