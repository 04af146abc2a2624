#include "report.h"

#include "xfer/text.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>

namespace bench {
namespace {

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') in = false;
      else cur += c;
    } else if (c == '"') {
      in = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// The client's CPU seconds per GB with extra CPU seconds on top (the
// writeback after it, kernel threads); NaN when the run has no bytes or the
// extra was not kept.
double cpu_per_gb(const RunRow& r, double extra = 0) {
  return r.bytes && !std::isnan(extra) ? (r.client_cpu_s + extra) / (double(r.bytes) / 1e9) : NAN;
}

void push_kept(std::vector<double>& v, double x) {
  if (!std::isnan(x)) v.push_back(x);
}

}  // namespace

std::string csv_header() {
  return "scenario,dataset,client,kind,repeat,exit_code,wall_s,bytes,files,files_ok,verified,throughput_mbps,"
         "client_cpu_s,server_cpu_s,client_j,server_j,j_per_gb,energy_source,goal,chosen,target_mbps,controlled_mbps,"
         "steady_mbps,core_s,end_j,end_j_per_gb,disk_s,writeback_cpu_s,kthread_cpu_s";
}

std::string csv_line(const RunRow& r) {
  auto num = [](double x) { return std::isnan(x) ? std::string() : fmt::format("{:.2f}", x); };
  auto num3 = [](double x) { return std::isnan(x) ? std::string() : fmt::format("{:.3f}", x); };
  return fmt::format("{},{},{},{},{},{},{:.3f},{},{},{},{},{:.2f},{:.3f},{:.3f},{:.2f},{:.2f},{:.2f},{},{},{},{},{},{},{},{},{},{},{},{}",
                     quote(r.scenario), quote(r.dataset), quote(r.client), quote(r.kind), r.repeat, r.exit_code,
                     r.wall_s, r.bytes, r.files, r.files_ok, r.verified ? 1 : 0, r.throughput_mbps, r.client_cpu_s,
                     r.server_cpu_s, r.client_j, r.server_j, r.j_per_gb, quote(r.energy_source), r.goal, num(r.chosen),
                     num(r.target_mbps), num(r.controlled_mbps), num(r.steady_mbps), num(r.core_s), num(r.end_j),
                     num(r.end_j_per_gb), num3(r.disk_s), num3(r.writeback_cpu_s), num3(r.kthread_cpu_s));
}

std::vector<RunRow> read_csv(const std::string& path) {
  std::vector<RunRow> rows;
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    auto v = split_csv(line);
    if (v.size() < 18) continue;
    RunRow r;
    r.scenario = v[0], r.dataset = v[1], r.client = v[2], r.kind = v[3];
    r.repeat = std::stoi(v[4]), r.exit_code = std::stoi(v[5]);
    r.wall_s = std::stod(v[6]), r.bytes = std::stoull(v[7]), r.files = std::stoull(v[8]), r.files_ok = std::stoull(v[9]);
    r.verified = v[10] == "1", r.throughput_mbps = std::stod(v[11]);
    r.client_cpu_s = std::stod(v[12]), r.server_cpu_s = std::stod(v[13]);
    r.client_j = std::stod(v[14]), r.server_j = std::stod(v[15]), r.j_per_gb = std::stod(v[16]);
    r.energy_source = v[17];
    if (v.size() >= 22) {
      auto num = [](const std::string& x) { return x.empty() ? NAN : std::stod(x); };
      r.goal = v[18], r.chosen = num(v[19]), r.target_mbps = num(v[20]), r.controlled_mbps = num(v[21]);
    }
    auto opt = [&](size_t i) { return v.size() > i && !v[i].empty() ? std::stod(v[i]) : NAN; };
    r.steady_mbps = opt(22), r.core_s = opt(23), r.end_j = opt(24), r.end_j_per_gb = opt(25), r.disk_s = opt(26),
    r.writeback_cpu_s = opt(27), r.kthread_cpu_s = opt(28);
    rows.push_back(r);
  }
  return rows;
}

std::vector<Summary> summarize(const std::vector<RunRow>& rows) {
  std::vector<Summary> out;
  std::map<std::pair<std::string, std::string>, std::vector<const RunRow*>> groups;
  for (const auto& r : rows) {
    auto key = std::make_pair(r.dataset, r.client);
    if (!groups.count(key)) {
      Summary s;
      s.dataset = r.dataset, s.client = r.client, s.kind = r.kind, s.peer = r.kind != "xferctl";
      out.push_back(s);
    }
    groups[key].push_back(&r);
  }
  for (auto& s : out) {
    std::vector<double> thr, wall, ccpu, scpu, cj, jpg, ejpg, cpg, disk, dcpg, kcpg;
    for (const RunRow* r : groups[{s.dataset, s.client}]) {
      ++s.runs;
      if (!r->verified) continue;  // a run that did not deliver every byte has no speed
      ++s.verified_runs;
      thr.push_back(r->throughput_mbps), wall.push_back(r->wall_s), ccpu.push_back(r->client_cpu_s);
      scpu.push_back(r->server_cpu_s), cj.push_back(r->client_j), jpg.push_back(r->j_per_gb);
      push_kept(ejpg, r->end_j_per_gb);
      push_kept(disk, r->disk_s);
      push_kept(cpg, cpu_per_gb(*r));
      push_kept(dcpg, cpu_per_gb(*r, r->writeback_cpu_s));
      push_kept(kcpg, cpu_per_gb(*r, r->kthread_cpu_s));
    }
    s.cpu_per_gb = median(cpg);
    s.disk_s = median(disk);
    s.cpu_per_gb_to_disk = median(dcpg);
    s.cpu_per_gb_kthreads = median(kcpg);
    s.throughput_mbps = median(thr), s.wall_s = median(wall), s.client_cpu_s = median(ccpu);
    s.server_cpu_s = median(scpu), s.client_j = median(cj), s.j_per_gb = median(jpg), s.end_j_per_gb = median(ejpg);
  }
  // Ratios against the best peer of the same dataset: highest throughput, lowest J/GB.
  for (auto& s : out) {
    double best_thr = 0, best_jpg = 0, best_end = 0;
    auto least = [](double& best, double x) {
      if (x > 0) best = best == 0 ? x : std::min(best, x);
    };
    for (const auto& p : out) {
      if (!p.peer || p.dataset != s.dataset || p.verified_runs == 0) continue;
      best_thr = std::max(best_thr, p.throughput_mbps);
      least(best_jpg, p.j_per_gb);
      least(best_end, p.end_j_per_gb);
    }
    s.thr_vs_best_peer = best_thr > 0 ? s.throughput_mbps / best_thr : 0;
    s.jpg_vs_best_peer = best_jpg > 0 && s.j_per_gb > 0 ? s.j_per_gb / best_jpg : 0;
    s.end_vs_best_peer = best_end > 0 && s.end_j_per_gb > 0 ? s.end_j_per_gb / best_end : 0;
  }
  return out;
}

std::string markdown(const std::string& scenario, const std::vector<Summary>& ss, const std::string& energy_source,
                     const std::string& setup, const std::string& commit) {
  std::ostringstream md;
  md << "# " << scenario << "\n\n";
  if (!commit.empty()) md << "Measured at commit " << commit << ".\n\n";
  md << "Medians over verified runs. Energy: " << energy_source
     << ". Dynamic: the model applied to every client's CPU time (client side). End-system: the idle draw of the "
        "online cores over the run's wall time plus the dynamic part. Ratios are against the best peer (curl, wget, "
        "aria2c) of the same dataset: throughput / best peer throughput, J/GB / the least J/GB among the peers "
        "(below 1 is better). s to disk: the wall time plus a sync made as soon as the client exits (xferctl syncs "
        "each file before naming it; the peers leave theirs to the kernel's writeback); CPU s/GB to disk adds the "
        "machine's CPU time over that sync (10-ms ticks); CPU s/GB + kernel threads adds every kernel thread's CPU "
        "time from the client's start to the end of that sync (the flusher's writeback of what a peer leaves dirty "
        "runs there while it runs; xferctl starts its own writeback in its own CPU time). The goals judge s and the "
        "client's own CPU.\n";
  if (!setup.empty()) md << "\nSetup: " << setup << ".\n";
  std::string current;
  for (const auto& s : ss) {
    if (s.dataset != current) {
      current = s.dataset;
      md << "\n## " << current << "\n\n"
         << "| client | runs ok | Mbit/s | s | s to disk | client CPU s | CPU s/GB | CPU s/GB to disk | CPU s/GB + kernel threads | "
            "server CPU s | J dynamic | J/GB dynamic | J/GB end-system | thr / best peer | dynamic / least peer | end-system / least "
            "peer |\n"
         << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    }
    auto opt = [](double x, const char* f) { return x > 0 ? fmt::format(fmt::runtime(f), x) : std::string("-"); };
    md << fmt::format("| {} | {}/{} | {:.1f} | {:.2f} | {} | {:.2f} | {} | {} | {} | {:.2f} | {:.1f} | {:.1f} | {} | {:.2f} | "
                      "{:.2f} | {} |\n",
                      s.client, s.verified_runs, s.runs, s.throughput_mbps, s.wall_s, opt(s.disk_s, "{:.2f}"), s.client_cpu_s,
                      opt(s.cpu_per_gb, "{:.2f}"), opt(s.cpu_per_gb_to_disk, "{:.2f}"),
                      opt(s.cpu_per_gb_kthreads, "{:.2f}"), s.server_cpu_s, s.client_j, s.j_per_gb,
                      opt(s.end_j_per_gb, "{:.1f}"), s.thr_vs_best_peer, s.jpg_vs_best_peer,
                      opt(s.end_vs_best_peer, "{:.2f}"));
  }
  return md.str();
}

std::string svg_plot(const std::string& title, const std::vector<Summary>& ss) {
  SvgFrame f;
  double max_x = 0, max_y = 0;
  for (const auto& s : ss) max_x = std::max(max_x, s.j_per_gb), max_y = std::max(max_y, s.throughput_mbps);
  f.max_x = xfer::nice_max(max_x * 1.05), f.max_y = xfer::nice_max(max_y * 1.05);
  std::vector<std::string> labels;
  for (const auto& pt : ss) labels.push_back(std::string(pt.peer ? "● " : "■ ") + pt.client);
  f.fit_legend(labels);
  std::ostringstream o;
  o << f.open(title, "energy, J/GB (model, client)", "throughput, Mbit/s");
  int i = 0;
  for (const auto& pt : ss) {
    const char* c = svg_color(i);
    double x = f.X(pt.j_per_gb), y = f.Y(pt.throughput_mbps);
    if (pt.peer)
      o << fmt::format(R"s(<circle cx="{:.1f}" cy="{:.1f}" r="6" fill="{}"/>)s", x, y, c) << "\n";
    else
      o << fmt::format(R"s(<rect x="{:.1f}" y="{:.1f}" width="12" height="12" fill="{}"/>)s", x - 6, y - 6, c) << "\n";
    o << fmt::format(R"s(<text x="{}" y="{}" fill="{}">{}</text>)s", f.legend_x(), f.legend_y(i), c,
                     xfer::xml_escape(labels[size_t(i)]))
      << "\n";
    ++i;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace bench

namespace bench {

std::vector<std::string> datasets_of(const std::vector<RunRow>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (std::find(out.begin(), out.end(), r.dataset) == out.end()) out.push_back(r.dataset);
  return out;
}

std::vector<ClientRuns> verified_by_client(const std::vector<RunRow>& rows, const std::string& dataset) {
  std::vector<ClientRuns> out;
  for (const auto& r : rows) {
    if (r.dataset != dataset || !r.verified || r.bytes == 0) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const ClientRuns& c) { return c.client == r.client; });
    if (it == out.end()) it = out.insert(out.end(), {r.client, {}});
    it->runs.push_back(&r);
  }
  return out;
}

FloorFigures floor_figures(const std::vector<double>& t_end, const std::vector<double>& mbps, double target_mbps) {
  FloorFigures f;
  if (!(target_mbps > 0) || t_end.size() <= 2 || mbps.size() != t_end.size()) return f;
  std::vector<double> dt;
  for (size_t k = 0; k < t_end.size(); ++k) dt.push_back(t_end[k] - (k ? t_end[k - 1] : 0));
  size_t end = t_end.size();
  if (dt.back() < 0.5 * median(dt)) --end;
  size_t in = 0;
  double bits = 0, secs = 0;
  for (size_t k = 2; k < end; ++k) {
    in += mbps[k] >= target_mbps && mbps[k] <= kFloorBand * target_mbps;
    bits += mbps[k] * dt[k], secs += dt[k];
  }
  if (end <= 2 || secs <= 0) return f;
  f.held = double(in) / double(end - 2);
  f.avg = bits / secs / target_mbps;
  return f;
}

std::string goals_markdown(const std::vector<RunRow>& rows, double link_mbps) {
  std::ostringstream md;
  md << "\n## Goals\n\nMedians over verified runs; energy as above (model): dynamic from the client's CPU, "
        "end-system adds the online cores' idle draw over the run. CPU/GB: client CPU seconds per GB. min-energy "
        "(issue 16): dynamic <= 1.0x and end-system <= 0.6x the least peer's. engine (issue 16): CPU/GB <= 1.0x "
        "curl's on one large file, <= 1.0x curl --parallel's on more files (the same shape: files in flight at "
        "once), at no less throughput (within 3%).\n";
  auto yes = [](bool ok) { return ok ? "**met**" : "**missed**"; };
  for (const auto& d : datasets_of(rows)) {
    // Per client: medians of throughput, J/GB, CPU/GB.
    struct Med {
      std::string kind, goal;
      std::vector<double> thr, jpg, ejpg, cpg, dcpg, kcpg, chosen, target, ctl, steady, held, held_avg;
      size_t files = 0;
      double mean_file = 0;
    };
    std::map<std::string, Med> by;
    std::vector<std::string> order;
    for (const ClientRuns& c : verified_by_client(rows, d)) {
      order.push_back(c.client);
      Med& m = by[c.client];
      for (const RunRow* r : c.runs) {
        m.kind = r->kind, m.goal = r->goal;
        m.thr.push_back(r->throughput_mbps), m.jpg.push_back(r->j_per_gb), m.files = r->files;
        push_kept(m.ejpg, r->end_j_per_gb);
        push_kept(m.cpg, cpu_per_gb(*r));
        push_kept(m.dcpg, cpu_per_gb(*r, r->writeback_cpu_s));
        push_kept(m.kcpg, cpu_per_gb(*r, r->kthread_cpu_s));
        push_kept(m.chosen, r->chosen);
        // A floor: throughput-target's target, or hla-throughput's floor.
        const double floor = r->target_mbps > 0 ? r->target_mbps : r->floor_mbps;
        push_kept(m.target, floor);
        push_kept(m.ctl, r->controlled_mbps);
        push_kept(m.steady, r->steady_mbps);
        std::vector<double> t_end, rate;
        for (const IntervalPoint& p : r->timeline) t_end.push_back(p.t_s), rate.push_back(p.mbps);
        const FloorFigures ff = floor_figures(t_end, rate, floor);
        push_kept(m.held, ff.held);
        push_kept(m.held_avg, ff.avg);
        m.mean_file = r->files ? double(r->bytes) / double(r->files) : 0;
      }
    }
    double best_thr = 0, min_jpg = 0, min_cpg = 0, min_end = 0;
    std::string best_peer, jpg_peer, cpg_peer, end_peer;
    for (auto& [name, m] : by) {
      if (m.kind == "xferctl") continue;
      double t = median(m.thr), j = median(m.jpg), c = median(m.cpg), e = median(m.ejpg);
      if (t > best_thr) best_thr = t, best_peer = name;
      if (min_jpg == 0 || j < min_jpg) min_jpg = j, jpg_peer = name;
      if (min_cpg == 0 || c < min_cpg) min_cpg = c, cpg_peer = name;
      if (e > 0 && (min_end == 0 || e < min_end)) min_end = e, end_peer = name;
    }
    md << "\n### " << d << "\n\n";
    if (best_peer.empty()) {
      md << "No peer ran on this dataset.\n";
      continue;
    }
    md << fmt::format("Best peer throughput: {} {:.1f} Mbit/s. Least energy among peers: dynamic {} {:.1f} J/GB, "
                      "end-system {} {:.1f} J/GB; least CPU: {} {:.2f} s/GB.\n\n| goal | client | figure | target | "
                      "result |\n|---|---|---|---|---|\n",
                      best_peer, best_thr, jpg_peer, min_jpg, end_peer.empty() ? "-" : end_peer, min_end, cpg_peer,
                      min_cpg);
    // Brute-force sweep: the level with the most throughput per joule (least J/GB).
    double sweep_best = NAN, sweep_jpg = 0, step = 0;
    std::vector<double> sweep_levels;
    for (auto& [name, m] : by) {
      if (m.goal != "ee-sweep" || m.chosen.empty()) continue;
      double lvl = median(m.chosen), j = median(m.jpg);
      sweep_levels.push_back(lvl);
      if (std::isnan(sweep_best) || j < sweep_jpg) sweep_best = lvl, sweep_jpg = j;
    }
    std::sort(sweep_levels.begin(), sweep_levels.end());
    for (size_t i = 1; i < sweep_levels.size(); ++i)
      step = step == 0 ? sweep_levels[i] - sweep_levels[i - 1] : std::min(step, sweep_levels[i] - sweep_levels[i - 1]);
    for (const auto& name : order) {
      Med& m = by[name];
      double t = median(m.thr), j = median(m.jpg), c = median(m.cpg);
      if (m.goal == "max-throughput") {
        // Whole run (bytes over wall time, start-up included) and sustained
        // (median interval); the link goal is judged on both, the peer goal
        // on the whole run, as the peers are measured.
        double st = median(m.steady);
        bool whole = t >= 0.9 * link_mbps, sustained = st >= 0.9 * link_mbps, beats = t > best_thr;
        md << fmt::format("| max-throughput | {} | whole run {:.1f} Mbit/s = {:.0f}% of link; sustained {:.1f} = {:.0f}%; "
                          "{:.2f}x best peer | >= 90% of {:.0f}; > {:.1f} | link: whole run {}, sustained {}; peers: "
                          "{} |\n",
                          name, t, t / link_mbps * 100, st, st / link_mbps * 100, t / best_thr, link_mbps, best_thr,
                          yes(whole), yes(sustained), yes(beats));
      } else if (m.goal == "min-energy") {
        double e = median(m.ejpg);
        bool dyn_ok = j <= min_jpg, end_ok = min_end > 0 && e > 0 && e <= 0.6 * min_end;
        // CPU per byte against the leanest peer (issue 54): 0.9x on small
        // files (a mean under 200 kB), 1.0x on the rest.
        const double cpu_bound = m.mean_file < 200e3 ? 0.9 : 1.0;
        md << fmt::format("| min-energy | {} | dynamic {:.1f} J/GB ({:.2f}x), end-system {} ({}), {:.2f} CPU s/GB "
                          "({:.2f}x {}), {:.1f} Mbit/s | dynamic <= {:.1f}; end-system <= {:.1f}; CPU <= {:.1f}x | "
                          "dynamic {}, end-system {}, CPU {} |\n",
                          name, j, j / min_jpg, e > 0 ? fmt::format("{:.1f} J/GB", e) : "-",
                          min_end > 0 && e > 0 ? fmt::format("{:.2f}x", e / min_end) : "-", c, c / min_cpg, cpg_peer, t,
                          min_jpg, 0.6 * min_end, cpu_bound, yes(dyn_ok), yes(end_ok), yes(c <= cpu_bound * min_cpg));
      } else if (m.goal == "floor") {
        const double tg = median(m.target);
        if (m.held.empty() && tg > 0) {
          // The job ended within its first two intervals (the daemon's 5 s
          // against a job of seconds): its start decided all of it, and its
          // average over the run is what is judged.
          const bool ok = t >= tg && t <= kFloorBand * tg;
          md << fmt::format("| floor | {} | ended within its first two intervals: whole run {:.1f} Mbit/s ({:.2f}x the "
                            "floor); {:.2f} CPU s/GB ({:.2f}x {}) | within [1.0, 1.15] x {:.0f} | {} |\n",
                            name, t, t / tg, c, c / min_cpg, cpg_peer, tg, yes(ok));
          continue;
        }
        const double held = median(m.held), avg = median(m.held_avg);
        const bool avg_ok = avg >= 1.0 && avg <= kFloorBand, held_ok = held >= 0.95;
        std::string runs;
        for (size_t k = 0; k < m.held.size(); ++k)
          runs += (runs.empty() ? "" : ", ") + fmt::format("{:.0f}% at {:.2f}x", m.held[k] * 100,
                                                            k < m.held_avg.size() ? m.held_avg[k] : NAN);
        md << fmt::format("| floor | {} | after the first two intervals: average {:.2f}x the floor, {:.0f}% of "
                          "intervals within [1.0, 1.15] (runs: {}); whole run {:.1f} Mbit/s ({:.2f}x); {:.2f} CPU "
                          "s/GB ({:.2f}x {}) | average within [1.0, 1.15] x {:.0f}, >= 95% of intervals | average "
                          "{}, intervals {} |\n",
                          name, avg, held * 100, runs, t, tg > 0 ? t / tg : NAN, c, c / min_cpg, cpg_peer, tg,
                          yes(avg_ok), yes(held_ok));
      } else if (m.goal == "engine") {
        const char* want = m.files == 1 ? "curl-seq" : "curl-parallel";
        std::string ref;
        for (auto& [pn, pm] : by)
          if (pm.kind == want && (ref.empty() || median(pm.cpg) < median(by[ref].cpg))) ref = pn;
        if (ref.empty()) {
          md << fmt::format("| engine | {} | {:.2f} CPU s/GB | no {} client ran | |\n", name, c, want);
          continue;
        }
        double rc = median(by[ref].cpg), rt = median(by[ref].thr);
        double dc = median(m.dcpg), drc = median(by[ref].dcpg);
        bool ok = c <= rc && t >= 0.97 * rt;
        double kc = median(m.kcpg), krc = median(by[ref].kcpg);
        std::string to_disk = dc > 0 && drc > 0 ? fmt::format("; to disk {:.2f} ({:.2f}x)", dc, dc / drc) : "";
        if (kc > 0 && krc > 0) to_disk += fmt::format("; + kernel threads {:.2f} ({:.2f}x)", kc, kc / krc);
        md << fmt::format("| engine | {} | {:.2f} CPU s/GB ({:.2f}x {}), {:.1f} Mbit/s ({:.2f}x){} | <= {:.2f} s/GB at "
                          ">= {:.1f} Mbit/s | {} |\n",
                          name, c, c / rc, ref, t, t / rt, to_disk, rc, 0.97 * rt, yes(ok));
      } else if (m.goal == "energy-efficient") {
        std::string runs;
        for (double x : m.chosen) runs += (runs.empty() ? "" : ", ") + fmt::format("{:g}", x);
        double ch = median(m.chosen);
        bool ok = !std::isnan(sweep_best) && !m.chosen.empty() && std::fabs(ch - sweep_best) <= step + 1e-9;
        md << fmt::format("| energy-efficient | {} | chose level {} (runs: {}); {:.1f} Mbit/s, {:.1f} J/GB | within one "
                          "step ({:g}) of the sweep's best, level {:g} ({:.1f} J/GB) | {} |\n",
                          name, m.chosen.empty() ? std::string("?") : fmt::format("{:g}", ch), runs, t, j, step,
                          sweep_best, sweep_jpg, yes(ok));
      } else if (m.goal == "ee-sweep") {
        md << fmt::format("| sweep | {} | level {:g}: {:.1f} Mbit/s, {:.1f} J/GB | | |\n", name,
                          m.chosen.empty() ? NAN : median(m.chosen), t, j);
      } else if (m.goal == "target") {
        double tg = median(m.target), ctl = median(m.ctl);
        if (!(ctl > 0)) {
          md << fmt::format("| throughput-target | {} | no interval under control (the run ended while measuring the "
                            "maximum); whole run {:.1f} Mbit/s | {:.1f} Mbit/s +-10% | **missed** |\n",
                            name, t, tg);
          continue;
        }
        bool ok = tg > 0 && std::fabs(ctl / tg - 1) <= 0.10;
        md << fmt::format("| throughput-target | {} | controlled {:.1f} Mbit/s ({:+.1f}%); whole run {:.1f} ({:+.1f}%), "
                          "{:.1f} J/GB | {:.1f} Mbit/s +-10% | {} |\n",
                          name, ctl, (ctl / tg - 1) * 100, t, (t / tg - 1) * 100, j, tg, yes(ok));
      }
    }
  }
  return md.str();
}

}  // namespace bench
