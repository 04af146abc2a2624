#pragma once

#include <map>

#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// HTEE / EE: energy-aware-transfer-algorithms.txt Algorithm 2; http-sla Algorithm 3.
class EnergyEfficientTuner : public Tuner {
 public:
  static constexpr int kDefaultStep = 2;  // HTEE; EE uses 4 (--search-step)
  explicit EnergyEfficientTuner(const TunerOptions& o);
  std::string name() const override { return "energy-efficient"; }
  // Throughput per joule of the load's energy: the papers' power model
  // (energy-aware eq. 1-3) has no idle term, so a level is not credited for
  // spreading a fixed idle draw over more bytes (which drifts the choice to
  // the most channels). The end system's joules are kept beside it.
  static constexpr EnergyKind kEnergy = EnergyKind::Dynamic;
  std::optional<EnergyKind> minimises() const override { return kEnergy; }
  Params init(const StartFacts& info) override;
  std::optional<Params> decide(const Observation& obs) override;
  nlohmann::json summary() const override;

  // The concurrency levels searched: 1, 1+step, ... <= max (or the given list).
  static std::vector<int> levels(int max_channels, int step, const std::vector<int>& given);
  int chosen() const { return chosen_; }

 private:
  std::string at_level(int level, const Observation* obs);  // returns the kernel layer's reason, if any
  TunerOptions opts_;
  StartFacts info_;
  std::vector<double> weights_;
  std::vector<int> levels_;
  size_t next_ = 0;         // index of the level being measured
  int chosen_ = 0;
  std::string basis_;       // "joules" or "throughput only (no energy figures)"
  struct Score {
    double mbps = 0, joules = 0, bytes_per_joule = 0;
    double end_joules = 0, bytes_per_end_joule = 0;  // the end system's, idle draw included (shown, not ranked on)
  };
  std::map<int, Score> scores_;
  tune::KernelPlan kernel_;
  Params current_;
  std::vector<bool> active_;
};

}  // namespace xfer
