#include "xfer/kernel_knobs.h"

#include <algorithm>
#include <fmt/format.h>

namespace xfer {

const std::vector<KernelKnobDef>& kernel_knobs() {
  static const std::vector<KernelKnobDef> knobs = {
      {"frequency", "kHz", "freq_khz", "there is no cpufreq driver",
       [](const KernelCaps& c) { return c.freq ? c.freqs_khz : std::vector<long>{}; },
       [](const Params& p) { return p.freq_khz; },
       [](Params& p, long v) { p.freq_khz = v; },
       [](Observation& o, long v) { o.freq_khz = v; },
       [](const Observation& o) { return o.freq_khz.value_or(0); }},
      {"cores", "cores", "cores", "core control is off",
       [](const KernelCaps& c) {
         std::vector<long> l;
         if (c.cores)
           for (int n = std::max(1, c.min_cores); n <= std::max(1, c.cores_present); ++n) l.push_back(n);
         return l;
       },
       [](const Params& p) { return long(p.cores); },
       [](Params& p, long v) { p.cores = int(v); },
       [](Observation& o, long v) { o.cores = int(v); },
       [](const Observation& o) { return long(o.cores.value_or(0)); }},
  };
  return knobs;
}

std::string describe_kernel(const Params& p) {
  std::string out;
  // Up order reads naturally: cores, then frequency.
  for (auto k = kernel_knobs().rbegin(); k != kernel_knobs().rend(); ++k)
    if (long v = k->get(p); v > 0) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", v, k->unit);
  return out;
}

bool kernel_differs(const Params& a, const Params& b) {
  for (const KernelKnobDef& k : kernel_knobs())
    if (k.get(a) != k.get(b)) return true;
  return false;
}

}  // namespace xfer
