#pragma once

#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// `static`: the caller's cc / p / pp (every chunk), cores and frequency.
class StaticTuner : public Tuner {
 public:
  explicit StaticTuner(ChunkParams fixed, int cores = 0, long freq_khz = 0)
      : fixed_(fixed), cores_(cores), freq_khz_(freq_khz) {}
  std::string name() const override { return "static"; }
  Params init(const StartFacts& info) override;
  std::optional<Params> decide(const Observation&) override { return std::nullopt; }

 private:
  ChunkParams fixed_;
  int cores_;
  long freq_khz_;
  tune::KernelPlan kernel_;
};

// `sweep`: static params that change on a schedule, for filling a history
// (xfer-hla collect): each point (cc, p, pp for every chunk; cores) is held
// for `hold` intervals, the first of which the history marks settling; after
// the last point the sweep starts over.
class SweepTuner : public Tuner {
 public:
  SweepTuner(std::vector<std::array<int, 4>> points, int hold) : points_(std::move(points)), hold_(hold) {
    if (points_.empty()) points_.push_back({1, 1, 1, 0});
  }
  std::string name() const override { return "sweep"; }
  Params init(const StartFacts& info) override;
  std::optional<Params> decide(const Observation&) override;

 private:
  Params at(size_t i);
  std::vector<std::array<int, 4>> points_;
  int hold_;
  size_t chunks_ = 0, point_ = 0;
  int held_ = 0;
  KernelCaps caps_;
  tune::KernelPlan kernel_;
};

}  // namespace xfer
