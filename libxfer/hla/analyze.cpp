// The offline analysis end to end (hla.h): steps 1-4 and the predictor.
#include <algorithm>
#include <fmt/format.h>

#include "xfer/clock.h"
#include "xfer/hla.h"

namespace xfer::hla {

Analysis analyze(const HistoryData& h, const std::string& history_name, size_t min_rows, uint64_t seed) {
  Analysis a;
  if (h.intervals.empty() && h.folded.empty())
    throw HistoryError("history " + history_name + " holds no interval rows: nothing to learn from (run transfers with "
                       "a history, or xfer-hla collect)");
  a.pre = preprocess(h);
  if (a.pre.samples.empty()) {
    std::string why;
    for (const RuleCount& r : a.pre.rules)
      if (r.removed) why += fmt::format("{}{} {}", why.empty() ? "" : "; ", r.removed, r.rule);
    throw HistoryError(fmt::format("history {}: none of its {} rows is usable after preprocessing ({})", history_name,
                                   a.pre.input, why));
  }
  a.strata = stratify(a.pre.samples, min_rows);
  ParamTable& t = a.table;
  t.generated_unix = unix_now();
  t.history = history_name;
  t.paths = path_facts(h);
  if (t.paths.size() > kMaxTablePaths) {  // the most recently used
    std::sort(t.paths.begin(), t.paths.end(),
              [](const PathFacts& x, const PathFacts& y) { return x.newest_unix > y.newest_unix; });
    t.paths.resize(kMaxTablePaths);
  }
  for (const Stratum& st : a.strata.strata) {
    TableStratum ts;
    ts.id = st.id;
    ts.link_mbps = st.link_mbps, ts.rtt_ms = st.rtt_ms, ts.loss_pct = st.loss_pct;
    ts.files = st.files, ts.bytes = st.bytes, ts.size_mean = st.size_mean, ts.size_sd = st.size_sd;
    ts.load_lo = st.load_lo, ts.load_hi = st.load_hi;
    ts.rows = st.rows.size();
    if (!st.rows.empty()) ts.load_mean = 0;  // (-1, "not known", for a stratum of no rows)
    for (size_t r : st.rows) {
      const Sample& x = a.pre.samples[r];
      ts.load_mean += x.ext_load / double(st.rows.size());
      ts.seconds += x.seconds;
      if (x.explored) ts.explored_s += x.seconds;
    }
    ts.measured = measured_settings(a.pre.samples, st.rows);
    bool energy = std::all_of(st.rows.begin(), st.rows.end(), [&](size_t r) { return a.pre.samples[r].j_per_gb.has_value(); });
    StratumModel m;
    if (st.rows.size() >= min_rows) {
      m = fit_stratum(a.pre.samples, st.rows, seed);
      ts.one_frequency = m.one_frequency;
      ts.rmse_t = m.rmse_t, ts.rmse_e = m.rmse_e, ts.rmse_t_rows = m.rmse_t_rows, ts.rmse_e_rows = m.rmse_e_rows;
      ts.repeat_t = m.repeat_t;
      double trust = std::max(kTrustScatter * m.repeat_t, kTrustRmse);
      // The additive parts can also miss a setting the history measured
      // well (their sum at a cell they were not fitted to together: on h2,
      // cc 1 pp 31 fast and cc 1 pp 1 slow put cc 1 pp 1 at the average).
      const MeasuredSetting* off = nullptr;
      size_t misses = 0;
      double off_pred = 0;
      for (const MeasuredSetting& x : ts.measured) {
        if (x.visits < 2 && x.seconds < kWellMeasuredS) continue;
        double pred = m.throughput(x.knobs);
        if (std::abs(pred - x.mbps) > std::max(3 * x.mbps_sd, kMeasuredMiss * x.mbps)) {
          ++misses;
          if (!off) off = &x, off_pred = pred;
        }
      }
      if (off) {
        ts.decided = "measured";
        ts.why = fmt::format("the surfaces put {} well-measured setting{} more than {:.0f}% (and 3 sd) from what was "
                             "measured (cc {} p {} pp {}: {:.0f} Mbit/s predicted, {:.0f} measured): the best of {} "
                             "measured settings",
                             misses, misses == 1 ? "" : "s", 100 * kMeasuredMiss, off->knobs.cc, off->knobs.p,
                             off->knobs.pp, off_pred, off->mbps, ts.measured.size());
      } else if (m.test_rows > 0 && m.rmse_t_rows > trust) {
        ts.decided = "measured";
        ts.why = fmt::format("the surfaces predict held-out rows within {:.0f}% of the mean, past {:.0f}% ({} x the repeat "
                             "scatter of {:.0f}%, at least {:.0f}%): the best of {} measured settings",
                             100 * m.rmse_t_rows, 100 * trust, kTrustScatter, 100 * m.repeat_t, 100 * kTrustRmse,
                             ts.measured.size());
      } else {
        ts.why = fmt::format("eq. 10 / 11 over the surfaces ({} rows; held-out RMSE {:.0f}% of the mean, repeat scatter "
                             "{:.0f}%)", st.rows.size(), 100 * m.rmse_t_rows, 100 * m.repeat_t);
      }
    } else {
      ts.decided = "measured";
      ts.why = fmt::format("{} samples, fewer than {} to fit surfaces: the best of {} measured settings", st.rows.size(),
                           min_rows, ts.measured.size());
    }
    if (ts.decided == "surfaces") {
      ts.entries = sla_entries(m, candidates(m));
    } else {
      std::vector<Choice> tried;
      for (const MeasuredSetting& x : ts.measured) tried.push_back({x.knobs, x.mbps, x.j_per_gb, true});
      ts.entries = sla_entries(tried, energy);
      a.skipped.push_back(st.id + ": " + ts.why);
    }
    t.rows_used += st.rows.size();
    t.strata.push_back(std::move(ts));
    a.models.push_back(std::move(m));
  }
  a.predictor = train_predictor(t, a.models, a.pre.samples, seed);
  return a;
}

}  // namespace xfer::hla
