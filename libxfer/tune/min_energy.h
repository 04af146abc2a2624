#pragma once

#include "xfer/tuner.h"

namespace xfer {

// MinE: energy-aware-transfer-algorithms.txt Algorithm 1; http-sla Algorithm 1.
class MinEnergyTuner : public Tuner {
 public:
  std::string name() const override { return "min-energy"; }
  Params init(const JobInfo& info) override;
  std::optional<Params> decide(const Observation& obs) override;

  // The per-chunk formulas, exposed for tests.
  static int pipelining(uint64_t bdp, double avg);
  static int parallelism(uint64_t bdp, double avg, uint64_t buf);
  static int concurrency(uint64_t bdp, double avg, int avail);
};

}  // namespace xfer
