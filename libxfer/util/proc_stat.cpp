// read_cpu_times (xfer/proc_stat.h).
#include "xfer/proc_stat.h"

#include <fstream>

namespace xfer {

CpuTimes read_cpu_times(const std::string& proc) {
  // The "cpu" line: user nice system idle iowait irq softirq steal (clock ticks).
  std::ifstream f(proc + "/stat");
  std::string label;
  uint64_t v[8] = {0};
  f >> label;
  for (auto& x : v) f >> x;
  CpuTimes t;
  for (auto x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];
  return t;
}

}  // namespace xfer
