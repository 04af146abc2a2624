// `static`: the caller's cc / p / pp for every chunk, and the caller's cores
// and frequency (0: left alone), never changed.
#include "static_tuner.h"

#include <fmt/format.h>

namespace xfer {

Params StaticTuner::init(const JobInfo& info) {
  Params p;
  p.chunks.assign(info.chunks.size(), fixed_);
  p.cores = info.kernel.cores ? cores_ : 0;
  p.freq_khz = info.kernel.freq ? freq_khz_ : 0;
  p.reason = "static: fixed by the caller";
  if (cores_ && !info.kernel.cores) p.reason += fmt::format("; {} cores asked for but core control is off", cores_);
  if (freq_khz_ && !info.kernel.freq) p.reason += "; a frequency asked for but there is no cpufreq driver";
  return p;
}

}  // namespace xfer
