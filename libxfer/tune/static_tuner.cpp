// `static`: the caller's cc / p / pp for every chunk, never changed.
#include "static_tuner.h"

namespace xfer {

StaticTuner::StaticTuner(ChunkParams fixed) : fixed_(fixed) {}

Params StaticTuner::init(const JobInfo& info) {
  Params p;
  p.chunks.assign(info.chunks.size(), fixed_);
  p.reason = "static: fixed by the caller";
  return p;
}

std::optional<Params> StaticTuner::decide(const Observation&) { return std::nullopt; }

}  // namespace xfer
