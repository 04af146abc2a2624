#pragma once

#include "xfer/tuner.h"

namespace xfer {

// `static`: the caller's cc / p / pp (every chunk), cores and frequency.
class StaticTuner : public Tuner {
 public:
  explicit StaticTuner(ChunkParams fixed, int cores = 0, long freq_khz = 0)
      : fixed_(fixed), cores_(cores), freq_khz_(freq_khz) {}
  std::string name() const override { return "static"; }
  Params init(const JobInfo& info) override;
  std::optional<Params> decide(const Observation&) override { return std::nullopt; }

 private:
  ChunkParams fixed_;
  int cores_;
  long freq_khz_;
};

}  // namespace xfer
