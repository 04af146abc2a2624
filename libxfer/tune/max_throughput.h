#pragma once

#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// MaxThr: http-sla-transfer-algorithms.txt Algorithm 2.
class MaxThroughputTuner : public Tuner {
 public:
  explicit MaxThroughputTuner(const TunerOptions& o = {}) : kernel_enabled_(o.kernel) {}
  std::string name() const override { return "max-throughput"; }
  Params init(const JobInfo& info) override;
  std::optional<Params> decide(const Observation& obs) override;
  nlohmann::json summary() const override;

 private:
  JobInfo info_;
  bool kernel_enabled_;
  tune::KernelPlan kernel_;
  Params current_;
  std::vector<bool> active_;
  int redeals_ = 0;
};

}  // namespace xfer
