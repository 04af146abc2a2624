// The history benchmark's report (issue 15): how the hla tuners, started
// from a learnt table, compare with their heuristic counterparts, the best
// static parameters of a sweep and the peers, on a path whose cross traffic
// switches between two loads.
#pragma once

#include <string>
#include <vector>

#include "measure.h"

namespace bench {

struct HlaContext {
  std::vector<double> switches_s;  // when the cross traffic changed, on the cross traffic's clock
  int after = 2;                   // intervals that count as "right after" a switch
};

// The first interval (1-based) whose throughput is within 10% of target
// (>= 0.9 x target); 0 when none is.
int convergence_interval(const std::vector<IntervalPoint>& timeline, double target_mbps);

// Per interval, after the first and without the last (the tail, shorter or
// emptying): how many meet the SLA, overall and right after a switch.
struct Adherence {
  int intervals = 0, met = 0;
  int after_switch = 0, after_met = 0;
  // The worst interval against the bound: the least throughput / floor, or
  // the most J/GB / budget (NaN: no interval).
  double worst = NAN;
  bool ceiling = false;  // a budget: higher is worse
  void add(const Adherence& o);
  double share() const { return intervals ? double(met) / intervals : 0; }
};
// Throughput >= floor.
Adherence floor_adherence(const RunRow& r, double floor_mbps, const HlaContext& ctx);
// J/GB <= (1 + tolerance) x budget; intervals without energy are skipped.
Adherence budget_adherence(const RunRow& r, double budget_j_per_gb, double tolerance, const HlaContext& ctx);

// Per dataset: the best static, every client's ratios, convergence, and
// the goals met or missed.
std::string hla_markdown(const std::vector<RunRow>& rows, const HlaContext& ctx);
// Throughput over time of each xferctl client's first verified run, the
// switches marked.
std::string timeline_svg(const std::string& title, const std::vector<const RunRow*>& runs, const HlaContext& ctx);
// Every interval of every run: dataset, client, repeat, t, Mbit/s, J/GB, ext_load.
std::string timelines_csv(const std::vector<RunRow>& rows);

}  // namespace bench
