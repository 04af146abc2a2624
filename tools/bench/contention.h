// xfer-bench's contention scenario (issue 39): a scenario with [[job]]s runs
// them together in one process on one arbiter, as xferd runs them
// (xfer::run_job_set), in the link's client namespace; then the same jobs
// one after another, for the energy of sharing. Each repeat is checked
// against the goals the jobs name; the summary gives the medians.
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "scenario.h"
#include "testbed.h"

namespace bench {

// Runs the set `repeat` times; writes OUT/contention.json (every run's
// reports), OUT/summary.md (the goal table: medians of the repeats) and
// OUT/timeline-contention.svg (the first repeat: each job's throughput per
// interval, floors dashed). Returns the exit code.
int run_contention(const Scenario& sc, const std::vector<PreparedDataset>& datasets, const LinkProcess& link,
                   const std::string& out, const std::string& dest_root, int repeat, const std::string& commit,
                   volatile std::sig_atomic_t* stop);

}  // namespace bench
