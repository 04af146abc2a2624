// xfer-hla collect: a history made here, as the papers made theirs (a week
// of transfers on three testbeds): static parameters swept over several
// xfer-linkemu paths, cross-traffic loads and dataset shapes.
//
// A plan (TOML, tests/bench/hla-*.toml):
//   name, interval_ms, hold (intervals per point; the first settles),
//   kernel ("affinity" | "hotplug" | "off": how cores are turned)
//   [sweep] / [quick_sweep]: cc, p, pp, cores = [levels], base = [cc, p, pp, cores],
//       repeat = visits per point (default 1; each visit is one sample)
//       the points: the (cc, p) grid at the base pp and cores, a line over
//       pp and one over cores through the base
//   [[path]]: name, rate_mbps, rtt_ms, loss_pct, ... (as a bench [link]),
//       loads = [percent of the link taken by cross traffic], quick = bool
//   [[dataset]]: as in a bench scenario, quick = bool
// Each cell (path, load, dataset) runs `xferctl run --sla sweep` with the
// history until every point has `repeat` measured visits in finished runs; the
// history itself is the progress, so an interrupted collect resumes.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "scenario.h"

namespace hlatool {

using Point = std::array<int, 4>;  // cc, p, pp, cores

struct PathSpec {
  std::string name;
  bench::LinkSpec link;
  std::vector<double> loads;
};

struct Plan {
  std::string name, kernel = "affinity";
  int interval_ms = 500, hold = 3, repeat = 1;
  std::vector<Point> points;
  std::vector<PathSpec> paths;
  std::vector<bench::DatasetSpec> datasets;
};

Plan load_plan(const std::string& path, bool quick, int max_cores);
// Returns the exit status (0, 1 failure, 2 bad input, 130 interrupted).
int collect(const Plan& plan, bool quick, const std::string& history, const std::string& out);

}  // namespace hlatool
