// Benchmark output: the CSV of every run, a Markdown table of medians with
// ratios to the best peer, and a throughput-against-energy plot per dataset
// (the papers' Fig. 6-8 view).
#pragma once

#include <string>
#include <vector>

#include "measure.h"
#include "xfer/stats.h"

namespace bench {

using xfer::median;  // 0 for none

std::string csv_header();
std::string csv_line(const RunRow& r);
std::vector<RunRow> read_csv(const std::string& path);

struct Summary {
  std::string dataset, client, kind;
  int runs = 0, verified_runs = 0;
  double throughput_mbps = 0, wall_s = 0, client_cpu_s = 0, server_cpu_s = 0, client_j = 0, j_per_gb = 0;
  double thr_vs_best_peer = 0, jpg_vs_best_peer = 0;  // ratios (0 when there is no peer)
  bool peer = true;
};

// Medians per (dataset, client), in first-seen order.
std::vector<Summary> summarize(const std::vector<RunRow>& rows);
std::string markdown(const std::string& scenario, const std::vector<Summary>& s, const std::string& energy_source);
std::string svg_plot(const std::string& title, const std::vector<Summary>& s);
// The SLA policies' goals (issue 6) checked per dataset, for clients with a goal.
std::string goals_markdown(const std::vector<RunRow>& rows, double link_mbps);

}  // namespace bench
