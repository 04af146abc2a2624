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

Params SweepTuner::at(size_t i) const {
  const auto& pt = points_[i % points_.size()];
  Params p;
  p.chunks.assign(chunks_, ChunkParams{pt[0], pt[1], pt[2]});
  p.cores = cores_ok_ ? pt[3] : 0;
  p.reason = fmt::format("sweep: point {} of {}", i % points_.size() + 1, points_.size());
  if (pt[3] && !cores_ok_) p.reason += fmt::format("; {} cores asked for but core control is off", pt[3]);
  return p;
}

Params SweepTuner::init(const JobInfo& info) {
  chunks_ = info.chunks.size();
  cores_ok_ = info.kernel.cores;
  return at(0);
}

std::optional<Params> SweepTuner::decide(const Observation&) {
  if (++held_ < hold_) return std::nullopt;
  held_ = 0;
  return at(++point_);
}

}  // namespace xfer
