#pragma once

#include "kernel_plan.h"
#include "xfer/tuner.h"

namespace xfer {

// MinE: energy-aware-transfer-algorithms.txt Algorithm 1; http-sla Algorithm 1.
class MinEnergyTuner : public Tuner {
 public:
  explicit MinEnergyTuner(const TunerOptions& o = {}) : kernel_enabled_(o.kernel) {}
  std::string name() const override { return "min-energy"; }
  // The machine's draw while the job runs: taking a core offline or
  // finishing sooner saves its idle power, which the dynamic figure ignores.
  static constexpr EnergyKind kEnergy = EnergyKind::EndSystem;
  std::optional<EnergyKind> minimises() const override { return kEnergy; }
  Params init(const JobInfo& info) override;
  std::optional<Params> decide(const Observation& obs) override;
  nlohmann::json summary() const override;

  // Line 10: cc = min(ceil(BDP / avg), ceil((avail + 1) / 2)), at least 1.
  static int concurrency(uint64_t bdp, double avg, int avail);
  // Channels a chunk of files of size avg needs when each carries pp HTTP/2
  // streams at once over p connections:
  // max(ceil(ceil(BDP / avg) / pp), ceil(ceil(BDP / buf) / p), 1).
  static int multiplexed_channels(const JobInfo& info, double avg, int pp, int p);

 private:
  bool kernel_enabled_;
  tune::KernelPlan kernel_;
  Params current_;
  int intervals_ = 0;
  bool warned_no_energy_ = false;
  double joules_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace xfer
