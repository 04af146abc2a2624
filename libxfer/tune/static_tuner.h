#pragma once

#include "xfer/tuner.h"

namespace xfer {

class StaticTuner : public Tuner {
 public:
  explicit StaticTuner(ChunkParams fixed);
  std::string name() const override { return "static"; }
  Params init(const JobInfo& info) override;
  std::optional<Params> decide(const Observation& obs) override;

 private:
  ChunkParams fixed_;
};

}  // namespace xfer
