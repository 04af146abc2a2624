// Jobs run together in this process as xferd runs them, on a Node
// (xfer/node.h: one engine, flow monitor, machine and arbiter, and one
// kernel layer shared among them when asked), each started after its delay. What the arbiter's
// tests and xfer-bench's contention scenario run (the caller is already in
// the network namespace it wants).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xfer/running_job.h"

namespace xfer {

// A job of the set, and when it starts.
struct ScheduledRun {
  RunningJobSpec spec;  // spec.id: its id in the arbiter, the monitor and the machine
  double start_s = 0;   // after the set starts
};

struct SetOptions {
  double capacity_bps = 0;      // the arbiter's configured link (0: measured)
  int origin_connections = 0;   // the arbiter's per-origin limit (0: none)
  bool arbiter = true;          // false: the jobs share no arbiter (each tunes as if alone)
  // One kernel layer for all the jobs, in affinity mode (this process's own
  // threads: nothing of the machine changes), shared as xferd shares it.
  bool shared_kernel = false;
  std::string kernel_state;     // its journal
  // Called every 50 ms while the jobs run (a sampler of the caller's).
  std::function<void()> every_50ms;
};

// {"jobs": [each job's report, in the order given], "machine_joules": the
//  machine's joules over the set, "source": the energy meter's,
//  "seconds": the set's wall time, "kernel_note": why no kernel layer (when
//  one was asked for and could not be opened)}.
nlohmann::json run_job_set(std::vector<ScheduledRun> jobs, const SetOptions& o);

}  // namespace xfer
