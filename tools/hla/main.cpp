// xfer-hla: the offline half of Cross-LayerHLA.
//
//   xfer-hla collect PLAN.toml --history PATH|URL --out DIR [--quick]
//   xfer-hla analyze --history PATH|URL --out TABLE [--plots DIR] [--reload]
//   xfer-hla compact --history PATH|URL [--keep-days 7] [--keep-rows 200000] [--half-life-days 30]
//
// collect fills a history on this machine (collect.h); analyze turns a
// history into the parameter table xferd and xferctl load (xfer/hla.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>

#include "collect.h"
#include <libalglib/ap.h>

#include "xfer/clock.h"
#include "xfer/hla.h"
#include "xfer/text.h"

namespace {

int analyze(const std::string& where, const std::string& out, const std::string& plots, size_t min_rows, bool reload) {
  using namespace xfer::hla;
  std::unique_ptr<History> h;
  HistoryData data;
  try {
    HistoryOptions o;
    o.read_only = true;
    h = open_history(where, o);
    data = h->read();
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-hla analyze: {}; no table written\n", xfer::printable(e.what()));
    return 2;
  }
  Analysis a;
  try {
    a = xfer::hla::analyze(data, h->where(), min_rows);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-hla analyze: {}; no table written\n", xfer::printable(e.what()));
    return 2;
  } catch (const alglib::ap_error& e) {  // ALGLIB's own, not a std::exception
    fmt::print(stderr, "xfer-hla analyze: ALGLIB: {}; no table written\n", xfer::printable(e.msg));
    return 2;
  }
  fmt::print("history {}: {} runs, {} interval rows\n\n", xfer::printable(h->where()), data.runs.size(), a.pre.input);
  fmt::print("Step 1, preprocessing ({} rows in):\n", a.pre.input);
  size_t left = a.pre.input;
  for (const RuleCount& r : a.pre.rules) {
    left -= r.removed;
    fmt::print("  -{:>6}  ({:>6} left)  {}\n", r.removed, left, r.rule);
  }
  fmt::print("  = {} rows kept, averaged into {} samples (one per setting held: run, chunk, params, visit)\n", a.pre.kept,
             a.pre.samples.size() - a.pre.folded);
  if (a.pre.folded)
    fmt::print("  + {} samples from older runs, folded (xfer-hla compact: one per path, size class and setting; {} "
               "folded rows)\n",
               a.pre.folded, data.folded.size());
  fmt::print("\n");
  fmt::print("Step 2, strata (tier 1 path, UPGMA; tier 2 dataset, UPGMA; tier 3 external-load bands):\n{}\n",
             a.strata.tree);
  if (a.pre.reinstated)
    fmt::print("  (+{} settling or partial rows kept: finished chunks with no other)\n", a.pre.reinstated);
  fmt::print("\nStep 3, surfaces: RMSE on the held-out 30%, % of the mean (s1 cores/freq, s2 cc,p, s3 pp; rows: the "
             "whole model per row; rep: how far repeated visits to one setting scatter, the floor under rows)\n");
  fmt::print("  {:<12} {:>6}  {:>7} {:>7} {:>7} {:>7} {:>7}   {:>7} {:>7} {:>7} {:>7} {:>7}\n", "stratum", "rows", "T s1",
             "T s2", "T s3", "T rows", "T rep", "E s1", "E s2", "E s3", "E rows", "E rep");
  size_t surfaces = 0, below = 0;
  for (size_t i = 0; i < a.table.strata.size(); ++i) {
    const TableStratum& s = a.table.strata[i];
    const StratumModel& m = a.models[i];
    if (!m.fitted) {
      fmt::print("  {:<12} {:>6}  not fitted: too few rows\n", s.id, s.rows);
      continue;
    }
    fmt::print("  {:<12} {:>6}  {:>6.1f}% {:>6.1f}% {:>6.1f}% {:>6.1f}% {:>6.1f}%   {:>6.1f}% {:>6.1f}% {:>6.1f}% {:>6.1f}% "
               "{:>6.1f}%{}\n",
               s.id, s.rows, 100 * s.rmse_t[0], 100 * s.rmse_t[1], 100 * s.rmse_t[2], 100 * s.rmse_t_rows,
               100 * m.repeat_t, 100 * s.rmse_e[0], 100 * s.rmse_e[1], 100 * s.rmse_e[2], 100 * s.rmse_e_rows,
               100 * m.repeat_e, s.one_frequency ? "" : "  (s1 over cores and frequency)");
    for (int j = 0; j < 3; ++j) {
      surfaces += 1 + (m.has_energy ? 1 : 0);
      below += (s.rmse_t[size_t(j)] < 0.1) + (m.has_energy && s.rmse_e[size_t(j)] < 0.1);
    }
  }
  fmt::print("  {} of {} surfaces below 10% of the mean; where the machine offers one frequency, s1 is a curve over "
             "cores\n",
             below, surfaces);
  fmt::print("\nStep 4, SLA optima (eq. 10 at 90% of the best throughput; eq. 11 at 1.25x the least energy):\n");
  for (size_t i = 0; i < a.table.strata.size(); ++i) {
    const TableStratum& s = a.table.strata[i];
    fmt::print("  {:<12} decided by {}: {}\n", s.id, s.decided, s.why);
    size_t floors = 0, ceilings = 0;
    for (const TableEntry& e : s.entries) (e.sla == "throughput" ? floors : ceilings) += 1;
    for (auto [sla, level] : {std::pair<const char*, double>{"throughput", 0.9}, {"energy", 1.25}}) {
      bool met = false;
      const TableEntry* e = choose_level(s, sla, level, met);
      if (!e || e->sla != sla) continue;
      fmt::print("  {:<12} {:<10} cc {:>3}, p {}, pp {:>2}, cores {}  -> {:>7.1f} Mbit/s, {:>8.1f} J/GB{}\n", s.id, e->sla,
                 e->choice.knobs.cc, e->choice.knobs.p, e->choice.knobs.pp, e->choice.knobs.cores, e->choice.mbps,
                 e->choice.j_per_gb, met ? "" : "  (out of reach: the closest)");
    }
    fmt::print("  {:<12} {} steps of eq. 10 (floors), {} of eq. 11 (ceilings), solved over {}\n", s.id, floors, ceilings,
               s.decided == "surfaces" ? "the surfaces' samples" : fmt::format("{} measured settings", s.measured.size()));
    const StratumModel::TimeCost& tc = a.models[i].time_cost;
    if (s.decided == "surfaces" && a.models[i].has_energy)
      fmt::print("  {:<12} {}\n", s.id,
                 tc.fitted ? fmt::format("a GB costs {:.0f} J + {:.3g} J a second + {:.3g} J a connection-second "
                                         "(fitted over {} measured settings): what a setting whose throughput the "
                                         "bound cuts pays for the longer time",
                                         tc.per_gb, tc.per_s, tc.per_conn_s, tc.settings)
                           : fmt::format("the cost of time is not fitted ({} measured settings, {} needed): a setting "
                                         "whose throughput the bound cuts is put at its J/GB times the time it adds",
                                         tc.settings, kMinTimeCostSettings));
  }
  const PredictorReport& p = a.predictor;
  fmt::print("\nFastHLA predictor (leaving one stratum out): {:.1f}% of {} cases with every "
             "parameter within one level of the table's optimum ({:.1f}% for the decision forests, SLA as a level; "
             "{:.1f}% for the network, SLA as a bound); R2 {:.3f} of the throughput the predicted "
             "parameters reach against the optimum's ({} cases; the standard R2 = 1 - sum (y - f)^2 / sum (y - mean y)^2: "
             "FastHLA's eq. 12 as printed, 1 - sum (y - mean y)^2 / sum (f - mean y)^2, has the terms the wrong way round)\n",
             100 * p.accuracy, p.test_cases, 100 * p.accuracy_level, 100 * p.accuracy_bound, p.r2, p.r2_rows);
  if (p.r2_rows > 0)
    fmt::print("  regret: the predicted settings give up a median {:.1f}% of the throughput the table's optimum reaches "
               "(the same cases)\n", 100 * p.regret);
  if (a.table.predictor.is_object())
    fmt::print("  served to jobs: {}\n",
               predictor_record_serves(p.r2, p.r2_rows)
                   ? fmt::format("yes, within the strata it learned from (R2 >= {:.2f})", kServeR2)
                   : fmt::format("no: its held-out R2 is {:.2f} over {} cases (served at >= {:.2f} over {} at least); "
                                 "jobs the table lacks start from the formulas",
                                 p.r2, p.r2_rows, kServeR2, kServeCases));
  if (a.table.strata.empty()) {  // cannot happen: analyze() throws when no sample is left
    fmt::print(stderr, "xfer-hla analyze: no stratum; no table written\n");
    return 1;
  }
  try {
    // The table is written only if xferd would read it: the same checks.
    table_from_json(to_json(a.table));
  } catch (const TableError& e) {
    fmt::print(stderr, "xfer-hla analyze: the table made is not one xferd reads ({}); no table written\n",
               xfer::printable(e.what()));
    return 1;
  }
  try {
    save_table(a.table, out);
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-hla analyze: {}\n", e.what());
    return 1;
  }
  fmt::print("\ntable: {} ({})\n", out, describe(a.table));
  if (!plots.empty()) {
    std::vector<std::string> files = write_plots(a.models, a.table, plots);
    fmt::print("plots: {} files in {}, e.g. {}\n", files.size(), plots, files.empty() ? "-" : files.front());
  }
  if (reload) {
    // xferd reads the table again on SIGHUP (systemctl reload xferd).
    int rc = std::system("systemctl reload xferd >/dev/null 2>&1 || pkill -HUP -x xferd >/dev/null 2>&1");
    fmt::print("reload: {}\n", rc == 0 ? "xferd asked to read the table again" : "no xferd running to tell");
  }
  return 0;
}

int compact_history(const std::string& where, const xfer::hla::Retention& r) {
  using namespace xfer::hla;
  if (!is_postgres_url(where) && ::access(where.c_str(), F_OK) != 0) {
    fmt::print("history {}: none yet; nothing to compact\n", xfer::printable(where));
    return 0;
  }
  try {
    HistoryOptions o;
    o.direct = true;  // a fleet's server itself, not a journal
    std::unique_ptr<History> h = open_history(where, o);
    auto t0 = std::chrono::steady_clock::now();
    double now = xfer::unix_now();
    CompactReport c = compact(*h, r, now);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("history {}: kept as recorded: the runs that ended within {:g} days, at most {} interval rows\n"
               "  folded: {} runs that ended done ({} interval rows) into hla_folded, {} rows there ({} before; "
               "weights halve every {:g} days)\n"
               "  dropped: {} runs that did not end done ({} interval rows; the analysis reads none of them)\n"
               "  left as recorded: {} runs, {} interval rows ({:.1f} s)\n",
               xfer::printable(h->where()), r.keep_days, r.keep_rows, c.runs_folded, c.rows_folded, c.folded_after,
               c.folded_before, r.half_life_days, c.runs_dropped, c.rows_dropped, c.runs_left, c.rows_left, s);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "xfer-hla compact: {}; the runs not folded by then stay as recorded\n", xfer::printable(e.what()));
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xfer-hla: the transfer history's offline analysis (Cross-LayerHLA)"};
  app.require_subcommand(1);
  std::string plan, history, out, plots;
  bool quick = false, reload = false;
  size_t min_rows = 12;
  CLI::App* c = app.add_subcommand("collect", "fill a history: static sweeps over xfer-linkemu paths");
  c->add_option("plan", plan, "sweep plan (TOML), e.g. tests/bench/hla-collect.toml")->required();
  c->add_option("--history", history, "the history to fill: a SQLite file or a postgresql:// URL")->required();
  c->add_option("--out", out, "work directory (datasets, logs, the nginx run)")->required();
  c->add_flag("--quick", quick, "the quick plan (under 3 minutes)");
  CLI::App* an = app.add_subcommand("analyze", "turn a history into the parameter table");
  an->add_option("--history", history, "a SQLite file or a postgresql:// URL")->required();
  an->add_option("--out", out, "the parameter table to write (JSON)")->required();
  an->add_option("--plots", plots, "write SVG plots of every stratum's surfaces here");
  an->add_option("--min-rows", min_rows, "strata with fewer rows take the best of their measured settings (no surfaces)")->check(CLI::Range(4, 1000000));
  an->add_flag("--reload", reload, "ask xferd to read the table again (SIGHUP)");
  xfer::hla::Retention keep;
  CLI::App* cp = app.add_subcommand("compact", "fold what the history no longer keeps as recorded (it stays bounded)");
  cp->add_option("--history", history, "a SQLite file or a postgresql:// URL")->required();
  cp->add_option("--keep-days", keep.keep_days, "runs that ended within this many days stay as recorded")
      ->capture_default_str()->check(CLI::Range(0.0, 36500.0));
  cp->add_option("--keep-rows", keep.keep_rows, "...and at most this many interval rows (the oldest runs fold first)")
      ->capture_default_str()->check(CLI::Range(size_t(0), size_t(1) << 40));
  cp->add_option("--half-life-days", keep.half_life_days, "a folded figure's weight halves over this many days")
      ->capture_default_str()->check(CLI::Range(0.1, 36500.0));
  CLI11_PARSE(app, argc, argv);
  if (*cp) return compact_history(history, keep);
  if (*c) {
    try {
      hlatool::Plan p = hlatool::load_plan(plan, quick, int(sysconf(_SC_NPROCESSORS_ONLN)));
      return hlatool::collect(p, quick, history, out);
    } catch (const std::exception& e) {
      fmt::print(stderr, "xfer-hla collect: {}\n", e.what());
      return 2;
    }
  }
  return analyze(history, out, plots, min_rows, reload);
}
