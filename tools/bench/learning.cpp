// A learning-curve scenario: see learning.h.
#include "learning.h"

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "xfer/stats.h"

namespace fs = std::filesystem;

namespace bench {

namespace {

// The rotating clients take turns: round k runs the ((k - 1) mod n)-th.
bool runs_in(const std::vector<ClientSpec>& clients, size_t ci, int round) {
  if (!clients[ci].rotate) return true;
  size_t n = 0, mine = 0;
  for (size_t i = 0; i < clients.size(); ++i)
    if (clients[i].rotate) {
      if (i == ci) mine = n;
      ++n;
    }
  return size_t(round - 1) % n == mine;
}

// The client's args with "{history}" and "{hla_table}" filled in; before
// the first table, "--hla-table {hla_table}" is left out (a cold start).
ClientSpec filled(ClientSpec c, const std::string& history, const std::string& table, bool have_table) {
  std::vector<std::string> a;
  for (size_t i = 0; i < c.args.size(); ++i) {
    std::string x = c.args[i];
    if (x == "--hla-table" && i + 1 < c.args.size() && c.args[i + 1] == "{hla_table}" && !have_table) {
      ++i;
      continue;
    }
    for (size_t at; (at = x.find("{history}")) != std::string::npos;) x.replace(at, 9, history);
    for (size_t at; (at = x.find("{hla_table}")) != std::string::npos;) x.replace(at, 11, table);
    a.push_back(x);
  }
  c.args = a;
  return c;
}

double med(const std::vector<double>& v) { return v.empty() ? NAN : xfer::median(v); }

// The first measured interval of a run: the one after the start's settling.
double first_interval(const RunRow& r) {
  if (r.timeline.size() >= 3) return r.timeline[1].mbps;
  return r.timeline.empty() ? NAN : r.timeline.front().mbps;
}

std::string signed_pct(double v) { return std::isfinite(v) ? fmt::format("{:+.0f}%", 100 * v) : "-"; }
std::string fig(double v, int digits = 1) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "-"; }

}  // namespace

int learning_runs(const LearningRun& lr) {
  int n = 0;
  for (int k = 1; k <= lr.sc.learning.rounds; ++k)
    for (size_t ci = 0; ci < lr.clients.size(); ++ci) n += runs_in(lr.clients, ci, k) ? int(lr.datasets.size()) : 0;
  return n * lr.repeat;
}

void run_learning(LearningRun& lr) {
  for (int curve = 1; curve <= lr.repeat && !*lr.stop; ++curve) {
    std::string dir = fmt::format("{}/learning/curve-{}", lr.out, curve);
    fs::remove_all(dir);  // every curve starts from an empty history
    fs::create_directories(dir);
    std::string history = dir + "/history.db", table = dir + "/table.json";
    for (int round = 1; round <= lr.sc.learning.rounds && !*lr.stop; ++round) {
      bool have_table = fs::exists(table);
      for (const PreparedDataset& d : lr.datasets)
        for (size_t ci = 0; ci < lr.clients.size() && !*lr.stop; ++ci)
          if (runs_in(lr.clients, ci, round)) lr.run(filled(lr.clients[ci], history, table, have_table), ci, d, curve, round);
      if (*lr.stop) break;
      // The table refreshed between rounds, as xferd-hla.timer would.
      LearningRun::Analysis a;
      a.curve = curve, a.round = round;
      Exec e = run_measured({lr.analyze_bin, "analyze", "--history", history, "--out", table},
                            fmt::format("{}/analyze-{}", dir, round), 600);
      a.exit_code = e.exit_code, a.seconds = e.wall_s;
      if (e.exit_code == 0) {
        std::ifstream f(table);
        auto j = nlohmann::json::parse(f, nullptr, false);
        if (!j.is_discarded() && j.contains("strata")) {
          a.strata = j["strata"].size();
          a.rows = j.value("rows_used", size_t(0));
          for (const auto& s : j["strata"]) (s.value("decided", "surfaces") == "surfaces" ? a.by_surfaces : a.by_measured) += 1;
        }
      }
      fmt::print(stderr, "xfer-bench: [learning] curve {} round {}: analyze exit {}, {} strata ({} by surfaces, {} by "
                 "measured settings) from {} rows, {:.1f} s\n", curve, round, a.exit_code, a.strata, a.by_surfaces,
                 a.by_measured, a.rows, a.seconds);
      lr.analyses.push_back(a);
    }
  }
}

std::string learning_markdown(const LearningRun& lr, const std::vector<RunRow>& rows) {
  const int rounds = lr.sc.learning.rounds;
  std::string md = fmt::format("\n## Learning curve ({} rounds, {} curves from an empty history; medians over the curves)\n\n",
                               rounds, lr.repeat);
  std::ofstream csv(lr.out + "/learning.csv");
  csv << "curve,round,dataset,client,first_interval_mbps,steady_mbps,throughput_mbps,j_per_gb,floor_mbps\n";
  for (const RunRow& r : rows)
    csv << fmt::format("{},{},{},\"{}\",{},{},{},{},{}\n", r.repeat, r.round, r.dataset, r.client, first_interval(r),
                       r.steady_mbps, r.throughput_mbps, r.j_per_gb, r.floor_mbps);
  // A scenario whose clients have no hla goal (floor-hla.toml: the floors
  // are judged by the goal table) has no curve to draw: its runs are in
  // learning.csv, by round.
  if (std::none_of(rows.begin(), rows.end(), [](const RunRow& r) { return r.goal.rfind("hla-", 0) == 0; }))
    return md + "No client has an hla goal: each run is in learning.csv, by curve and round; the goal table judges "
                "them.\n";
  auto of = [&](const std::string& dataset, auto pred) {
    std::vector<const RunRow*> v;
    for (const RunRow& r : rows)
      if (r.dataset == dataset && r.verified && pred(r)) v.push_back(&r);
    return v;
  };
  auto probe = [](const RunRow& r) { return r.goal == "hla-throughput" && !std::isfinite(r.floor_mbps); };
  auto floor_job = [](const RunRow& r) { return r.goal == "hla-throughput" && std::isfinite(r.floor_mbps); };
  std::map<std::string, std::vector<std::pair<int, double>>> curve_points;
  std::string goals;
  for (const PreparedDataset& d : lr.datasets) {
    // The best static setting's sustained rate, and the best peer's
    // throughput: each client's median over its runs, the best of them.
    double best_static = NAN, best_peer = NAN;
    std::string static_name, peer_name;
    std::map<std::string, std::vector<double>> st, peer;
    for (const RunRow* r : of(d.id, [](const RunRow& r) { return r.goal == "static"; }))
      if (std::isfinite(r->steady_mbps)) st[r->client].push_back(r->steady_mbps);
    for (const RunRow* r : of(d.id, [](const RunRow& r) { return r.kind != "xferctl"; })) peer[r->client].push_back(r->throughput_mbps);
    for (auto& [n, v] : st)
      if (!(med(v) <= best_static)) best_static = med(v), static_name = n;
    for (auto& [n, v] : peer)
      if (!(med(v) <= best_peer)) best_peer = med(v), peer_name = n;
    std::map<std::string, std::vector<double>> me_j, me_t;
    for (const RunRow* r : of(d.id, [](const RunRow& r) { return r.goal == "min-energy"; }))
      me_j["x"].push_back(r->j_per_gb), me_t["x"].push_back(r->throughput_mbps);
    double min_energy_j = med(me_j["x"]), min_energy_t = med(me_t["x"]);
    md += fmt::format("### {}\n\nbest static: {} sustaining {} Mbit/s; best peer: {} at {} Mbit/s; min-energy: {} J/GB at {} "
                      "Mbit/s\n\n",
                      d.id, static_name.empty() ? "-" : static_name, fig(best_static),
                      peer_name.empty() ? "-" : peer_name, fig(best_peer), fig(min_energy_j), fig(min_energy_t));
    md += "| round | hla-throughput first interval, Mbit/s | its distance to the best static | hla-throughput job, Mbit/s "
          "| x best peer | floor job vs its floor | hla-energy J/GB x min-energy | its throughput x min-energy |\n"
          "|---|---|---|---|---|---|---|---|\n";
    struct Last {
      double first = NAN, job = NAN, floor_over = NAN, e_ratio = NAN, e_t_ratio = NAN;
    } last;
    for (int k = 1; k <= rounds; ++k) {
      auto in_round = [&](auto pred) {
        return of(d.id, [&](const RunRow& r) { return r.round == k && pred(r); });
      };
      std::vector<double> first, job, over, ej, et;
      for (const RunRow* r : in_round(probe)) first.push_back(first_interval(*r)), job.push_back(r->throughput_mbps);
      for (const RunRow* r : in_round(floor_job)) over.push_back(r->throughput_mbps / r->floor_mbps - 1);
      for (const RunRow* r : in_round([](const RunRow& r) { return r.goal == "hla-energy"; }))
        ej.push_back(r->j_per_gb / min_energy_j), et.push_back(r->throughput_mbps / min_energy_t);
      Last now{med(first), med(job), med(over), med(ej), med(et)};
      double dist = now.first / best_static - 1;
      if (std::isfinite(dist)) curve_points[d.id].push_back({k, dist});
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", k, fig(now.first), signed_pct(dist), fig(now.job),
                        fig(now.job / best_peer, 2), signed_pct(now.floor_over), fig(now.e_ratio, 2), fig(now.e_t_ratio, 2));
      if (k == rounds) last = now;
    }
    md += "\n";
    auto verdict = [](bool ok, double v) { return std::isfinite(v) ? (ok ? "met" : "missed") : "not measured"; };
    double dist = last.first / best_static - 1;
    goals += fmt::format("| {} | first interval at least 90% of the best static's sustained rate (round {}) | {} | {} |\n",
                         d.id, rounds, signed_pct(dist), verdict(dist >= -0.10, dist));
    goals += fmt::format("| {} | the job >= 1.0x the best peer | {}x | {} |\n", d.id, fig(last.job / best_peer, 2),
                         verdict(last.job / best_peer >= 1.0, last.job / best_peer));
    goals += fmt::format("| {} | a floor lands within +15% of it | {} | {} |\n", d.id, signed_pct(last.floor_over),
                         verdict(last.floor_over >= 0 && last.floor_over <= 0.15, last.floor_over));
    goals += fmt::format("| {} | hla-energy J/GB <= 0.9x min-energy's at >= 0.95x its throughput | {}x at {}x | {} |\n",
                         d.id, fig(last.e_ratio, 2), fig(last.e_t_ratio, 2),
                         verdict(last.e_ratio <= 0.9 && last.e_t_ratio >= 0.95, last.e_ratio));
  }
  md += fmt::format("### Goals at round {} (medians over the curves)\n\n| dataset | goal | measured | |\n|---|---|---|---|\n{}\n",
                    rounds, goals);
  md += "### The table after each round\n\n| curve | round | analyze exit | strata | by surfaces | by measured settings | "
        "rows | seconds |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& a : lr.analyses)
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.1f} |\n", a.curve, a.round, a.exit_code, a.strata,
                      a.by_surfaces, a.by_measured, a.rows, a.seconds);
  // The curve: the first interval's distance to the best static, per round.
  const double W = 640, H = 360, L = 60, R = 20, T = 40, B = 50;
  double top = 0.1;
  for (auto& [id, pts] : curve_points)
    for (auto& [k, v] : pts) top = std::max(top, std::abs(v));
  auto x = [&](double k) { return L + (W - L - R) * (k - 1) / std::max(1, rounds - 1); };
  auto y = [&](double v) { return T + (H - T - B) * (1 - (v + top) / (2 * top)); };
  std::string svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' "
                                "font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
                                "<text x='{}' y='20'>{}: hla-throughput's first interval against the best static setting's "
                                "sustained rate, by job round</text>\n",
                                W, H, L, lr.sc.name);
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", L, y(0), W - R, y(0));
  for (double g : {-0.1, 0.1})
    svg += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#aaa' stroke-dasharray='4 3'/><text x='5' "
                       "y='{:.1f}'>{:+.0f}%</text>\n", L, y(g), W - R, y(g), y(g) + 4, 100 * g);
  svg += fmt::format("<text x='5' y='{:.1f}'>{:+.0f}%</text><text x='5' y='{:.1f}'>{:+.0f}%</text>\n", y(top) + 4, 100 * top,
                     y(-top) + 4, -100 * top);
  for (int k = 1; k <= rounds; ++k) svg += fmt::format("<text x='{:.1f}' y='{}'>{}</text>\n", x(k) - 4, H - B + 18, k);
  svg += fmt::format("<text x='{}' y='{}'>job round (the table analysed again after each)</text>\n", L, H - 12);
  const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  size_t c = 0;
  for (auto& [id, pts] : curve_points) {
    std::string path;
    for (auto& [k, v] : pts) path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", x(k), y(v));
    svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2' points='{}'/>\n", colours[c % 4], path);
    svg += fmt::format("<text x='{}' y='{}' fill='{}'>{}</text>\n", W - R - 200, T + 16 * double(c + 1), colours[c % 4], id);
    ++c;
  }
  svg += "</svg>\n";
  std::ofstream(lr.out + "/learning-curve.svg") << svg;
  return md;
}

}  // namespace bench
