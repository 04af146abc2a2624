#include "hla_report.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <sstream>

#include "report.h"
#include "xfer/text.h"

namespace bench {
namespace {

// Intervals 2 .. n-1, each with its start (job clock) and whether it begins
// within `after` intervals of a switch.
template <typename F>
void each_judged(const RunRow& r, const HlaContext& ctx, F f) {
  const auto& tl = r.timeline;
  for (size_t i = 1; i + 1 < tl.size(); ++i) {
    double start = tl[i - 1].t_s, len = tl[i].t_s - start;
    bool after = false;
    for (double s : ctx.switches_s) {
      double at = s - r.clock_offset_s;
      if (start >= at && start < at + ctx.after * len) after = true;
    }
    f(tl[i], after);
  }
}

std::string pct(int a, int b) { return b ? fmt::format("{}/{} ({:.0f}%)", a, b, 100.0 * a / b) : "none"; }
const char* yes(bool ok) { return ok ? "**met**" : "**missed**"; }

}  // namespace

int convergence_interval(const std::vector<IntervalPoint>& timeline, double target_mbps) {
  for (size_t i = 0; i < timeline.size(); ++i)
    if (timeline[i].mbps >= 0.9 * target_mbps) return int(i) + 1;
  return 0;
}

void Adherence::add(const Adherence& o) {
  if (!std::isnan(o.worst))
    worst = std::isnan(worst) ? o.worst : ceiling ? std::max(worst, o.worst) : std::min(worst, o.worst);
  intervals += o.intervals, met += o.met, after_switch += o.after_switch, after_met += o.after_met;
}

// The judged intervals whose ratio(interval) is within limit (at most, for a
// ceiling; at least, for a floor), and the worst ratio.
template <typename Ratio>
static Adherence judge(const RunRow& r, const HlaContext& ctx, bool ceiling, double limit, Ratio ratio) {
  Adherence a;
  a.ceiling = ceiling;
  each_judged(r, ctx, [&](const IntervalPoint& p, bool after) {
    double x = ratio(p);
    if (std::isnan(x)) return;
    bool ok = ceiling ? x <= limit : x >= limit;
    ++a.intervals, a.met += ok, a.after_switch += after, a.after_met += after && ok;
    a.worst = std::isnan(a.worst) ? x : ceiling ? std::max(a.worst, x) : std::min(a.worst, x);
  });
  return a;
}

Adherence floor_adherence(const RunRow& r, double floor_mbps, const HlaContext& ctx) {
  return judge(r, ctx, false, 1.0, [&](const IntervalPoint& p) { return p.mbps / floor_mbps; });
}

Adherence budget_adherence(const RunRow& r, double budget, double tolerance, const HlaContext& ctx) {
  // The ceiling bounds the energy hla-energy minimises: the dynamic energy
  // (the end system's where a timeline has no dynamic figure).
  return judge(r, ctx, true, 1 + tolerance, [&](const IntervalPoint& p) {
    return (std::isnan(p.dynamic_j_per_gb) ? p.j_per_gb : p.dynamic_j_per_gb) / budget;
  });
}

std::string hla_markdown(const std::vector<RunRow>& rows, const HlaContext& ctx) {
  std::ostringstream md;
  md << "\n## History against search (issue 15)\n\n"
        "Medians over verified runs. Best static: the `static` client of the sweep with the most whole-run throughput; "
        "its sustained rate (median interval) is the convergence target: an interval converges at >= 90% of it. "
        "Adherence: per interval after the first and without the last (the tail), pooled over the runs; "
        "\"after a switch\": the "
     << ctx.after
     << " intervals that begin right after the cross traffic changes (placed on the job's clock by the run's "
        "start-up time). Energy: the model on the client's CPU time, as above.\n";
  for (const auto& d : datasets_of(rows)) {
    struct Agg {
      std::string kind, goal;
      std::vector<const RunRow*> runs;
      double thr = 0, jpg = 0, steady = 0;
    };
    std::map<std::string, Agg> by;
    std::vector<std::string> order;
    for (ClientRuns& c : verified_by_client(rows, d)) {
      order.push_back(c.client);
      Agg& a = by[c.client];
      a.kind = c.runs.front()->kind, a.goal = c.runs.front()->goal;
      a.runs = std::move(c.runs);
    }
    for (auto& [name, a] : by) {
      std::vector<double> t, j, s;
      for (const RunRow* r : a.runs) {
        t.push_back(r->throughput_mbps), j.push_back(r->j_per_gb);
        if (!std::isnan(r->steady_mbps)) s.push_back(r->steady_mbps);
      }
      a.thr = median(t), a.jpg = median(j), a.steady = median(s);
    }
    // The references.
    std::string best_static, best_peer, least_peer, maxthr, mine;
    for (const auto& name : order) {
      const Agg& a = by[name];
      if (a.goal == "static" && (best_static.empty() || a.thr > by[best_static].thr)) best_static = name;
      if (a.kind != "xferctl" && (best_peer.empty() || a.thr > by[best_peer].thr)) best_peer = name;
      if (a.kind != "xferctl" && (least_peer.empty() || a.jpg < by[least_peer].jpg)) least_peer = name;
      if (a.goal == "max-throughput" && maxthr.empty()) maxthr = name;
      if (a.goal == "min-energy" && mine.empty()) mine = name;
    }
    md << "\n### " << d << "\n\n";
    // Without a static client (a run of some clients only: --client) the
    // rows that need none are still given: the SLAs' adherence and energy
    // against min-energy.
    const bool have_static = !best_static.empty();
    const Agg none;
    const Agg& bs = have_static ? by[best_static] : none;
    double target = bs.steady > 0 ? bs.steady : bs.thr;
    if (have_static)
      md << fmt::format("Best static: {} ({:.1f} Mbit/s whole run, {:.1f} sustained; convergence at >= {:.1f}).",
                        best_static, bs.thr, bs.steady, 0.9 * target);
    else
      md << "No static client ran: no reference to converge to; the rows below that need none.";
    if (!best_peer.empty())
      md << fmt::format(" Best peer: {} ({:.1f} Mbit/s). Least energy among peers: {} ({:.1f} J/GB).", best_peer,
                        by[best_peer].thr, least_peer, by[least_peer].jpg);
    md << "\n\n| client | runs | Mbit/s | x best static | x best peer | x max-throughput | J/GB | x min-energy | x least "
          "peer | converged at interval (runs) |\n|---|---|---|---|---|---|---|---|---|---|\n";
    auto ratio = [&](double x, const std::string& ref, bool energy) {
      if (ref.empty() || !by.count(ref)) return std::string("-");
      double y = energy ? by[ref].jpg : by[ref].thr;
      return y > 0 ? fmt::format("{:.2f}", x / y) : std::string("-");
    };
    std::map<std::string, double> conv;  // median convergence interval (0: never)
    for (const auto& name : order) {
      const Agg& a = by[name];
      std::string c = "-";
      if (a.kind == "xferctl" && have_static) {
        std::vector<double> at;
        std::string each;
        for (const RunRow* r : a.runs) {
          int k = convergence_interval(r->timeline, target);
          at.push_back(k ? k : 1e9);
          each += (each.empty() ? "" : ", ") + (k ? std::to_string(k) : std::string("never"));
        }
        double m = median(at);
        conv[name] = m >= 1e9 ? 0 : m;
        c = (m >= 1e9 ? std::string("never") : fmt::format("{:g}", m)) + " (" + each + ")";
      }
      md << fmt::format("| {} | {} | {:.1f} | {} | {} | {} | {:.1f} | {} | {} | {} |\n", name, a.runs.size(), a.thr,
                        ratio(a.thr, best_static, false), ratio(a.thr, best_peer, false), ratio(a.thr, maxthr, false),
                        a.jpg, ratio(a.jpg, mine, true), ratio(a.jpg, least_peer, true), c);
    }
    md << "\n| goal | client | figure | target | result |\n|---|---|---|---|---|\n";
    bool small_files = d.rfind("html", 0) == 0;
    for (const auto& name : order) {
      const Agg& a = by[name];
      double floor = NAN, budget = NAN;
      for (const RunRow* r : a.runs) {
        if (!std::isnan(r->floor_mbps)) floor = r->floor_mbps;
        if (!std::isnan(r->budget_j_per_gb)) budget = r->budget_j_per_gb;
        if (a.goal == "target" && !std::isnan(r->target_mbps)) floor = r->target_mbps;
      }
      if (have_static && (a.goal == "hla-throughput" || a.goal == "hla-energy")) {
        // The first interval holds the connections' set-up and slow start:
        // the best static itself may need more than one. "The first" is
        // read as: no later than the best static parameters set from the start.
        double k = conv[name], ks = conv[best_static];
        md << fmt::format("| convergence | {} | interval {} | the first (the best static's own: {}) | {} |\n", name,
                          k > 0 ? fmt::format("{:g}", k) : "never", ks > 0 ? fmt::format("{:g}", ks) : "never",
                          yes(k > 0 && (k == 1 || (ks > 0 && k <= ks))));
      }
      if (have_static && a.goal == "hla-throughput" && std::isnan(floor)) {
        double r = a.thr / bs.thr;
        md << fmt::format("| throughput vs best static | {} | {:.1f} / {:.1f} = {:.2f}x | >= 0.95x | {} |\n", name, a.thr,
                          bs.thr, r, yes(r >= 0.95));
        if (!maxthr.empty()) {
          double m = a.thr / by[maxthr].thr;
          md << fmt::format("| throughput vs {} | {} | {:.2f}x | >= 1.2x{} | {} |\n", maxthr, name, m,
                            small_files ? "" : " (small-file sets; shown)", small_files ? yes(m >= 1.2) : "-");
        }
      }
      if (a.goal == "hla-energy" && std::isnan(budget) && !mine.empty()) {
        const Agg& me = by[mine];
        double r = a.jpg / me.jpg;
        bool ok = r <= 0.8 && a.thr >= me.thr;
        md << fmt::format("| energy vs {} | {} | {:.1f} / {:.1f} J/GB = {:.2f}x at {:.1f} vs {:.1f} Mbit/s | <= 0.8x at no "
                          "less throughput | {} |\n",
                          mine, name, a.jpg, me.jpg, r, a.thr, me.thr, yes(ok));
      }
      if (!std::isnan(floor) && (a.goal == "hla-throughput" || a.goal == "target")) {
        Adherence all;
        for (const RunRow* r : a.runs) all.add(floor_adherence(*r, floor, ctx));
        md << fmt::format("| floor {:.0f} Mbit/s | {} | {} of intervals; after a switch {}; worst {:.2f}x | >= 95%{} | {} "
                          "|\n",
                          floor, name, pct(all.met, all.intervals), pct(all.after_met, all.after_switch), all.worst,
                          a.goal == "target" ? " (heuristic, shown)" : "",
                          a.goal == "target" ? "-" : yes(all.intervals && all.share() >= 0.95));
      }
      if (!std::isnan(budget) && a.goal == "hla-energy") {
        Adherence all;
        all.ceiling = true;
        for (const RunRow* r : a.runs) all.add(budget_adherence(*r, budget, 0.05, ctx));
        md << fmt::format("| budget {:.0f} J/GB (dynamic) | {} | {} of intervals within 5%; after a switch {}; worst {:.2f}x | never "
                          "over by > 5% | {} |\n",
                          budget, name, pct(all.met, all.intervals), pct(all.after_met, all.after_switch), all.worst,
                          yes(all.intervals && all.met == all.intervals));
      }
    }
  }
  return md.str();
}

std::string timeline_svg(const std::string& title, const std::vector<const RunRow*>& runs, const HlaContext& ctx) {
  SvgFrame f;
  f.W = 760, f.L = 60, f.R = 200;
  double max_t = 1, max_y = 1;
  for (const RunRow* r : runs)
    for (const auto& p : r->timeline) max_t = std::max(max_t, p.t_s), max_y = std::max(max_y, p.mbps);
  f.max_y = std::ceil(max_y * 1.1 / 50) * 50, f.max_x = std::ceil(max_t / 5) * 5;
  std::vector<std::string> labels;
  for (const RunRow* r : runs) labels.push_back("— " + r->client);
  f.fit_legend(labels);
  std::ostringstream o;
  o << f.open(title, "time, s (dashed: cross traffic switches)", "throughput, Mbit/s");
  // The switches, on the first run's clock (the runs' start-up times differ by little).
  double offset = runs.empty() ? 0 : runs.front()->clock_offset_s;
  for (double s : ctx.switches_s) {
    double t = s - offset;
    if (t <= 0 || t >= f.max_x) continue;
    o << fmt::format(R"s(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#888" stroke-dasharray="4 3"/>)s", f.X(t),
                     f.T, f.X(t), f.H - f.B)
      << "\n";
  }
  int i = 0;
  for (const RunRow* r : runs) {
    const char* c = svg_color(i);
    std::string pts;
    for (const auto& p : r->timeline) pts += fmt::format("{:.1f},{:.1f} ", f.X(p.t_s), f.Y(p.mbps));
    o << fmt::format(R"s(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>)s", pts, c) << "\n"
      << fmt::format(R"s(<text x="{}" y="{}" fill="{}">{}</text>)s", f.legend_x(), f.legend_y(i), c,
                     xfer::xml_escape(labels[size_t(i)]))
      << "\n";
    ++i;
  }
  o << "</svg>\n";
  return o.str();
}

std::string timelines_csv(const std::vector<RunRow>& rows) {
  std::ostringstream o;
  o << "dataset,client,repeat,interval,t_s,mbps,j_per_gb,ext_load\n";
  auto num = [](double x) { return std::isnan(x) ? std::string() : fmt::format("{:.3f}", x); };
  for (const auto& r : rows)
    for (size_t i = 0; i < r.timeline.size(); ++i) {
      const auto& p = r.timeline[i];
      o << fmt::format("\"{}\",\"{}\",{},{},{:.3f},{:.2f},{},{}\n", r.dataset, r.client, r.repeat, i + 1, p.t_s, p.mbps,
                       num(p.j_per_gb), num(p.ext_load));
    }
  return o.str();
}

}  // namespace bench
