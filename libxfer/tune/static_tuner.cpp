// `static`: the caller's cc / p / pp for every chunk, and the caller's cores
// and frequency (0: left alone), never changed.
#include "static_tuner.h"

#include <fmt/format.h>

namespace xfer {

namespace {

// The caller's cores and frequency, through the one controller of the kernel
// knobs (KernelPlan's Hold): each at the level nearest what was asked, and
// the reason says what could not be had.
std::string hold_kernel(tune::KernelPlan& plan, const KernelCaps& caps, int cores, long freq_khz, Params& p) {
  Params want;
  want.cores = cores, want.freq_khz = freq_khz;
  std::string said = plan.hold(caps, true, want, p);
  return said.empty() ? "" : "; kernel: " + said;
}

}  // namespace

Params StaticTuner::init(const StartFacts& info) {
  Params p;
  p.chunks.assign(info.chunks.size(), fixed_);
  p.reason = "static: fixed by the caller" + hold_kernel(kernel_, info.kernel, cores_, freq_khz_, p);
  return p;
}

Params SweepTuner::at(size_t i) {
  const auto& pt = points_[i % points_.size()];
  Params p;
  p.chunks.assign(chunks_, ChunkParams{pt[0], pt[1], pt[2]});
  p.reason = fmt::format("sweep: point {} of {}", i % points_.size() + 1, points_.size()) +
             hold_kernel(kernel_, caps_, pt[3], 0, p);
  return p;
}

Params SweepTuner::init(const StartFacts& info) {
  chunks_ = info.chunks.size();
  caps_ = info.kernel;
  return at(0);
}

std::optional<Params> SweepTuner::decide(const Observation&) {
  if (++held_ < hold_) return std::nullopt;
  held_ = 0;
  return at(++point_);
}

}  // namespace xfer
