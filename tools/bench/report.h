// Benchmark output: the CSV of every run, a Markdown table of medians with
// ratios to the best peer, and a throughput-against-energy plot per dataset
// (the papers' Fig. 6-8 view).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "measure.h"
#include "xfer/stats.h"
#include "xfer/svg.h"

namespace bench {

using xfer::median;  // 0 for none

// How every client's energy is figured (there is no RAPL on the test bed).
constexpr const char* kEnergySource = "model:cpu (energy-aware eq. 2-3)";

std::string csv_header();
std::string csv_line(const RunRow& r);
std::vector<RunRow> read_csv(const std::string& path);

struct Summary {
  std::string dataset, client, kind;
  int runs = 0, verified_runs = 0;
  double throughput_mbps = 0, wall_s = 0, client_cpu_s = 0, server_cpu_s = 0, client_j = 0, j_per_gb = 0;
  double end_j_per_gb = 0;  // end-system (0: not in these results)
  double cpu_per_gb = 0;    // client CPU seconds per GB
  double disk_s = 0;        // wall time until the files were on disk (0: not in these results)
  double cpu_per_gb_to_disk = 0;  // client CPU and the writeback after it, per GB (0: not kept)
  double cpu_per_gb_kthreads = 0;  // client CPU and every kernel thread's over the run and the sync, per GB
  double thr_vs_best_peer = 0, jpg_vs_best_peer = 0, end_vs_best_peer = 0;  // ratios (0 when there is no peer)
  bool peer = true;
};

// Medians per (dataset, client), in first-seen order.
std::vector<Summary> summarize(const std::vector<RunRow>& rows);
// setup: a sentence on how the runs were made (where the clients wrote), or
// empty; commit: the source tree measured, or empty.
std::string markdown(const std::string& scenario, const std::vector<Summary>& s, const std::string& energy_source,
                     const std::string& setup = "", const std::string& commit = "");
std::string svg_plot(const std::string& title, const std::vector<Summary>& s);

using xfer::SvgFrame;
using xfer::svg_color;
// The datasets the rows name, in first-seen order.
std::vector<std::string> datasets_of(const std::vector<RunRow>& rows);
// One dataset's verified runs that moved bytes, per client (clients in
// first-seen order): what the goal tables judge.
struct ClientRuns {
  std::string client;
  std::vector<const RunRow*> runs;
};
std::vector<ClientRuns> verified_by_client(const std::vector<RunRow>& rows, const std::string& dataset);

// The SLA policies' goals (issue 6) checked per dataset, for clients with a goal.
// A floor run judged as issue 54 asks: its intervals after the first two
// (set-up: discovery, handshakes, slow start), its tail included; a last
// interval under half the median one (the job's last files ending a moment
// into it) is not a rate. `held`: the share of them within [1.0,
// kFloorBand] of the target; `avg`: their mean over the target (bytes over
// time). NaN without a target or such intervals. t_end: each interval's end
// on the job's clock.
constexpr double kFloorBand = 1.15;
struct FloorFigures {
  double held = NAN, avg = NAN;
};
FloorFigures floor_figures(const std::vector<double>& t_end, const std::vector<double>& mbps, double target_mbps);

std::string goals_markdown(const std::vector<RunRow>& rows, double link_mbps);

}  // namespace bench
