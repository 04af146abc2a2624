// The machine's CPU time from /proc/stat: read by the power model (energy/),
// the cores other processes keep busy (cpu/) and the machine's shares
// (control/), so below all of them.
#pragma once

#include <cstdint>
#include <string>

namespace xfer {

// Busy and total clock ticks of every CPU since boot (/proc/stat).
struct CpuTimes {
  uint64_t busy = 0, total = 0;
};
CpuTimes read_cpu_times(const std::string& proc = "/proc");

}  // namespace xfer
