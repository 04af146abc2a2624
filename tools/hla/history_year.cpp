// xfer-history-year: a year of a busy DTN's history, made up, to measure
// what the retention keeps bounded (issue 55): each simulated day appends
// JOBS runs (four paths, three dataset shapes, the settings an everyday
// tuner visits, a rate model with noise), then compacts as xferd-hla.service
// does every night; on the days named it times analyze and writes a CSV row:
//   day,jobs,runs_left,rows_left,folded_rows,history_mb,compact_s,read_s,analyze_s,samples,strata
//
//   xfer-history-year --history H.db --days 365 --jobs-per-day 1000
//     --analyze-on 1,7,30,90,180,365 --out year.csv [--no-compact]
// (one command line)
// With --no-compact nothing is folded (the history as it grew before).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <random>
#include <set>

#include "xfer/history.h"
#include "xfer/hla.h"

namespace {

using namespace xfer::hla;

struct Path {
  const char* origin;
  double link_mbps, rtt_ms, loss_pct;
};
constexpr Path kPaths[] = {{"http://10.0.1.1:80", 10000, 5, 0.001},
                           {"https://10.0.2.1:443", 1000, 40, 0.01},
                           {"https://10.0.3.1:443", 400, 80, 0.02},
                           {"http://10.0.4.1:80", 100, 150, 0.05}};
struct Shape {
  double size, files;
};
constexpr Shape kShapes[] = {{100e3, 1000}, {2e6, 100}, {200e6, 5}};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double file_mb(const std::string& p) {
  double b = 0;
  for (const std::string& f : {p, p + "-wal"}) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0) b += double(st.st_size);
  }
  return b / 1e6;
}

// One day's jobs, appended.
void day_of_jobs(History& h, std::mt19937_64& rng, int day, int jobs, double t0) {
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(1, 0.1);
  const int ccs[] = {1, 2, 4, 8, 16}, ps[] = {1, 2, 4}, pps[] = {1, 4, 8};
  std::vector<IntervalRow> rows;
  for (int j = 0; j < jobs; ++j) {
    const Path& path = kPaths[rng() % 4];
    const Shape& shape = kShapes[rng() % 3];
    const double start = t0 + day * 86400.0 + j * 86400.0 / jobs;
    RunRow r;
    r.node = "dtn1", r.run = fmt::format("xferd/{}/{}", day * jobs + j, int64_t(start * 1000)), r.tool = "xferd";
    r.policy = "everyday", r.algorithm = "max-throughput", r.source_origin = path.origin, r.dest_host = "dtn1";
    r.link_mbps = path.link_mbps, r.link_source = "configured";
    r.handshake_rtt_ms = path.rtt_ms * (1 + 0.02 * (u(rng) - 0.5)), r.loss_pct = path.loss_pct;
    r.files = int64_t(shape.files), r.bytes = int64_t(shape.files * shape.size), r.size_mean = shape.size;
    r.size_sd = 0.3 * shape.size, r.cores_present = 2, r.started_unix = start;
    r.outcome = u(rng) < 0.03 ? "failed" : "done";
    const double load = 0.3 * u(rng);
    double t = 0;
    int64_t seq = 0;
    const int blocks = 1 + int(rng() % 3);
    for (int b = 0; b < blocks; ++b) {
      const int cc = ccs[rng() % 5], p = ps[rng() % 3], pp = pps[rng() % 3];
      // Per connection: a window of 4 MB over the RTT, Mathis past loss;
      // requests in flight help small files; the link less the load caps.
      const double per = std::min(4e6 * 8 / (path.rtt_ms / 1e3) / 1e6, 1.22 * 1460 * 8 / (path.rtt_ms / 1e3) /
                                                                            std::sqrt(path.loss_pct / 100) / 1e6);
      const double want = per * cc * p * (shape.size < 1e6 ? std::min(3.0, 1 + std::log2(double(pp)) / 2) : 1);
      const double mbps = std::min(path.link_mbps * (1 - load) * 0.95, want);
      const int n = 3 + int(rng() % 6);
      for (int k = 0; k < n; ++k, ++seq) {
        IntervalRow i;
        i.node = r.node, i.run = r.run, i.seq = seq, i.chunk = 0, i.interval_s = 1 + double(rng() % 5);
        t += i.interval_s;
        i.t_unix = start + t, i.t_s = t, i.settling = k == 0, i.chunk_kind = shape.size < 1e6 ? "small" : "large";
        const double m = std::max(0.1, mbps * noise(rng));
        i.throughput_bps = i.job_throughput_bps = m * 1e6;
        i.bytes_interval = int64_t(m * 1e6 / 8 * i.interval_s);
        i.dynamic_joules = i.interval_s * (2 + 0.3 * cc * p + m / 200), i.joules = *i.dynamic_joules + 22 * i.interval_s;
        i.energy_source = "model:cpu", i.ext_load = load, i.cpu_pct = 20, i.cores = 2;
        i.cc = cc, i.p = p, i.pp = pp, i.chunk_files = r.files, i.chunk_bytes = r.bytes;
        i.chunk_size_mean = r.size_mean, i.chunk_size_sd = r.size_sd, i.reason = "everyday";
        rows.push_back(std::move(i));
      }
    }
    r.finished_unix = start + t;
    h.put_run(r);
  }
  h.append(rows);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xfer-history-year: a made-up year of a busy DTN's history, compacted nightly, analysis timed"};
  std::string history, out;
  int days = 365, jobs = 1000;
  std::vector<int> analyze_on{1, 7, 30, 90, 180, 365};
  bool no_compact = false;
  xfer::hla::Retention keep;
  app.add_option("--history", history, "the SQLite history to make (must not exist)")->required();
  app.add_option("--days", days)->capture_default_str()->check(CLI::Range(1, 3650));
  app.add_option("--jobs-per-day", jobs)->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--analyze-on", analyze_on, "days after which analyze is timed")->delimiter(',');
  app.add_option("--keep-days", keep.keep_days)->capture_default_str();
  app.add_option("--keep-rows", keep.keep_rows)->capture_default_str();
  app.add_option("--half-life-days", keep.half_life_days)->capture_default_str();
  app.add_flag("--no-compact", no_compact, "never fold (the history as it grew before)");
  app.add_option("--out", out, "the CSV to write")->required();
  CLI11_PARSE(app, argc, argv);
  struct stat st {};
  if (::stat(history.c_str(), &st) == 0) {
    fmt::print(stderr, "xfer-history-year: {} exists; give a new path\n", history);
    return 2;
  }
  std::set<int> on(analyze_on.begin(), analyze_on.end());
  std::ofstream csv(out);
  csv << "day,jobs,runs_left,rows_left,folded_rows,history_mb,compact_s,read_s,analyze_s,samples,strata\n";
  std::mt19937_64 rng(55);
  const double t0 = 1.8e9;
  auto h = xfer::hla::open_history(history);
  for (int d = 1; d <= days; ++d) {
    day_of_jobs(*h, rng, d - 1, jobs, t0);
    double compact_s = 0;
    xfer::hla::CompactReport c;
    if (!no_compact) {
      auto t = std::chrono::steady_clock::now();
      c = xfer::hla::compact(*h, keep, t0 + d * 86400.0);
      compact_s = seconds_since(t);
    }
    if (!on.count(d)) continue;
    auto t = std::chrono::steady_clock::now();
    xfer::hla::HistoryData data = h->read();
    const double read_s = seconds_since(t);
    t = std::chrono::steady_clock::now();
    xfer::hla::Analysis a = xfer::hla::analyze(data, history, 12, 1);
    const double analyze_s = seconds_since(t);
    std::string row = fmt::format("{},{},{},{},{},{:.1f},{:.2f},{:.2f},{:.2f},{},{}", d, int64_t(d) * jobs,
                                  data.runs.size(), data.intervals.size(), data.folded.size(), file_mb(history),
                                  compact_s, read_s, analyze_s, a.pre.samples.size(), a.table.strata.size());
    csv << row << "\n" << std::flush;
    fmt::print("{}\n", row);
    std::fflush(stdout);
  }
  return 0;
}
