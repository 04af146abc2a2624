// One interval of a job as the control loop keeps it (control_loop.h), and
// as the history records it (history.h): a plain record of the engine's and
// the tuner's types, below both readers.
#pragma once

#include <optional>
#include <vector>

#include "xfer/engine.h"
#include "xfer/tuner.h"

namespace xfer {

// One interval as kept: what was observed (with the params in effect), what
// the tuner chose at its end (nullopt: it kept them), and the job's progress
// and chunk status at that moment, so that no reader goes back to the Job.
struct IntervalRecord {
  Observation obs;
  std::optional<Params> decided;
  JobProgress progress;
  std::vector<ChunkStatus> chunks;
};

}  // namespace xfer
