#pragma once

#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// MaxThr: http-sla-transfer-algorithms.txt Algorithm 2.
class MaxThroughputTuner : public Tuner {
 public:
  explicit MaxThroughputTuner(const TunerOptions& o = {}) : kernel_enabled_(o.kernel), cost_(o.stream_cost) {}
  std::string name() const override { return "max-throughput"; }
  Params init(const StartFacts& info) override;
  std::optional<Params> decide(const Observation& obs) override;
  nlohmann::json summary() const override;

 private:
  StartFacts info_;
  bool kernel_enabled_;
  tune::KernelPlan kernel_;
  Params current_;
  std::vector<bool> active_;
  int redeals_ = 0;
  // Falcon (stream_cost > 1): the channels n searched online for the most
  // utility T / K^n (search()).
  bool falcon() const { return cost_ > 1; }
  std::optional<Params> search(const Observation& obs);
  double cost_ = 0;
  static constexpr double kLossWeight = 10;  // Falcon's B
  int n_ = 0, dir_ = 1, step_ = 1, moves_ = 0;
  double last_utility_ = -1;
  int last_n_ = 0;
};

}  // namespace xfer
