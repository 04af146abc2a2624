#include "contention.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "measure.h"
#include "report.h"
#include "xfer/arbiter.h"
#include "xfer/job_set.h"
#include "xfer/manifest.h"
#include "xfer/stats.h"
#include "xfer/text.h"

namespace fs = std::filesystem;

namespace bench {

namespace {

struct Series {
  double start_s = 0;
  std::vector<double> t, mbps, allotted;  // t: since the set started
};

// A job's intervals, on the set's clock, without its tail (the last interval
// and those near the end drain).
Series series_of(const nlohmann::json& report, double start_s) {
  Series s;
  s.start_s = start_s;
  const auto& tl = report["timeline"];
  for (size_t i = 0; i + 1 < tl.size(); ++i) {
    if (tl[i].value("near_end", false)) continue;
    s.t.push_back(start_s + tl[i]["t"].get<double>());
    s.mbps.push_back(tl[i]["throughput_mbps"].get<double>());
    s.allotted.push_back(tl[i].value("allotted_mbps", 0.0));
  }
  return s;
}

// The median, NaN for none (a goal no job of the scenario names).
double median_or_nan(const std::vector<double>& v) { return v.empty() ? NAN : xfer::median(v); }

// Runs the jobs (each at its start_s; sequential: one after another, each
// alone) in the link's client namespace, in a child process; the result of
// xfer::run_job_set (or, sequential, {"runs": [one per job]}).
nlohmann::json run_set(const Scenario& sc, const std::vector<PreparedDataset>& datasets, const LinkProcess& link,
                       const std::string& work, const std::string& dest_root, bool sequential) {
  fs::create_directories(work);
  const std::string out = work + (sequential ? "/sequential.json" : "/together.json");
  const std::string base = "http://" + link.server_ip + ":8080/";
  pid_t pid = fork();
  if (pid == 0) {
    int ns = open(("/run/netns/" + link.client_ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(3);
    auto spec_of = [&](size_t i) {
      const SetJobSpec& j = sc.jobs[i];
      const PreparedDataset& d = datasets[j.dataset];
      std::string manifest;
      for (const auto& f : d.files) manifest += base + d.id + "/" + f.name + " " + std::to_string(f.size) + "\n";
      xfer::EngineOptions opts;
      opts.interval_ms = 1000;
      opts.bandwidth_mbps = sc.link.rate_mbps;
      const std::string dest = dest_root + "/" + j.name;
      fs::remove_all(dest);
      fs::create_directories(dest);
      xfer::ScheduledRun s;
      s.spec.id = uint32_t(i + 1);
      s.spec.algorithm = j.algorithm;
      s.spec.tuner.target_mbps = j.target_mbps;
      s.spec.claim = xfer::LinkClaim{0, j.user, xfer::job_class_from(j.cls).value_or(xfer::JobClass::Normal)};
      s.spec.job = xfer::Job::Spec{xfer::parse_manifest(manifest, j.name), dest, opts};
      s.start_s = sequential ? 0 : j.start_s;
      return s;
    };
    xfer::SetOptions so;
    so.capacity_bps = sc.link.rate_mbps * 1e6;
    so.kernel_state = work + "/kernel-state.json";
    nlohmann::json result;
    try {
      if (sequential) {
        for (size_t i = 0; i < sc.jobs.size(); ++i) result["runs"].push_back(xfer::run_job_set({spec_of(i)}, so));
      } else {
        std::vector<xfer::ScheduledRun> all;
        for (size_t i = 0; i < sc.jobs.size(); ++i) all.push_back(spec_of(i));
        result = xfer::run_job_set(std::move(all), so);
      }
    } catch (const std::exception& e) {
      result = {{"error", e.what()}};
    }
    std::ofstream(out) << result.dump();
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  std::ifstream in(out);
  nlohmann::json r = nlohmann::json::parse(in, nullptr, false);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || r.is_discarded() || r.contains("error"))
    throw std::runtime_error(fmt::format("the {} set failed (child status {}): {}", sequential ? "sequential" : "concurrent",
                                         st, r.is_discarded() ? "no result" : r.value("error", std::string("no result"))));
  return r;
}

// One repeat's figures against the goals.
struct Figures {
  double floor_met = NAN;       // share of the floor job's intervals after its first two at >= 95% of its floor
  // Issue 54's (floor_figures, as the client goals judge a floor): the
  // share of them within [1.0, 1.15] of the floor, its tail included, and
  // their average over the floor.
  double floor_within = NAN, floor_avg = NAN;
  double bulk_share = NAN;      // median over the bulk job's capped intervals of what it moved over its allotment
  double bg_alone = NAN;        // the background job alone: its mean over the link's usable rate
  double bg_yield = NAN;        // intervals from the first other job's start until it moved under 10% of that
  double jain_users = NAN;      // the "equal" jobs' users' mean throughputs while all run
  double jpg_together = NAN, jpg_sequential = NAN;
  double seconds_together = NAN, seconds_sequential = NAN;
};

Figures judge(const Scenario& sc, const nlohmann::json& together, const nlohmann::json& seq, uint64_t bytes) {
  Figures f;
  std::vector<Series> s;
  for (size_t i = 0; i < sc.jobs.size(); ++i) s.push_back(series_of(together["jobs"][i], sc.jobs[i].start_s));
  const double usable = sc.link.rate_mbps * xfer::ArbiterConfig{}.goodput;
  for (size_t i = 0; i < sc.jobs.size(); ++i) {
    const SetJobSpec& j = sc.jobs[i];
    const Series& me = s[i];
    if (j.goal == "floor") {
      int met = 0, n = 0;
      for (size_t k = 2; k < me.mbps.size(); ++k) ++n, met += me.mbps[k] >= 0.95 * j.target_mbps;
      if (n) f.floor_met = double(met) / n;
      std::vector<double> t_end, rate;
      for (const auto& e : together["jobs"][i]["timeline"])
        t_end.push_back(e.value("t", 0.0)), rate.push_back(e.value("throughput_mbps", 0.0));
      const FloorFigures ff = floor_figures(t_end, rate, j.target_mbps);
      f.floor_within = ff.held, f.floor_avg = ff.avg;
    } else if (j.goal == "bulk") {
      std::vector<double> r;
      for (size_t k = 0; k < me.mbps.size(); ++k)
        if (me.allotted[k] > 0) r.push_back(me.mbps[k] / me.allotted[k]);
      f.bulk_share = median_or_nan(r);
    } else if (j.goal == "background") {
      double first_other = INFINITY;
      for (size_t o = 0; o < sc.jobs.size(); ++o)
        if (o != i && sc.jobs[o].start_s > j.start_s) first_other = std::min(first_other, sc.jobs[o].start_s);
      double sum = 0;
      int n = 0;
      for (size_t k = 1; k < me.t.size(); ++k)
        if (me.t[k] <= first_other) sum += me.mbps[k], ++n;
      if (n) f.bg_alone = sum / n / usable;
      // Interval ends after the other job's start: the first under 10% of
      // what it had alone (its first interval may be mostly before the start).
      int k0 = -1;
      for (size_t k = 0; k < me.t.size(); ++k)
        if (me.t[k] > first_other) {
          if (k0 < 0) k0 = int(k);
          if (n && me.mbps[k] < 0.1 * sum / n) {
            f.bg_yield = double(int(k) - k0 + 1);
            break;
          }
        }
    }
  }
  // Equal users: their jobs' sums per second while every "equal" job runs.
  std::map<uint32_t, std::map<int, double>> users;
  std::vector<size_t> eq;
  for (size_t i = 0; i < sc.jobs.size(); ++i)
    if (sc.jobs[i].goal == "equal") eq.push_back(i);
  if (eq.size() >= 2) {
    std::map<int, int> seen;
    for (size_t i : eq)
      for (size_t k = 0; k < s[i].t.size(); ++k) {
        const int sec = int(std::lround(s[i].t[k]));
        users[sc.jobs[i].user][sec] += s[i].mbps[k];
        ++seen[sec];
      }
    std::vector<double> means;
    for (const auto& [u, by] : users) {
      double sum = 0;
      int n = 0;
      for (const auto& [sec, v] : by)
        if (seen[sec] == int(eq.size()) && sec >= 3) sum += v, ++n;
      if (n) means.push_back(sum / n);
    }
    if (means.size() == users.size()) f.jain_users = xfer::jain_index(means);
  }
  const double gb = double(bytes) / 1e9;
  f.jpg_together = together["machine_joules"].get<double>() / gb;
  f.seconds_together = together["seconds"].get<double>();
  double seq_j = 0, seq_s = 0;
  for (const auto& r : seq["runs"]) seq_j += r["machine_joules"].get<double>(), seq_s += r["seconds"].get<double>();
  f.jpg_sequential = seq_j / gb;
  f.seconds_sequential = seq_s;
  return f;
}

std::string timeline_svg(const Scenario& sc, const nlohmann::json& together, const std::string& commit) {
  SvgFrame fr;
  fr.W = 820, fr.L = 60, fr.R = 230;
  std::vector<Series> s;
  double max_t = 1, max_y = sc.link.rate_mbps;
  for (size_t i = 0; i < sc.jobs.size(); ++i) {
    s.push_back(series_of(together["jobs"][i], sc.jobs[i].start_s));
    for (size_t k = 0; k < s.back().t.size(); ++k) max_t = std::max(max_t, s.back().t[k]), max_y = std::max(max_y, s.back().mbps[k]);
  }
  fr.max_x = std::ceil(max_t / 5) * 5, fr.max_y = std::ceil(max_y * 1.1 / 50) * 50;
  std::vector<std::string> labels;
  for (const SetJobSpec& j : sc.jobs)
    labels.push_back(fmt::format("— {} ({}, {}{})", j.name, j.algorithm, j.cls,
                                 j.target_mbps > 0 ? fmt::format(", floor {:.0f}", j.target_mbps) : ""));
  fr.fit_legend(labels);
  std::ostringstream o;
  o << fr.open(fmt::format("{}: each job's throughput per 1-s interval (floors dashed), commit {}", sc.name, commit),
               "time since the first job started, s", "throughput, Mbit/s");
  for (size_t i = 0; i < sc.jobs.size(); ++i) {
    const char* c = svg_color(int(i));
    const Series& me = s[i];
    std::string pts;
    for (size_t k = 0; k < me.t.size(); ++k) pts += fmt::format("{:.1f},{:.1f} ", fr.X(me.t[k]), fr.Y(me.mbps[k]));
    o << fmt::format(R"s(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>)s", pts, c) << "\n";
    if (sc.jobs[i].target_mbps > 0 && !me.t.empty())
      o << fmt::format(R"s(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-dasharray="6 4"/>)s",
                       fr.X(me.start_s), fr.Y(sc.jobs[i].target_mbps), fr.X(me.t.back()), fr.Y(sc.jobs[i].target_mbps), c)
        << "\n";
    o << fmt::format(R"s(<text x="{}" y="{}" fill="{}">{}</text>)s", fr.legend_x(), fr.legend_y(int(i)), c,
                     xfer::xml_escape(labels[i]))
      << "\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string pct(double x) { return std::isnan(x) ? "-" : fmt::format("{:.0f}%", x * 100); }
const char* verdict(bool ok) { return ok ? "**met**" : "**missed**"; }

}  // namespace

int run_contention(const Scenario& sc, const std::vector<PreparedDataset>& datasets, const LinkProcess& link,
                   const std::string& out, const std::string& dest_root, int repeat, const std::string& commit,
                   volatile std::sig_atomic_t* stop) {
  uint64_t bytes = 0;
  for (const auto& j : sc.jobs) bytes += datasets[j.dataset].bytes;
  nlohmann::json all = nlohmann::json::array();
  std::vector<Figures> figs;
  for (int rep = 1; rep <= repeat && !*stop; ++rep) {
    const std::string work = fmt::format("{}/work/contention-r{}", out, rep);
    try {
      fmt::print(stderr, "xfer-bench: {} #{}: {} jobs together\n", sc.name, rep, sc.jobs.size());
      nlohmann::json together = run_set(sc, datasets, link, work, dest_root, false);
      // Every byte checked, then the files go (the sequential runs write them again).
      for (size_t i = 0; i < sc.jobs.size(); ++i) {
        uint64_t ok = 0;
        const auto& d = datasets[sc.jobs[i].dataset];
        size_t n = verify_files(dest_root + "/" + sc.jobs[i].name, d.files, &ok);
        if (n != d.files.size() || together["jobs"][i]["state"] != "done")
          throw std::runtime_error(fmt::format("job {}: {} of {} files verified ({})", sc.jobs[i].name, n,
                                               d.files.size(), together["jobs"][i]["state"].dump()));
      }
      fmt::print(stderr, "xfer-bench: {} #{}: the same jobs one after another\n", sc.name, rep);
      nlohmann::json seq = run_set(sc, datasets, link, work, dest_root, true);
      figs.push_back(judge(sc, together, seq, bytes));
      all.push_back({{"repeat", rep}, {"together", together}, {"sequential", seq}});
      if (rep == 1) std::ofstream(out + "/timeline-contention.svg") << timeline_svg(sc, together, commit);
      const Figures& f = figs.back();
      fmt::print(stderr,
                 "xfer-bench: #{}: floor met {}, bulk {} of its allotment, background alone {} / yields in {} "
                 "intervals, Jain {:.3f}, J/GB {:.1f} together vs {:.1f} one after another\n",
                 rep, pct(f.floor_met), pct(f.bulk_share), pct(f.bg_alone), f.bg_yield, f.jain_users, f.jpg_together,
                 f.jpg_sequential);
    } catch (const std::exception& e) {
      fmt::print(stderr, "xfer-bench: {} #{}: {}\n", sc.name, rep, e.what());
      return 1;
    }
  }
  std::ofstream(out + "/contention.json") << all.dump(1);
  if (figs.empty()) return 1;
  auto med = [&](double Figures::*m) {
    std::vector<double> v;
    for (const auto& f : figs)
      if (!std::isnan(f.*m)) v.push_back(f.*m);
    return median_or_nan(v);
  };
  auto each = [&](double Figures::*m, bool as_pct) {
    std::string s;
    for (const auto& f : figs) s += (s.empty() ? "" : ", ") + (as_pct ? pct(f.*m) : fmt::format("{:.3g}", f.*m));
    return s;
  };
  std::ostringstream md;
  md << "# " << sc.name << ": jobs together on one arbiter\n\n"
     << "Measured at commit " << commit << ". " << sc.link.rate_mbps << " Mbit/s, " << sc.link.rtt_ms
     << " ms RTT; 1-s intervals; the jobs run in one process as xferd runs them (xfer::run_job_set); energy from "
     << all[0]["together"].value("source", std::string("?")) << ". Medians of " << figs.size()
     << " repeats (each repeat's figure in brackets). Plot: timeline-contention.svg (repeat 1).\n\n"
     << "| goal | measured | target | met |\n|---|---|---|---|\n";
  const double fm = med(&Figures::floor_met), bs = med(&Figures::bulk_share), ba = med(&Figures::bg_alone),
               by = med(&Figures::bg_yield), ju = med(&Figures::jain_users);
  if (!std::isnan(fm))
    md << fmt::format("| floor job: intervals after its first two at >= 95% of its floor | {} ({}) | >= 95% | {} |\n",
                      pct(fm), each(&Figures::floor_met, true), verdict(fm >= 0.95));
  const double fw = med(&Figures::floor_within), fa = med(&Figures::floor_avg);
  if (!std::isnan(fw))
    md << fmt::format("| floor job: intervals after its first two within [1.0, 1.15] of its floor, tail included | {} "
                      "({}) | >= 95% | {} |\n",
                      pct(fw), each(&Figures::floor_within, true), verdict(fw >= 0.95));
  if (!std::isnan(fa))
    md << fmt::format("| floor job: its average after its first two intervals over its floor | {:.2f}x ({}) | "
                      "1.0-1.15x | {} |\n",
                      fa, each(&Figures::floor_avg, false), verdict(fa >= 1.0 && fa <= kFloorBand));
  if (!std::isnan(bs))
    md << fmt::format("| bulk job: what it moved of its allotment (what the floors leave), median interval | {} ({}) | "
                      ">= 90% | {} |\n",
                      pct(bs), each(&Figures::bulk_share, true), verdict(bs >= 0.9));
  if (!std::isnan(ba))
    md << fmt::format("| background job alone: share of the link's usable rate | {} ({}) | >= 80% | {} |\n", pct(ba),
                      each(&Figures::bg_alone, true), verdict(ba >= 0.8));
  if (!std::isnan(by))
    md << fmt::format("| background job: intervals until it gives the link back | {:.0f} ({}) | <= 2 | {} |\n", by,
                      each(&Figures::bg_yield, false), verdict(by <= 2));
  if (!std::isnan(ju))
    md << fmt::format("| equal users: Jain's index of their shares | {:.3f} ({}) | >= 0.95 | {} |\n", ju,
                      each(&Figures::jain_users, false), verdict(ju >= 0.95));
  const double jt = med(&Figures::jpg_together), js = med(&Figures::jpg_sequential);
  md << fmt::format("| joules per GB together / one after another | {:.1f} / {:.1f} = {:.2f}x | <= 1x | {} |\n", jt, js,
                    jt / js, verdict(jt <= js));
  md << fmt::format("\nWall time: together {:.1f} s, one after another {:.1f} s (medians).\n", med(&Figures::seconds_together),
                    med(&Figures::seconds_sequential));
  std::ofstream(out + "/summary.md") << md.str();
  fmt::print("{}", md.str());
  return 0;
}

}  // namespace bench
