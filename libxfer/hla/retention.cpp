// The history's retention (history.h, compact()): runs older than the
// window become folded rows the analysis reads as samples (preprocess).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>

#include "xfer/history.h"
#include "xfer/hla.h"

namespace xfer::hla {

namespace {

// A sample's fold: its path, size class and setting.
FoldedRow fold_key(const Sample& s) {
  FoldedRow f;
  f.path = s.path;
  f.size_class = std::lround(std::log2(std::max(1.0, s.size_mean)));
  f.files_class = std::lround(std::log2(std::max(1.0, s.files)));
  f.cc = s.cc, f.p = s.p, f.pp = s.pp, f.cores = s.cores, f.freq_khz = s.freq_khz;
  f.explored = s.explored;
  f.key = fmt::format("{}|size 2^{}|files 2^{}|cc {} p {} pp {} cores {} freq {}{}", f.path, f.size_class,
                      f.files_class, f.cc, f.p, f.pp, f.cores, f.freq_khz, f.explored ? "|explored" : "");
  return f;
}

double factor(double half_life_days, double from_unix, double to_unix) {
  if (half_life_days <= 0 || to_unix <= from_unix) return 1;
  return std::exp2(-(to_unix - from_unix) / (half_life_days * 86400));
}

// One visit added, its weight fallen from its own time to `now`.
void add(FoldedRow& f, const Sample& s, double now, double half_life_days) {
  const double w = factor(half_life_days, s.t_unix, now), t = w * s.seconds;
  f.seconds += t;
  f.gb += w * s.gb;
  f.mbps_sq += t * (s.mbps_sd * s.mbps_sd + s.mbps * s.mbps);
  if (s.j_per_gb) f.joules += w * *s.j_per_gb * s.gb;
  else f.gb_no_energy += w * s.gb;
  f.intervals += s.intervals;
  f.visits += 1;
  f.w_link_mbps += t * s.link_mbps, f.w_rtt_ms += t * s.rtt_ms, f.w_loss_pct += t * s.loss_pct;
  f.w_files += t * s.files, f.w_bytes += t * s.bytes, f.w_size_mean += t * s.size_mean;
  f.w_size_sd += t * s.size_sd, f.w_ext_load += t * s.ext_load;
  f.first_unix = f.first_unix > 0 ? std::min(f.first_unix, s.t_unix) : s.t_unix;
  f.last_unix = std::max(f.last_unix, s.t_unix);
}

}  // namespace

FoldedRow decayed(const FoldedRow& f, double at_unix) {
  FoldedRow d = f;
  const double k = factor(f.half_life_days, f.decayed_to, at_unix);
  if (k == 1) return d;
  for (double* v : {&d.seconds, &d.gb, &d.mbps_sq, &d.joules, &d.gb_no_energy, &d.w_link_mbps, &d.w_rtt_ms,
                    &d.w_loss_pct, &d.w_files, &d.w_bytes, &d.w_size_mean, &d.w_size_sd, &d.w_ext_load})
    *v *= k;
  d.decayed_to = at_unix;
  return d;
}

Sample folded_sample(const FoldedRow& f) {
  Sample s;
  s.run = "folded:" + f.key;
  s.path = f.path;
  const double t = f.seconds > 0 ? f.seconds : 1;
  s.link_mbps = f.w_link_mbps / t, s.rtt_ms = f.w_rtt_ms / t, s.loss_pct = f.w_loss_pct / t;
  s.files = f.w_files / t, s.bytes = f.w_bytes / t, s.size_mean = f.w_size_mean / t, s.size_sd = f.w_size_sd / t;
  s.ext_load = f.w_ext_load / t;
  s.cc = int(f.cc), s.p = int(f.p), s.pp = int(f.pp), s.cores = int(f.cores), s.freq_khz = long(f.freq_khz);
  s.seconds = f.seconds;
  s.gb = f.gb;
  s.mbps = f.seconds > 0 ? f.gb * 8e3 / f.seconds : 0;
  s.mbps_sd = std::sqrt(std::max(0.0, f.mbps_sq / t - s.mbps * s.mbps));
  if (f.gb > 0 && f.gb_no_energy <= 1e-9 * f.gb) s.j_per_gb = f.joules / f.gb;
  s.intervals = int(std::min<int64_t>(f.intervals, 1 << 30));
  s.explored = f.explored;
  s.t_unix = f.last_unix;
  return s;
}

CompactReport compact(History& h, const Retention& r, double now_unix) {
  CompactReport rep;
  std::vector<RunAge> ages = h.run_ages();
  std::sort(ages.begin(), ages.end(), [](const RunAge& a, const RunAge& b) { return a.ended_unix < b.ended_unix; });
  const double cutoff = now_unix - r.keep_days * 86400;
  size_t rows = 0;
  for (const RunAge& a : ages) rows += a.rows;
  // Oldest first: those past the window, then the oldest others while the
  // rows left are too many. A run still running stays whatever its age.
  std::vector<RunAge> out;
  for (const RunAge& a : ages) {
    if (a.outcome == "running") continue;
    if (a.ended_unix >= cutoff && rows <= r.keep_rows) continue;
    out.push_back(a);
    rows -= a.rows;
  }
  std::map<std::string, FoldedRow> folded;
  for (FoldedRow& f : h.read_folded()) folded.emplace(f.key, std::move(f));
  rep.folded_before = folded.size();
  // In batches: each one transaction (its folded rows and its runs gone
  // together), so a compaction stopped half-way loses and doubles nothing.
  constexpr size_t kBatch = 500;
  for (size_t at = 0; at < out.size(); at += kBatch) {
    std::vector<RunAge> batch(out.begin() + long(at), out.begin() + long(std::min(out.size(), at + kBatch)));
    for (const RunAge& a : batch) {
      const bool done = a.outcome == "done";
      (done ? rep.runs_folded : rep.runs_dropped) += 1;
      (done ? rep.rows_folded : rep.rows_dropped) += a.rows;
    }
    HistoryData d = h.read_runs(batch);
    std::set<std::string> touched;  // keys this batch added to
    if (!d.intervals.empty()) {
      Preprocessed p = preprocess(d);
      for (const Sample& s : p.samples) {
        FoldedRow k = fold_key(s);
        auto [it, fresh] = folded.emplace(k.key, k);
        if (!fresh && !touched.count(k.key)) it->second = decayed(it->second, now_unix);
        it->second.decayed_to = now_unix;
        add(it->second, s, now_unix, r.half_life_days);
        it->second.half_life_days = r.half_life_days;
        touched.insert(k.key);
      }
    }
    std::vector<FoldedRow> write;
    for (const std::string& key : touched) write.push_back(folded.at(key));
    h.fold(write, batch);
  }
  rep.folded_after = folded.size();
  rep.runs_left = ages.size() - rep.runs_folded - rep.runs_dropped;
  rep.rows_left = rows;
  return rep;
}

}  // namespace xfer::hla
